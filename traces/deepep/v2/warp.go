package v2

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces/workload"
)

// The V2 warps that run per channel or per token (direct dispatch and
// combine warps, hybrid scale-out, forward and scale-up warps, the
// scale-out warps' lanes) are state machines on groups without a process
// (gpu.GPU.LaunchHandler), driven as every device program of the project
// that has no process is (DeepEP LL's and HT's warps, the GIN backends'
// issue paths): the machine is the sim.Handler of gpu's Then operations.
// Handle runs the step named by pc in a loop; a step that starts an
// operation first sets pc to the step that follows it, passes the machine
// as the operation's continuation and returns. An operation that takes
// no time continues the machine from inside the call that started it, so
// a step writes nothing after starting its operation. Each machine's doc
// comment gives the warp's program in order; its step constants name the
// places the program resumes at.
//
// A machine issues GIN operations through the Then forms (PutThen,
// SignalThen, FlushThen), which need a backend that issues for a group
// without a process (gin.ThenBackend: GDAKI and Proxy); Setup refuses any
// other. The barrier groups, the notify warps and the direct mode's flush
// warps, a few per rank, run on processes.

// needThen says why the V2 kernels cannot run on dc's backend, if they
// cannot.
func needThen(dc *gin.DevComm) error {
	if _, ok := dc.Backend().(gin.ThenBackend); !ok {
		return fmt.Errorf("v2: GIN backend %s issues only for a group with a process; the V2 warps have none "+
			"(they need a gin.ThenBackend: gdaki or proxy)", dc.Backend().Name())
	}
	return nil
}

// sleepThen is a machine's sleepUntil: when at is still ahead, t sleeps
// until then and continues at h (true: return from Handle); else false.
func sleepThen(t *gpu.Group, at sim.Time, h sim.Handler) bool {
	if d := at.Sub(t.Now()); d > 0 {
		t.SleepThen(d, h, 0)
		return true
	}
	return false
}

// gridSync is gpu.Group.GridSync for a machine: the arrival (a device
// atomic on the sync word), then the wait until every one of the kernel's
// n groups has arrived; the machine continues after the wait.
type gridSync struct {
	t       *gpu.Group
	words   *workload.GPUArray
	i       int
	reached func(v uint64) bool
	h       sim.Handler
}

// init sets the kernel's participant count.
func (g *gridSync) init(n uint64) { g.reached = func(v uint64) bool { return v >= n } }

// start starts t's grid sync i on words; h continues after it.
func (g *gridSync) start(t *gpu.Group, words *workload.GPUArray, i int, h sim.Handler) {
	g.t, g.words, g.i, g.h = t, words, i, h
	t.GridArriveThen(words.R, words.Off(i), g, 0)
}

// Handle implements sim.Handler: the arrival is done, wait.
func (g *gridSync) Handle(*sim.Sim, uint64) {
	g.t.GridWaitThen(g.words.R, g.words.Off(g.i), g.reached, g.h, 0)
}
