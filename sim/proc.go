package sim

import (
	"fmt"
	"iter"
	"runtime/debug"
)

// Proc is a sequential process: a function that runs on the simulation's
// clock and yields to the kernel when it sleeps or waits. Processes are
// coroutines (iter.Pull): exactly one of the kernel or one process runs at a
// time, so a process may touch model state freely between yields.
//
// A process body must only block through its Proc (Sleep, SleepUntil, Park,
// Cond.Wait); it must not start goroutines, lock OS threads or call cgo.
type Proc struct {
	s      *Sim
	name   string
	next   func() (struct{}, bool)
	stop   func()
	yield  func(struct{}) bool
	done   bool
	parked bool
	reason string
	perr   *PanicError
}

// errStopped unwinds a process body when the kernel shuts it down.
type errStopped struct{}

// PanicError wraps a panic raised inside a process or handler with the
// simulated time and the process name, so that a failure deep in a model
// says where in the run it happened.
type PanicError struct {
	Value any
	Proc  string
	At    Time
	Stack string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("sim: panic in process %q at t=%v: %v\n%s", e.Proc, e.At, e.Value, e.Stack)
}

// Spawn creates a process that starts running body at the current time
// (after the events already scheduled for this instant).
func (s *Sim) Spawn(name string, body func(p *Proc)) *Proc {
	p := s.newProc(name, body)
	s.wakeAt(s.now, p)
	return p
}

// Start creates a process and runs its body at once, inside the event
// being handled, until it first blocks (or returns). It is Spawn without
// the extra event: a handler that decides "this work starts now" (a
// waiter that was kept without a process while it waited) hands over to
// the process in the same event. Call it only from an event handler, never
// from a process body.
func (s *Sim) Start(name string, body func(p *Proc)) *Proc {
	if s.running != nil {
		panic(fmt.Sprintf("sim: t=%v: Start(%q) called from process %q (use Spawn)", s.now, name, s.running.name))
	}
	p := s.newProc(name, body)
	p.Handle(s, 0)
	return p
}

func (s *Sim) newProc(name string, body func(p *Proc)) *Proc {
	p := &Proc{s: s, name: name}
	seq := func(yield func(struct{}) bool) {
		p.yield = yield
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(errStopped); ok {
					return
				}
				p.perr = &PanicError{Value: r, Proc: p.name, At: s.now, Stack: string(debug.Stack())}
			}
		}()
		body(p)
	}
	p.next, p.stop = iter.Pull(seq)
	if len(s.procs) == cap(s.procs) && len(s.procs) > 0 {
		// Forget finished processes (keeping spawn order) before the
		// list grows: a run may spawn millions of short ones.
		k := 0
		for _, q := range s.procs {
			if !q.done {
				s.procs[k] = q
				k++
			}
		}
		clear(s.procs[k:])
		s.procs = s.procs[:k]
	}
	s.procs = append(s.procs, p)
	return p
}

// Handle resumes the process; it is the event a sleeping process waits for.
func (p *Proc) Handle(s *Sim, _ uint64) {
	if p.done {
		return
	}
	if p.parked {
		p.parked = false
		p.reason = ""
	}
	prev := s.running
	s.running = p
	_, ok := p.next()
	s.running = prev
	if p.perr != nil {
		perr := p.perr
		p.perr = nil
		p.finish()
		panic(perr)
	}
	if !ok {
		p.finish()
	}
}

// finish marks the process done and drops its coroutine's closures (the
// coroutine has ended), so that a finished process holds no memory of its
// body.
func (p *Proc) finish() {
	p.done = true
	p.next, p.stop, p.yield = nil, nil, nil
}

// EventName implements Namer.
func (p *Proc) EventName(uint64) string { return "proc:" + p.name }

// Name returns the process name.
func (p *Proc) Name() string { return p.name }

// Sim returns the simulation the process runs on.
func (p *Proc) Sim() *Sim { return p.s }

// Now returns the current simulated time.
func (p *Proc) Now() Time { return p.s.now }

// Done reports whether the process body has returned.
func (p *Proc) Done() bool { return p.done }

// suspend yields to the kernel until something schedules p again.
func (p *Proc) suspend() {
	if p.s.running != p {
		panic(fmt.Sprintf("sim: process %q blocked from outside its own body", p.name))
	}
	if !p.yield(struct{}{}) {
		panic(errStopped{})
	}
}

// Sleep suspends the process for d (d >= 0). Sleep(0) yields to the events
// already scheduled for this instant.
func (p *Proc) Sleep(d Duration) {
	p.SleepUntil(p.s.now.Add(d))
}

// SleepUntil suspends the process until time t (not in the past).
func (p *Proc) SleepUntil(t Time) {
	p.s.wakeAt(t, p)
	p.suspend()
}

// Park suspends the process until another component calls Wake. reason says
// what it waits for; it appears in Blocked reports (deadlock diagnosis).
func (p *Proc) Park(reason string) {
	p.parked = true
	p.reason = reason
	p.suspend()
}

// Wake schedules a parked process to resume now. Waking a process that is
// not parked is a no-op, so several wakers may race harmlessly.
func (p *Proc) Wake() {
	if !p.parked || p.done {
		return
	}
	p.parked = false
	p.reason = ""
	p.s.wakeAt(p.s.now, p)
}

// WakeAt schedules a parked process to resume at t (e.g. when a value it
// polls becomes visible plus the poll latency).
func (p *Proc) WakeAt(t Time) {
	if !p.parked || p.done {
		return
	}
	p.parked = false
	p.reason = ""
	p.s.wakeAt(t, p)
}

// Parked reports whether the process is parked, and why.
func (p *Proc) Parked() (bool, string) { return p.parked, p.reason }

// Blocked returns the processes that are parked (not sleeping, not done),
// in spawn order. At quiescence these are deadlocked: nothing will wake them.
func (s *Sim) Blocked() []*Proc {
	var out []*Proc
	for _, p := range s.procs {
		if p.parked && !p.done {
			out = append(out, p)
		}
	}
	return out
}

// Shutdown stops every unfinished process, releasing its coroutine. Call it
// when a simulation is abandoned before all processes returned; it is safe
// to call more than once.
func (s *Sim) Shutdown() {
	for _, p := range s.procs {
		if !p.done {
			p.done = true
			p.stop()
		}
	}
	s.procs = s.procs[:0]
}

// Cond is a set of parked processes waiting for the same condition. The
// waker calls Broadcast; each waiter re-checks its predicate.
type Cond struct {
	waiters []*Proc
}

// Wait parks p on c until Broadcast.
func (c *Cond) Wait(p *Proc, reason string) {
	c.waiters = append(c.waiters, p)
	p.Park(reason)
}

// WaitFor parks p until pred() holds, re-checking after every Broadcast.
func (c *Cond) WaitFor(p *Proc, reason string, pred func() bool) {
	for !pred() {
		c.Wait(p, reason)
	}
}

// Broadcast wakes every waiter now.
func (c *Cond) Broadcast() {
	for _, p := range c.waiters {
		p.Wake()
	}
	clear(c.waiters)
	c.waiters = c.waiters[:0]
}

// Len returns the number of waiters.
func (c *Cond) Len() int { return len(c.waiters) }
