package gpu

import (
	"fmt"

	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Device code written as a state machine runs without a coroutine: each
// Then method starts the operation of its blocking twin (same costs, same
// memory effects at the same instants) and, instead of suspending the
// group's process, schedules h.Handle(s, arg) for the instant the blocking
// call would have returned, with the same events in the same order. A
// zero-time operation calls h at once. A group has at most one operation
// in flight; results are read with Result.
//
// A group launched with LaunchHandler has no process at all: hundreds of
// thousands of short-lived sending warps then cost a few hundred bytes
// each instead of a goroutine stack. A group with a process may run a
// state machine too (a backend's issue path), parking its process until
// the machine resumes it.

// LaunchHandler starts a group of threads threads without a process: h
// runs (Handle(s, arg)) where the body of g.Launch(name, threads, ...)
// would first run, and drives the group through Then methods until it
// calls End.
func (g *GPU) LaunchHandler(name string, threads int, h sim.Handler, arg uint64) *Group {
	if threads <= 0 || threads > 1024 {
		panic(fmt.Sprintf("gpu %s: launch %q with %d threads (want 1..1024)", g.name, name, threads))
	}
	t := g.newGroup(name, threads)
	g.s.Post(g.s.Now(), h, arg)
	return t
}

// End marks a group launched with LaunchHandler as finished (Done).
func (t *Group) End() {
	if !t.ended {
		t.ended = true
		t.g.ended++
	}
}

// Result returns the value of the last AtomicAdd64Then (the old value) or
// WaitWordThen (the value seen).
func (t *Group) Result() uint64 { return t.aold }

// then makes (h, arg) the continuation of the operation being started.
func (t *Group) then(h sim.Handler, arg uint64) {
	if t.th != nil {
		panic(fmt.Sprintf("gpu %s: t=%v: group %q starts an operation while one is in flight", t.g.name, t.Now(), t.Name()))
	}
	t.th, t.targ = h, arg
}

// thenAt hands the group to its continuation at: now (inline) or in an
// event, as the blocking twin's wake-up would be.
func (t *Group) thenAt(at sim.Time) {
	h, arg := t.th, t.targ
	t.th = nil
	s := t.g.s
	if at <= s.Now() {
		h.Handle(s, arg)
		return
	}
	s.Post(at, h, arg)
}

// workThen charges d of SM-busy time, then continues.
func (t *Group) workThen(d sim.Duration, h sim.Handler, arg uint64) {
	t.then(h, arg)
	if d > 0 {
		t.busy += d
	}
	t.thenAt(t.Now().Add(max(d, 0)))
}

// CyclesThen is Cycles.
func (t *Group) CyclesThen(n int64, h sim.Handler, arg uint64) { t.workThen(t.g.Cycles(n), h, arg) }

// ComputeThen is Compute.
func (t *Group) ComputeThen(d sim.Duration, h sim.Handler, arg uint64) { t.workThen(d, h, arg) }

// SyncThen is Sync.
func (t *Group) SyncThen(h sim.Handler, arg uint64) { t.workThen(t.syncTime(), h, arg) }

// FenceThen is Fence.
func (t *Group) FenceThen(scope Scope, h sim.Handler, arg uint64) {
	t.workThen(t.fenceTime(scope), h, arg)
}

// Store64Then is Store64.
func (t *Group) Store64Then(r *mem.Region, off uint64, v uint64, h sim.Handler, arg uint64) sim.Time {
	landed := t.store64(r, off, v)
	t.workThen(t.g.cfg.StoreIssue, h, arg)
	return landed
}

// WriteThen is Write.
func (t *Group) WriteThen(r *mem.Region, off uint64, src []byte, n sim.Bytes, h sim.Handler, arg uint64) sim.Time {
	landed, d := t.write(r, off, src, n)
	t.workThen(d, h, arg)
	return landed
}

// CopyThen is Copy.
func (t *Group) CopyThen(r *mem.Region, off uint64, src []byte, n sim.Bytes, rate sim.BitRate, h sim.Handler, arg uint64) sim.Time {
	landed, d := t.writeAt(r, off, src, n, rate.TxTime(n))
	t.workThen(d, h, arg)
	return landed
}

// WriteWTThen is WriteWT.
func (t *Group) WriteWTThen(r *mem.Region, off uint64, src []byte, n sim.Bytes, h sim.Handler, arg uint64) sim.Time {
	last, issued := t.writeWT(r, off, src, n)
	t.workThen(issued.Sub(t.Now()), h, arg)
	return last
}

// NVLinkWriteThen is NVLinkWrite.
func (t *Group) NVLinkWriteThen(peerLocal int, r *mem.Region, off uint64, src []byte, n sim.Bytes, h sim.Handler, arg uint64) sim.Time {
	t.checkPeer(peerLocal, r)
	return t.WriteThen(r, off, src, n, h, arg)
}

// MMIOThen is MMIO.
func (t *Group) MMIOThen(dev pcie.DevID, n sim.Bytes, h sim.Handler, arg uint64) sim.Time {
	arrive := t.mmio(dev, n)
	t.workThen(t.g.cfg.MMIOIssue, h, arg)
	return arrive
}

// AtomicAdd64Then is AtomicAdd64; the old value is Result.
func (t *Group) AtomicAdd64Then(r *mem.Region, off uint64, v uint64, scope Scope, h sim.Handler, arg uint64) {
	applied, done := t.atomicTimes(r, scope)
	now := t.Now()
	t.then(h, arg)
	if applied > now && done > applied {
		t.atomicAt(r, off, v, applied, done)
		return
	}
	if applied > now { // applied and complete at once, later
		t.atomicAt(r, off, v, applied, applied)
		return
	}
	t.aold = r.FetchAdd64(off, v, t.agent)
	if done > now {
		t.busy += done.Sub(now)
	}
	t.thenAt(max(done, now))
}

// WaitWordThen is WaitWord; the value seen is Result.
func (t *Group) WaitWordThen(r *mem.Region, off uint64, reason string, pred func(v uint64) bool, h sim.Handler, arg uint64) {
	start, lat, per, credit := t.waitStart(r, off)
	t.then(h, arg)
	if v := r.Load64(off); pred(v) {
		t.aold = v
		d := lat - credit
		if d > 0 {
			t.busy += d
		}
		t.thenAt(start.Add(max(d, 0)))
		return
	}
	t.wr, t.woff, t.why, t.wbase, t.wper, t.wlat, t.wsince = r, off, reason, start, per, lat, start
	t.wpred = pred
	t.armed = true
	r.Watch(off, t)
}

// thenPoll is a group in WaitWordThen whose word changed: the poll that
// reads the change.
type thenPoll Group

// Handle checks the word at the poll; on success the group continues half
// a load latency later, as WaitWord returns.
func (w *thenPoll) Handle(*sim.Sim, uint64) {
	t := (*Group)(w)
	v := t.wr.Load64(t.woff)
	if !t.wpred(v) {
		t.armed = true
		t.wr.Watch(t.woff, t)
		return
	}
	t.aold = v
	t.wr, t.why, t.wpred = nil, "", nil
	t.poll += t.Now().Sub(t.wsince)
	d := t.wlat - t.wlat/2
	if d > 0 {
		t.busy += d
	}
	t.thenAt(t.Now().Add(max(d, 0)))
}

// Load64Then is Load64; the value, read when the load completes, is
// Result.
func (t *Group) Load64Then(r *mem.Region, off uint64, h sim.Handler, arg uint64) {
	t.then(h, arg)
	now := t.Now()
	d := t.loadDone(r, 8).Sub(now)
	if d <= 0 {
		t.aold = r.Load64(off)
		t.thenAt(now)
		return
	}
	t.busy += d
	t.ar, t.aoff = r, off
	t.g.s.Post(now.Add(d), (*thenLoad)(t), 0)
}

// thenLoad is a group in Load64Then whose load completes: it reads the
// word and continues.
type thenLoad Group

// Handle implements sim.Handler.
func (l *thenLoad) Handle(s *sim.Sim, _ uint64) {
	t := (*Group)(l)
	t.aold = t.ar.Load64(t.aoff)
	t.ar = nil
	t.thenAt(s.Now())
}

// SleepThen is Sleep: the group continues after d (d >= 0) without
// occupying the SM, in an event even when d is 0 (Sleep(0) yields to the
// events already scheduled for this instant).
func (t *Group) SleepThen(d sim.Duration, h sim.Handler, arg uint64) {
	if t.th != nil {
		panic(fmt.Sprintf("gpu %s: t=%v: group %q starts an operation while one is in flight", t.g.name, t.Now(), t.Name()))
	}
	t.g.s.Post(t.Now().Add(d), h, arg)
}

// ParallelThen is Parallel for a group driven by Then methods: item i runs
// as body(th, i, h, arg), which starts the item's work on th through Then
// methods and continues at h.Handle(s, arg) when it is done (at once, for
// work that takes no time). The group continues at (h, arg) when Parallel
// would have returned, with the same events: with one thread or one item
// the items run inline on the group; otherwise each one-thread child
// starts in an event where its process would first run, and the group
// resumes in an event after the last child is done.
func (t *Group) ParallelThen(n int, body func(th *Group, i int, h sim.Handler, arg uint64), h sim.Handler, arg uint64) {
	if t.th != nil {
		panic(fmt.Sprintf("gpu %s: t=%v: group %q starts an operation while one is in flight", t.g.name, t.Now(), t.Name()))
	}
	if n > 1 && t.g.cfg.Mutations&MutParallelDropLast != 0 {
		n--
	}
	if n <= 0 {
		h.Handle(t.g.s, arg)
		return
	}
	p := &parallelThen{t: t, body: body, n: n, h: h, arg: arg}
	if t.size == 1 || n == 1 {
		p.inline = true
		p.next()
		return
	}
	p.k = min(n, int(t.size))
	p.live = p.k
	p.start = t.Now()
	p.kids = t.children(p.k)
	for j, c := range p.kids {
		t.g.s.Post(t.Now(), &parallelKid{p: p, c: c, i: j}, 0)
	}
}

// parallelThen is a ParallelThen section: its items inline on the group,
// or the group waiting for its children (its wake-up event).
type parallelThen struct {
	t             *Group
	body          func(th *Group, i int, h sim.Handler, arg uint64)
	n, k          int
	i             int // inline: the next item
	inline        bool
	inOp, resumed bool
	live          int
	start         sim.Time
	kids          []*Group
	h             sim.Handler
	arg           uint64
}

// Handle implements sim.Handler: an inline item is done, or (children)
// the last child is.
func (p *parallelThen) Handle(s *sim.Sim, _ uint64) {
	if p.inline {
		if p.inOp {
			p.resumed = true
			return
		}
		p.next()
		return
	}
	p.t.join(p.kids, p.start)
	p.h.Handle(s, p.arg)
}

// next runs the inline items from p.i on; an item whose continuation runs
// at once goes on in the loop.
func (p *parallelThen) next() {
	for p.i < p.n {
		i := p.i
		p.i++
		p.inOp = true
		p.body(p.t, i, p, 0)
		p.inOp = false
		if !p.resumed {
			return
		}
		p.resumed = false
	}
	p.h.Handle(p.t.g.s, p.arg)
}

// parallelKid is one child of a ParallelThen section: it runs items i,
// i+k, ... in order, then ends and, if it is the last, wakes the group.
type parallelKid struct {
	p             *parallelThen
	c             *Group
	i             int
	inOp, resumed bool
}

// Handle implements sim.Handler: the child starts, or its item is done.
func (kd *parallelKid) Handle(s *sim.Sim, _ uint64) {
	if kd.inOp {
		kd.resumed = true
		return
	}
	p := kd.p
	for kd.i < p.n {
		i := kd.i
		kd.i += p.k
		kd.inOp = true
		p.body(kd.c, i, kd, 0)
		kd.inOp = false
		if !kd.resumed {
			return
		}
		kd.resumed = false
	}
	kd.c.ended = true
	if p.live--; p.live == 0 {
		s.Post(s.Now(), p, 0)
	}
}

// ParallelWait is Parallel for a group with a process whose items are
// written as Then operations: the section runs as ParallelThen, and the
// process parks until it is done and resumes inside the event that ends
// it, where Parallel's last child would wake it, so the section's events
// are Parallel's; the children need no process.
func (t *Group) ParallelWait(n int, body func(th *Group, i int, h sim.Handler, arg uint64)) {
	rs := &resume{p: t.Proc()}
	t.ParallelThen(n, body, rs, 0)
	if !rs.done {
		rs.parked = true
		t.Proc().Park("coop threads")
	}
}

// resume is the continuation of ParallelWait's section: it resumes the
// parked process, or (a section done at once) notes that it is done.
type resume struct {
	p            *sim.Proc
	done, parked bool
}

// Handle implements sim.Handler.
func (x *resume) Handle(s *sim.Sim, _ uint64) {
	x.done = true
	if x.parked {
		x.p.Handle(s, 0)
	}
}
