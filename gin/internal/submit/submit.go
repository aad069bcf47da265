package submit

import (
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// Run is one run of a submit state machine by group T.
type Run struct {
	T    *gpu.Group
	K    sim.Handler // the continuation (nil: resume T's process)
	KArg uint64

	parked bool // T's process waits for the end
	done   bool
	failed bool
}

// Park parks T's process until the run ends, unless it already has: the
// blocking caller's side, after the steps that take no time ran.
func (r *Run) Park(reason string) {
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

// End ends the run and returns its hand-back, to be called once the
// machine is recycled (its state may be reused by the continuation).
func (r *Run) End() Back {
	r.done = true
	return Back{t: r.T, k: r.K, karg: r.KArg, parked: r.parked}
}

// Back hands a group back at the end of a run.
type Back struct {
	t      *gpu.Group
	k      sim.Handler
	karg   uint64
	parked bool
}

// Give hands the group back: to the continuation, or by resuming its
// process (in this event, as its own wake-up would have).
func (b Back) Give() {
	s := b.t.GPU().Sim()
	switch {
	case b.k != nil:
		b.k.Handle(s, b.karg)
	case b.parked:
		b.t.Proc().Handle(s, 0)
	}
}

// Free is a LIFO free list of a backend's machines, so that the steady
// state of a run allocates none.
type Free[T any] struct{ list []*T }

// Get returns a machine from the list, or a new zero one.
func (f *Free[T]) Get() *T {
	if n := len(f.list); n > 0 {
		m := f.list[n-1]
		f.list = f.list[:n-1]
		return m
	}
	return new(T)
}

// Put returns m to the list.
func (f *Free[T]) Put(m *T) { f.list = append(f.list, m) }
