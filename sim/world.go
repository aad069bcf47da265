package sim

import (
	"fmt"
)

// A World is one simulation split into partitions, each a Sim with its own
// clock and queue, run by the conservative (lookahead-window) algorithm:
//
//   - A partition's events touch only its own state. The one way to reach
//     another partition is Send, which must name a time at least the
//     World's lookahead after the sender's clock (a packet's least cable
//     plus switch delay, fabric.Network.Lookahead).
//   - Time advances in windows [T, T+lookahead), where T is the earliest
//     pending event anywhere. Every partition runs its events before the
//     window's end, independently of the others (on as many goroutines as
//     the Exec allows); no event it can receive from another partition
//     falls inside the window.
//   - Events sent across partitions during window k are handed to the
//     receiver at the start of window k+1. A partition fires the events
//     due at one instant in a fixed order: those received from other
//     partitions first, by (sending partition, send order), then its own
//     in the order it scheduled them. The order depends on what was sent,
//     not on when it was handed over, so a partition fires the same events
//     in the same order whatever the windows, the worker count or the
//     interleaving of partitions: Run's output is the sequential kernel's
//     (SetSequential), byte for byte.
//
// Stop from a partition ends Run at the end of the current window (the
// other partitions finish the window); every partition's clock is then the
// window's end. Fail ends its partition's window at once, and Run returns
// the failure of the lowest partition that failed.
//
// A World is not safe for concurrent use; only its Exec runs partitions
// concurrently, and a partition's handlers must not touch another
// partition's state.
type World struct {
	cfg   Config
	parts []*Sim
	la    Duration
	exec  Exec
	now   Time
	// window is the number of windows run so far: its parity names the
	// outboxes senders fill (the other set is being delivered).
	window uint64
	hooks  []func(end Time)
	run    func(int) // the per-partition window body, built once
	end    Time      // the current window's end (exclusive)
	// lastFired is the number of events the last window fired.
	lastFired   uint64
	serialBelow uint64
	// sequential makes Run the sequential kernel (SetSequential).
	sequential bool
	order      []*Sim // the sequential kernel's heap of partitions by (next, index)
	// The OnWindowOverlapped hooks: due says a window's round of them
	// (window end dueEnd) is still to run, beside the next window's
	// partitions (runOver's task 0) or before Run returns.
	overlap []func(end Time)
	due     bool
	dueEnd  Time
	runOver func(int)
}

// DefaultSerialBelow is what drivers pass to SetSerialBelow: measured
// runs (bench, replay) set it; a World's default is 0 so that tests run
// every window on their Exec.
const DefaultSerialBelow = 64

// Exec runs f(0), ..., f(n-1) and returns when all have returned. It may
// run them concurrently; the World's results do not depend on how.
type Exec func(n int, f func(i int))

// Serial is the Exec that runs f(0), ..., f(n-1) in order on the caller's
// goroutine.
func Serial(n int, f func(i int)) {
	for i := range n {
		f(i)
	}
}

// NewWorld returns a World of parts partitions at time 0. lookahead is the
// least delay of any Send and must be positive; every partition shares cfg
// (so Rand gives a partition the same stream for a name as a lone Sim).
func NewWorld(cfg Config, parts int, lookahead Duration) *World {
	if parts < 1 {
		panic(fmt.Sprintf("sim: world of %d partitions", parts))
	}
	if lookahead <= 0 {
		panic(fmt.Sprintf("sim: world lookahead %v must be positive", lookahead))
	}
	w := &World{cfg: cfg, la: lookahead, exec: Serial}
	for i := range parts {
		s := New(cfg)
		s.w, s.part, s.sentMin = w, i, MaxTime
		s.out[0] = make([][]letter, parts)
		s.out[1] = make([][]letter, parts)
		w.parts = append(w.parts, s)
	}
	w.run = w.runPart
	return w
}

// Parts returns the number of partitions.
func (w *World) Parts() int { return len(w.parts) }

// Part returns partition i.
func (w *World) Part(i int) *Sim { return w.parts[i] }

// Lookahead returns the least delay of a Send between partitions.
func (w *World) Lookahead() Duration { return w.la }

// Now returns the time every partition has reached: after Run, the end of
// the window that stopped it, or the time of the last event.
func (w *World) Now() Time { return w.now }

// Windows returns the number of windows run so far.
func (w *World) Windows() uint64 { return w.window }

// Fired returns the number of events dispatched so far, in all partitions.
func (w *World) Fired() uint64 {
	var n uint64
	for _, s := range w.parts {
		n += s.fired
	}
	return n
}

// Pending returns the number of scheduled, not cancelled events, counting
// events sent and not yet delivered.
func (w *World) Pending() int {
	n := 0
	for _, s := range w.parts {
		n += s.q.live + len(s.in)
		for _, o := range s.out {
			for _, m := range o {
				n += len(m)
			}
		}
	}
	return n
}

// SetExec sets how partitions run within a window (nil: Serial).
func (w *World) SetExec(e Exec) {
	if e == nil {
		e = Serial
	}
	w.exec = e
}

// SetSequential makes Run the sequential kernel, the reference the
// windowed kernel is checked against: one event at a time, the earliest
// of all partitions first (partition index breaks ties), on the caller's
// goroutine, with no Exec; an event sent across partitions joins the
// receiver's inbox at once. The windows survive only as the instants
// where OnWindow hooks run and Stop takes effect, at the ends Run would
// have used (the earliest pending event plus the lookahead; they depend on
// the events' times alone), so the output is Run's, byte for byte.
func (w *World) SetSequential(on bool) { w.sequential = on }

// SetSerialBelow makes a window run on the caller alone, without the Exec,
// when the window before it fired fewer than n events: in a sparse stretch
// (a straggler's timeout, a tail) waking workers costs more than the
// events. Which goroutine runs a partition never changes the results, so
// this is a matter of speed only. The default, 0, runs every window on
// the Exec.
func (w *World) SetSerialBelow(n uint64) { w.serialBelow = n }

// OnWindow registers f to run after every window, on the caller of Run,
// with no partition running: the place to merge what partitions recorded
// (observations, counters) in a deterministic order. end is the window's
// end; every event before it has fired.
func (w *World) OnWindow(f func(end Time)) { w.hooks = append(w.hooks, f) }

// OnWindowOverlapped registers f to run once per window, later than an
// OnWindow hook: f(end) of window k runs after window k's OnWindow hooks,
// while the partitions run window k+1 (as one more task on the Exec), and
// the last window's before Run returns. The rounds run one at a time, in
// window order. f runs concurrently with the partitions, so it may touch
// only what no event touches: what an OnWindow hook of its window handed
// it (a merged observation stream), never model state; it must not Stop,
// Fail or schedule. It is for consumers whose work need not hold up the
// next window. On the sequential kernel (SetSequential) f runs right after
// the window's OnWindow hooks.
func (w *World) OnWindowOverlapped(f func(end Time)) {
	w.overlap = append(w.overlap, f)
	w.runOver = func(i int) {
		if i == 0 {
			w.overlapped()
			return
		}
		w.runPart(i - 1)
	}
}

// overlapped runs the OnWindowOverlapped hooks of the window due.
func (w *World) overlapped() {
	for _, f := range w.overlap {
		f(w.dueEnd)
	}
}

// drain runs the OnWindowOverlapped hooks still due: Run returns with
// every window consumed.
func (w *World) drain() {
	if w.due {
		w.due = false
		w.overlapped()
	}
}

// Blocked returns the processes of every partition that are waiting, by
// partition.
func (w *World) Blocked() []*Proc {
	var b []*Proc
	for _, s := range w.parts {
		b = append(b, s.Blocked()...)
	}
	return b
}

// Send schedules h.Handle(dst, arg) at time at on partition dst. Within a
// partition (dst == s) it is Post. Across partitions at must be at least
// the World's lookahead after s's clock: anything sooner is a model bug
// (the cross-partition delay was under-estimated) and panics. Events sent
// across partitions cannot be cancelled.
func (s *Sim) Send(dst *Sim, at Time, h Handler, arg uint64) {
	if dst == s {
		s.Post(at, h, arg)
		return
	}
	w := s.w
	if w == nil || dst.w != w {
		panic(fmt.Sprintf("sim: Send to a Sim of another world (handler %T)", h))
	}
	if h == nil || at < s.now.Add(w.la) {
		panic(fmt.Sprintf("sim: Send from partition %d at %v to partition %d at %v is within the lookahead %v (handler %T arg %#x)",
			s.part, s.now, dst.part, at, w.la, h, arg))
	}
	s.sent++
	l := letter{at: at, key: uint64(s.part)<<40 | s.sent, h: h, arg: arg}
	if w.sequential {
		dst.in.push(l)
		return
	}
	o := &s.out[w.window&1][dst.part]
	if len(*o) == 0 {
		s.dsts = append(s.dsts, int32(dst.part))
	}
	*o = append(*o, l)
	if at < s.sentMin {
		s.sentMin = at
	}
}

// Part returns the partition index of s in its World (0 for a lone Sim).
func (s *Sim) Part() int { return s.part }

// World returns the World s is a partition of, or nil.
func (s *Sim) World() *World { return s.w }

// Run runs windows until no event is pending anywhere, a partition calls
// Stop (the run ends with the window) or Fail, or the watchdog trips. It
// returns the first failure by partition index, a *WatchdogError, or nil.
func (w *World) Run() error {
	defer w.drain()
	if w.sequential {
		return w.runSequential()
	}
	for _, s := range w.parts {
		s.stopped, s.stopReq = false, false
		s.next = s.nextAt() // events may have been scheduled since
	}
	t, _, _, fired := w.scan()
	for {
		// t is the earliest pending event: in a queue, or sent in the
		// last window and not yet delivered.
		if t == MaxTime {
			w.align(w.maxNow())
			return nil
		}
		w.end = t.Add(w.la)
		if w.end < t { // overflow near MaxTime
			w.end = MaxTime
		}
		w.window++
		n, run := len(w.parts), w.run
		if w.due { // the last window's overlapped hooks run beside this one
			n, run = n+1, w.runOver
		}
		if w.lastFired < w.serialBelow {
			// A sparse stretch (a straggler's timeout, a tail): waking
			// the workers would cost more than the window's events.
			Serial(n, run)
		} else {
			w.exec(n, run)
		}
		w.due, w.dueEnd = len(w.overlap) > 0, w.end
		for _, f := range w.hooks {
			f(w.end)
		}
		if len(w.hooks) > 0 {
			// A hook may have scheduled events.
			for _, s := range w.parts {
				s.next = s.nextAt()
			}
		}
		before := fired
		var stop bool
		var err error
		t, stop, err, fired = w.scan()
		w.lastFired = fired - before
		if done, err := w.settle(stop, err, fired); done {
			return err
		}
	}
}

// settle ends a window on either kernel: it reports whether Run returns,
// and what, given whether a partition asked to stop, the lowest
// partition's failure and the events fired so far.
func (w *World) settle(stop bool, err error, fired uint64) (bool, error) {
	if err != nil {
		w.align(w.maxNow())
		return true, err
	}
	if stop {
		w.align(w.end)
		return true, nil
	}
	if b := w.cfg.EventBudget; b > 0 && fired >= b {
		return true, w.parts[0].watchdog("event budget of %d events spent (all partitions)", b)
	}
	return false, nil
}

// scan is the serial step between windows, one pass over the partitions:
// it returns the earliest pending event, whether a partition asked to
// stop, the failure of the lowest partition that failed, and the events
// fired so far; and it tells every partition which senders have events
// for it (sent since the last window began), in sending-partition order,
// touching only the boxes in use.
func (w *World) scan() (t Time, stop bool, err error, fired uint64) {
	t = MaxTime
	for _, s := range w.parts {
		t = min(t, s.sentMin, s.next)
		stop = stop || s.stopReq
		if err == nil && s.failErr != nil {
			err = s.failErr
		}
		fired += s.fired
		for _, d := range s.dsts {
			w.parts[d].srcs = append(w.parts[d].srcs, int32(s.part))
		}
		s.dsts = s.dsts[:0]
	}
	return t, stop, err, fired
}

// runPart runs partition i's share of the current window: it takes the
// events sent to it in the previous window (in sending-partition order),
// then fires its events before the window's end.
func (w *World) runPart(i int) {
	s := w.parts[i]
	prev := (w.window - 1) & 1
	for _, j := range s.srcs {
		box := &w.parts[j].out[prev][i]
		for _, l := range *box {
			s.in.push(l)
		}
		clear(*box) // drop handler references
		*box = (*box)[:0]
	}
	s.srcs = s.srcs[:0]
	s.sentMin = MaxTime
	limit := w.end - 1
	if err := s.runWindow(limit); err != nil && s.failErr == nil {
		s.failErr = err
	}
	s.next = s.nextAt() // here, on the partition's worker, not after the barrier
}

// nextAt returns the time of partition s's earliest pending event, or
// MaxTime. (A partition has no perturbed ties: SetTies refuses it.)
func (s *Sim) nextAt() Time {
	t := MaxTime
	if e := s.q.front(s.now); e != nil {
		t = e.at
	}
	if len(s.in) > 0 {
		t = min(t, s.in[0].at)
	}
	return t
}

// fireNext fires s's earliest event if it is due by limit and reports
// whether it did. At one instant the inbox goes first.
func (s *Sim) fireNext(limit Time) bool {
	e := s.q.front(s.now)
	if len(s.in) > 0 && (e == nil || s.in[0].at <= e.at) {
		if s.in[0].at > limit {
			return false
		}
		l := s.in.pop()
		s.dispatch(l.at, l.key, l.h, l.arg)
		return true
	}
	if e == nil || e.at > limit {
		return false
	}
	s.fire(e)
	return true
}

// runWindow fires s's events due by limit without moving the clock past
// the last of them. Stop only marks the request (the World ends the run
// after the window); Fail ends the window at once.
func (s *Sim) runWindow(limit Time) error {
	s.stopped = false
	for !s.stopped && s.fireNext(limit) {
		if err := s.stuck(); err != nil {
			return err
		}
	}
	return s.failErr
}

func (w *World) maxNow() Time {
	t := w.now
	for _, s := range w.parts {
		t = max(t, s.now)
	}
	return t
}

// align sets every partition's clock, and the World's, to t.
func (w *World) align(t Time) {
	if t == MaxTime {
		t = w.maxNow()
	}
	w.now = t
	for _, s := range w.parts {
		s.now = max(s.now, t)
	}
}
