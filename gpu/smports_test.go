package gpu

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/require"
)

// Reads and writes queue on their own port in call order, each at its own
// rate; a transfer asked for later than the port frees starts when asked.
func TestSMPorts(t *testing.T) {
	p := NewSMPorts(sim.GBps(200), sim.GBps(50))
	rd := sim.GBps(200).TxTime(1000)
	wr := sim.GBps(50).TxTime(1000)
	require.Equal(t, sim.Time(0).Add(rd), p.Read(0, 1000))
	require.Equal(t, sim.Time(0).Add(2*rd), p.Read(0, 1000), "behind the first read")
	require.Equal(t, sim.Time(0).Add(wr), p.Write(0, 1000), "writes do not queue behind reads")
	late := sim.Time(0).Add(10 * rd)
	require.Equal(t, late.Add(rd), p.Read(late, 1000), "an idle port starts at once")
	require.Equal(t, late.Add(2*rd), p.Read(0, 1000), "call order: an earlier at still queues")
}
