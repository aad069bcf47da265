package sim

import (
	"reflect"
	"slices"
)

// Chooser picks which of n >= 2 events ready at the same instant fires
// next. Choose returns an index in [0, n); 0 is the order the events were
// scheduled in. A Chooser must be deterministic: the same sequence of
// calls must get the same answers, or a run cannot be replayed.
type Chooser interface {
	Choose(n int) int
}

// SeededTies returns a Chooser that picks uniformly at random from a
// stream derived from seed alone: the same seed gives the same order.
func SeededTies(seed uint64) Chooser {
	return seededTies{NewRand(seed, "sim/ties")}
}

type seededTies struct{ r interface{ IntN(int) int } }

func (c seededTies) Choose(n int) int { return c.r.IntN(n) }

// TieOrder says which same-instant orders a perturbation keeps.
type TieOrder int

const (
	// PerHandler keeps the scheduling order of the events sent to one
	// handler (one component: a NIC, a GPU, the fabric, a process) and
	// lets the events of different handlers interleave in any order. It
	// is the order a component's own state machine relies on, such as a
	// link's FIFO delivery of packets.
	PerHandler TieOrder = iota
	// AnyOrder lets every ready event go first, even before an earlier
	// event to the same handler: it also exposes a component's reliance
	// on the order it scheduled its own same-instant events in.
	AnyOrder
)

// ties is the state of a perturbed run: the events ready at instant at,
// taken out of the queue in scheduling order.
type ties struct {
	c     Chooser
	order TieOrder
	at    Time
	pool  []entry
	elig  []int
}

// SetTies makes the run fire events that are due at the same instant in
// the order c chooses instead of the order they were scheduled in,
// keeping the orders that order names; nil restores the default. Events
// at different instants still fire in time order, so causality holds:
// only the interleaving of simultaneous events changes. Call it before
// Run, or between runs; it panics if events taken out for a choice are
// still waiting. A partition of a World cannot be perturbed (its
// same-instant order is the World's, see World). With no Chooser set the kernel takes its usual path and
// the option costs nothing.
func (s *Sim) SetTies(c Chooser, order TieOrder) {
	if s.w != nil {
		panic("sim: SetTies on a partition of a World")
	}
	if s.ties != nil && len(s.ties.pool) > 0 {
		panic("sim: SetTies with same-instant events still waiting")
	}
	if c == nil {
		s.ties = nil
		return
	}
	s.ties = &ties{c: c, order: order}
}

// runTies is RunUntil under a Chooser.
func (s *Sim) runTies(limit Time) error {
	for !s.stopped {
		if !s.stepTies(limit) {
			if limit != MaxTime && limit > s.now {
				s.now = limit
			}
			break
		}
		if s.cfg.EventBudget > 0 && s.fired >= s.cfg.EventBudget && !s.stopped {
			if len(s.ties.pool) > 0 || s.q.front(s.now) != nil {
				return s.watchdog("event budget of %d events spent", s.cfg.EventBudget)
			}
		}
		if err := s.stuck(); err != nil {
			return err
		}
	}
	return s.failErr
}

// stepTies fires the next event of a perturbed run, if one is due by
// limit. Every event due at the earliest pending instant is moved from the
// queue to the pool (in scheduling order), the chooser picks one of those
// the order allows, and it fires; events it schedules for the same instant
// join the pool at the next step.
func (s *Sim) stepTies(limit Time) bool {
	t := s.ties
	for {
		e := s.q.front(s.now)
		if e == nil || (len(t.pool) > 0 && e.at != t.at) || (len(t.pool) == 0 && e.at > limit) {
			break
		}
		t.at = e.at
		t.pool = append(t.pool, *e)
		s.q.remove()
	}
	// Drop events cancelled while they waited in the pool.
	t.pool = slices.DeleteFunc(t.pool, func(e entry) bool {
		if s.q.pending(e.slot) {
			return false
		}
		s.q.free = append(s.q.free, uint64(e.gen)<<32|uint64(e.slot))
		return true
	})
	if len(t.pool) == 0 {
		return false
	}
	t.elig = t.elig[:0]
	for i := range t.pool {
		if t.order == AnyOrder || !slices.ContainsFunc(t.pool[:i], func(p entry) bool { return sameHandler(p.h, t.pool[i].h) }) {
			t.elig = append(t.elig, i)
		}
	}
	i := t.elig[0]
	if len(t.elig) > 1 {
		c := t.c.Choose(len(t.elig))
		if c < 0 || c >= len(t.elig) {
			panic("sim: Chooser returned an index out of range")
		}
		i = t.elig[c]
	}
	e := t.pool[i]
	t.pool = slices.Delete(t.pool, i, i+1)
	s.q.release(&e)
	s.q.live--
	s.dispatch(e.at, e.seq, e.h, e.arg)
	return true
}

// sameHandler reports whether a and b are the same receiver: the same
// pointer (or function) of the same type, or equal comparable values.
func sameHandler(a, b Handler) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	switch va.Kind() {
	case reflect.Pointer, reflect.Func, reflect.UnsafePointer, reflect.Chan, reflect.Map:
		return va.Pointer() == vb.Pointer()
	}
	return va.Comparable() && va.Equal(vb)
}
