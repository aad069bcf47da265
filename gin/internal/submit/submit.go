package submit

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// Stepper is a submit state machine: Step runs its steps from the current
// one (Run.PC) until a step starts an operation that takes time (its
// completion calls the run's Handle, which steps on) or the run ends
// (Free.Recycle).
type Stepper interface{ Step() }

// Run is one run of a submit state machine by group T: the driver that
// every backend's machine embeds. Go starts the machine at a step; the
// Then operations it starts continue at the machine itself (Run's
// Handle); its last step calls Free.Recycle.
type Run struct {
	T    *gpu.Group
	PC   uint8       // the machine's current step
	K    sim.Handler // the continuation (nil: resume T's process)
	KArg uint64

	m    Stepper
	what string // names the run in events and park reasons

	parked bool // T's process waits for the end
	done   bool
	failed bool
}

// NewRun returns a run of machine m by group t; what names it in event
// names and park reasons ("gdaki issue").
func NewRun(m Stepper, t *gpu.Group, what string) Run { return Run{T: t, m: m, what: what} }

// Go runs the machine from step pc. With k nil the caller is T's
// process (a blocking Issue, FlushAsync or Wait): the steps that take no
// time run now and the process parks until the run ends. Otherwise T has
// no process (IssueThen, FlushThen) and k.Handle(s, karg) runs when the
// run ends.
func (r *Run) Go(pc uint8, k sim.Handler, karg uint64) {
	r.PC, r.K, r.KArg = pc, k, karg
	r.m.Step()
	if k == nil {
		r.park(r.what)
	}
}

// Handle implements sim.Handler: an operation the machine started has
// completed; step on.
func (r *Run) Handle(*sim.Sim, uint64) { r.m.Step() }

// EventName implements sim.Namer.
func (r *Run) EventName(uint64) string { return r.what + ": " + r.T.Agent() }

// FenceSys starts the fence.release.sys that op needs before the backend
// publishes it, if it needs one by NCCL's rule for the backend's kind
// (gin.Op.NeedsSysFence; proxy: the proxy backend), emitting obs.Fence to
// bus (nil: off). It reports whether it started one: the machine then
// returns, and resumes at the step it set when the fence completes.
func (r *Run) FenceSys(op *gin.Op, proxy bool, bus *obs.Bus) bool {
	if !op.NeedsSysFence(proxy) {
		return false
	}
	if bus != nil {
		r.emit(bus, obs.Event{Kind: obs.Fence, Op: op.ID})
	}
	r.T.FenceThen(gpu.ScopeSystem, r, 0)
	return true
}

// emit sends e, at T's time and as T's agent, to bus.
//
//go:noinline
func (r *Run) emit(bus *obs.Bus, e obs.Event) {
	e.At, e.Who = r.T.Now(), r.T.Agent()
	bus.Emit(e)
}

// park parks T's process until the run ends, unless it already has: the
// blocking caller's side, after the steps that take no time ran.
func (r *Run) park(reason string) {
	if r.done {
		return
	}
	r.parked = true
	if r.failed {
		reason += ": failed"
	}
	r.T.Proc().Park(reason)
}

// Fail fails the simulation (NCCL traps); the group stays where it is.
func (r *Run) Fail(err error) {
	r.T.GPU().Sim().Fail(err)
	r.failed = true
}

// end ends the run and returns its hand-back, to be called once the
// machine is recycled (its state may be reused by the continuation).
func (r *Run) end() back {
	r.done = true
	return back{t: r.T, k: r.K, karg: r.KArg, parked: r.parked}
}

// back hands a group back at the end of a run.
type back struct {
	t      *gpu.Group
	k      sim.Handler
	karg   uint64
	parked bool
}

// give hands the group back: to the continuation, or by resuming its
// process (in this event, as its own wake-up would have).
func (b back) give() {
	s := b.t.GPU().Sim()
	switch {
	case b.k != nil:
		b.k.Handle(s, b.karg)
	case b.parked:
		b.t.Proc().Handle(s, 0)
	}
}

// Free is a LIFO free list of a backend's machines, so that the steady
// state of a run allocates none. It keeps FreeCap machines at most: a
// kernel whose warps all issue at once (EP512 LL dispatch: 800 k) leaves
// that many, which the next kernel, and the memory peak, need not carry.
type Free[T any] struct{ list []*T }

// FreeCap is the most machines a Free keeps.
const FreeCap = 4096

// Get returns a machine from the list, or a new zero one.
func (f *Free[T]) Get() *T {
	if n := len(f.list); n > 0 {
		m := f.list[n-1]
		f.list = f.list[:n-1]
		return m
	}
	return new(T)
}

// Put returns m to the list (or to the garbage collector when the list
// holds FreeCap).
func (f *Free[T]) Put(m *T) {
	if len(f.list) < FreeCap {
		f.list = append(f.list, m)
	}
}

// Recycle ends run r of machine m, which embeds it: m goes back on the
// list (the continuation may reuse it) and the group is handed back.
func (f *Free[T]) Recycle(m *T, r *Run) {
	b := r.end()
	f.Put(m)
	b.give()
}

// Lanes returns how many per-partition lanes a backend named name needs
// for communicator c (one per partition of its ranks' World, one on a
// lone Sim), and checks that bus (its observer, nil: none) can feed them.
func Lanes(name string, c *gin.Comm, bus *obs.Bus) int {
	n := 1
	if w := c.World(); w != nil {
		n = w.Parts()
	}
	CheckBus(name, bus, n)
	return n
}

// CheckBus panics unless bus is nil, or a bus of one partition feeding
// one lane, or split (obs.Split) into the n partitions of the lanes: a
// lone bus shared by partitions would race.
func CheckBus(name string, bus *obs.Bus, n int) {
	if bus != nil && n > 1 && bus.Parts() != n {
		panic(fmt.Sprintf("%s: the observer of a backend on a World of %d partitions is a bus of %d (want obs.Split)", name, n, bus.Parts()))
	}
}
