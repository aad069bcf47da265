package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gpu"
)

// TestDeadlockNamesTheWaits breaks V2 direct's barrier (every coop fan-out
// skips its last item, so the last rank is never signalled): on both
// kernels the deadlock report names the GIN waits, with the signal, the
// value awaited and the value seen, and tells the run's end (an idle ACK
// timer's no-op, a local ACK timeout after the last packet) from when the
// last rank finished.
func TestDeadlockNamesTheWaits(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 16)
	for _, seq := range []bool{true, false} {
		opt := Options{Mode: ModeV2Direct, Backend: BackendGDAKI, Seed: 1, Layers: 1, Sequential: seq, Workers: 2, Backends: backends,
			Tune: func(p *machine.Profile) { p.GPU.Mutations |= gpu.MutParallelDropLast }}
		_, err := Run(tr, spec, opt)
		require.Error(t, err, "sequential %v", seq)
		msg := err.Error()
		assert.Regexp(t, `deadlock at t=4\.29[0-9]+s`, msg, "sequential %v: the last event is an idle timer (4.096us << 20 after its arming)", seq)
		assert.Regexp(t, `the last rank done at t=[0-9.]+us\)`, msg, "sequential %v", seq)
		assert.Regexp(t, `rank 15 ctx 0 coop "dispatch/barrier/t0" waits signal 0 >= 1 \(value 0\)`, msg, "sequential %v", seq)
	}
}

// TestOneReadBudgetCompletes runs V2 direct through the NICs with a read
// budget of one payload read per NIC: every put waits on the NIC's
// readWait list, and a freed read must go to a QP still waiting, not to
// one that found the budget meanwhile (a stale entry), else the QPs behind
// it are never woken and the step deadlocks without a lost packet.
func TestOneReadBudgetCompletes(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 64)
	for _, seq := range []bool{true, false} {
		opt := Options{Mode: ModeV2Direct, Backend: BackendGDAKI, RDMAOnly: true, Seed: 1, Layers: 1, Sequential: seq, Workers: 2,
			Backends: backends, Tune: func(p *machine.Profile) { p.NIC.ReadAhead = 1 }}
		_, err := Run(tr, spec, opt)
		require.NoError(t, err, "sequential %v", seq)
	}
}
