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

// gridSync runs a machine's grid syncs: gpu.Group.GridSync's arrival (a
// device atomic on the sync word) and wait until every one of the
// kernel's n groups has arrived, for sync points first..last in turn; then
// the machine continues, or (end) its group ends.
type gridSync struct {
	t       *gpu.Group
	words   *workload.GPUArray
	i, last int
	end     bool
	reached func(v uint64) bool
	h       sim.Handler
}

// Steps of a gridSync.
const (
	gsArrive = iota // arrive at sync point i
	gsWait          // arrived: wait for the others
	gsNext          // every group arrived: the next point, or done
)

// init sets the kernel's participant count.
func (g *gridSync) init(n uint64) { g.reached = func(v uint64) bool { return v >= n } }

// warp is what every V2 warp machine holds: its group, the rank and SM it
// runs on, and its grid syncs.
type warp struct {
	t     *gpu.Group
	r, sm int
	grid  gridSync
}

// launch launches warp b, whose machine is h, on g as a warp named name
// without a process: its group runs the kernel's grid syncs first..last
// on words (n groups arrive at each), then h.
func (b *warp) launch(g *gpu.GPU, name string, words *workload.GPUArray, n uint64, first, last int, h sim.Handler) {
	b.grid.init(n)
	b.grid.words, b.grid.i, b.grid.last, b.grid.h = words, first, last, h
	b.t = g.LaunchHandler(name, 32, &b.grid, gsArrive)
	b.grid.t = b.t
}

// drainEnd ends a warp whose TMA stores land at stored: it sleeps until
// then (tma_store_wait), runs grid sync i on words and ends the group.
func (g *gridSync) drainEnd(t *gpu.Group, stored sim.Time, words *workload.GPUArray, i int) {
	g.t, g.words, g.i, g.last, g.end, g.h = t, words, i, i, true, nil
	if d := stored.Sub(t.Now()); d > 0 {
		t.SleepThen(d, g, gsArrive)
		return
	}
	g.Handle(nil, gsArrive)
}

// Handle implements sim.Handler.
func (g *gridSync) Handle(_ *sim.Sim, step uint64) {
	t, w := g.t, g.words
	switch step {
	case gsArrive:
		t.GridArriveThen(w.R, w.Off(g.i), g, gsWait)
	case gsWait:
		t.GridWaitThen(w.R, w.Off(g.i), g.reached, g, gsNext)
	case gsNext:
		switch {
		case g.i < g.last:
			g.i++
			g.Handle(nil, gsArrive)
		case g.end:
			t.End()
		default:
			g.h.Handle(t.GPU().Sim(), 0)
		}
	}
}
