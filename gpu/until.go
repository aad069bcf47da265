package gpu

import "github.com/ginsim/ginsim/sim"

// A state machine must not nest a call of its own Handle for work that
// takes no time, so it starts a timed operation only when the operation's
// end lies ahead. The Until methods say whether they started one:
//
//	m.pc = next
//	if t.ComputeUntilThen(end, m, 0) {
//		return // resumes at next, at end
//	}
//	// at next, now

// ComputeUntilThen is ComputeThen(end − now) when end is after now, and
// returns true: h.Handle(s, arg) runs at end. Otherwise it does nothing
// and returns false.
func (t *Group) ComputeUntilThen(end sim.Time, h sim.Handler, arg uint64) bool {
	d := end.Sub(t.Now())
	if d <= 0 {
		return false
	}
	t.ComputeThen(d, h, arg)
	return true
}

// SleepUntilThen is SleepThen(at − now) when at is after now, and returns
// true: h.Handle(s, arg) runs at at. Otherwise it does nothing and
// returns false.
func (t *Group) SleepUntilThen(at sim.Time, h sim.Handler, arg uint64) bool {
	d := at.Sub(t.Now())
	if d <= 0 {
		return false
	}
	t.SleepThen(d, h, arg)
	return true
}
