package v2

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
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
// other. The direct mode's flush warps are machines too. The barrier
// groups and the notify warps, a few per rank, run on processes; their
// per-peer loops run on children without a process
// (gpu.Group.ParallelWait) where gin and gpu have a Then form of every
// operation in the loop body (signals, puts, word waits and stores: not
// put_value or waitSignalMeetShadow).

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

// kernel is one rank's launch of a V2 kernel's warps: the GPU, the
// kernel's name, its grid sync words and participant count, and how many
// grid syncs its warps run before their program.
type kernel struct {
	g       *gpu.GPU
	name    string
	words   *workload.GPUArray
	reached func(v uint64) bool // a sync word has every participant's arrival
	pre     int
}

func newKernel(g *gpu.GPU, name string, words *workload.GPUArray, n uint64, pre int) *kernel {
	return &kernel{g: g, name: name, words: words, reached: func(v uint64) bool { return v >= n }, pre: pre}
}

// machine is a warp's state machine.
type machine interface {
	sim.Handler
	base() *warp
}

// launch launches m as warp role+i of its SM (name kernel/smSM/rolei), a
// group of one warp without a process: it runs the kernel's first grid
// syncs, then m.
func (k *kernel) launch(m machine, role string, i int) {
	k.launchAs(m, k.name+"/sm"+strconv.Itoa(m.base().sm)+"/"+role+strconv.Itoa(i))
}

// launchAs is launch with the group's name given whole.
func (k *kernel) launchAs(m machine, name string) {
	b := m.base()
	b.grid = gridSync{words: k.words, reached: k.reached, last: k.pre - 1, h: m}
	b.grid.pc = gsArrive
	b.t = k.g.LaunchHandler(name, 32, &b.grid, 0)
	b.grid.t = b.t
}

// warp is what every V2 warp machine holds: its group, the rank and SM it
// runs on, and its grid syncs.
type warp struct {
	t     *gpu.Group
	r, sm int
	grid  gridSync
	rt    routing
}

func (b *warp) base() *warp { return b }

// route starts the warp's routing of a token: a load of its top-k row
// from topk (L2-resident), then cycles cycles of dedup and bookkeeping;
// h continues.
func (b *warp) route(topk *mem.Region, cycles int64, h sim.Handler) {
	b.rt = routing{t: b.t, cycles: cycles, h: h}
	b.t.Load64Then(topk, 0, &b.rt, 0)
}

// routing is warp.route after the load.
type routing struct {
	t      *gpu.Group
	cycles int64
	h      sim.Handler
}

// Handle implements sim.Handler: the top-k row is in.
func (x *routing) Handle(*sim.Sim, uint64) { x.t.CyclesThen(x.cycles, x.h, 0) }

// gridSync runs a machine's grid syncs on the kernel's sync words:
// gpu.Group.GridSync's arrival (a device atomic on the sync word) and
// wait until every group of the kernel has arrived, for sync points
// i..last in turn; then the machine h continues, or (end) its group
// ends.
type gridSync struct {
	t       *gpu.Group
	words   *workload.GPUArray
	reached func(v uint64) bool
	i, last int
	end     bool
	h       sim.Handler
	pc      uint8
}

// Steps of a gridSync.
const (
	gsArrive uint8 = iota // arrive at sync point i
	gsWait                // arrived: wait for the others
	gsNext                // every group arrived: the next point, or done
)

// drainEnd ends the warp: it sleeps until stored (tma_store_wait: the
// warp's TMA stores have landed), runs grid sync i and ends the group.
func (g *gridSync) drainEnd(stored sim.Time, i int) {
	g.i, g.last, g.end = i, i, true
	g.pc = gsArrive
	if d := stored.Sub(g.t.Now()); d > 0 {
		g.t.SleepThen(d, g, 0)
		return
	}
	g.Handle(nil, 0)
}

// Handle implements sim.Handler.
func (g *gridSync) Handle(_ *sim.Sim, _ uint64) {
	t, w := g.t, g.words
	switch g.pc {
	case gsArrive:
		g.pc = gsWait
		t.GridArriveThen(w.R, w.Off(g.i), g, 0)
	case gsWait:
		g.pc = gsNext
		t.GridWaitThen(w.R, w.Off(g.i), g.reached, g, 0)
	case gsNext:
		switch {
		case g.i < g.last:
			g.i++
			g.pc = gsArrive
			g.Handle(nil, 0)
		case g.end:
			t.End()
		default:
			g.h.Handle(t.GPU().Sim(), 0)
		}
	}
}
