package gpu

import (
	"fmt"

	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Group is one cooperative thread group (ncclCoopThread, ncclCoopWarp or
// ncclCoopCta) running device code as one sim process. Its methods must be
// called from its own body.
type Group struct {
	g      *GPU
	p      *sim.Proc
	agent  string // the GPU's name, "/", the group's name
	size   int32
	sm     int32
	child  bool // a thread of a Parallel section
	joined bool // a child whose section has joined
	redAt  uint8
	armed  bool // (LaunchWaiting's hand-over, below)
	ended  bool // (LaunchHandler, below)
	// The small fields above share a word: a million groups live at
	// once at EP512.

	busy   sim.Duration
	poll   sim.Duration
	posted sim.Time           // latest landing of the group's posted writes (NVLink: their acknowledgement)
	acked  sim.Time           // latest acknowledgement of the group's local stores
	reds   [redSlots]sim.Time // completion of the group's latest reds (Red64), a ring (next: redAt)

	// wait state (WaitWord)
	wr     *mem.Region
	woff   uint64
	wbase  sim.Time
	wper   sim.Duration
	wsince sim.Time
	wlat   sim.Duration // the wait's load latency

	// LaunchWaiting's hand-over: the body's first WaitWord on the word,
	// called at creditAt, returns credit early (the poll read already
	// happened; only its return trip is left).
	creditR   *mem.Region
	creditOff uint64
	creditAt  sim.Time
	credit    sim.Duration
	why       string

	// AtomicAdd64 in flight (atomicApply); ar and aoff are also the word
	// a Load64Then in flight reads when its load completes (thenLoad): a
	// group has one operation in flight at most.
	ar       *mem.Region
	aoff, av uint64
	aold     uint64
	adone    sim.Time

	// LaunchWaiting: the body to start once the wait holds (nil when the
	// group has a process), and the wait's predicate.
	body  func(t *Group)
	wpred func(v uint64) bool

	// The continuation of the operation in flight started by a Then
	// method (nil: the group's process waits for it); ended, above, says
	// whether a group launched by LaunchHandler has ended.
	th   sim.Handler
	targ uint64
}

// Launch starts a group of threads threads running body, now. name names
// the group in traces and deadlock reports ("dispatch/w2"). threads must be
// positive; a warp is 32, a CTA up to 1024.
func (g *GPU) Launch(name string, threads int, body func(t *Group)) *Group {
	if threads <= 0 || threads > 1024 {
		panic(fmt.Sprintf("gpu %s: launch %q with %d threads (want 1..1024)", g.name, name, threads))
	}
	t := g.newGroup(name, threads)
	t.p = g.s.Spawn(t.agent, func(p *sim.Proc) {
		body(t)
		g.ended++
	})
	return t
}

// LaunchWaiting launches a group whose first action is
// t.WaitWord(r, off, reason, pred), and whose body runs once that wait is
// satisfied — without a process (a coroutine) while it waits. The poll
// timing is WaitWord's: the first load happens when a process launched
// now would first run, later polls at multiples of the poll period from
// then, each seeing the writes landed by its instant. At the successful
// poll the group's process is started, in that same event, and runs body;
// body is expected to begin with the same wait (through WaitWord or an API
// built on it), which then succeeds at its first load and pays the load
// latency, so the group's timing is exactly that of
//
//	g.Launch(name, threads, func(t *Group) { t.WaitWord(r, off, reason, pred); body(t) })
//
// minus one redundant load of an already satisfied word. The word must be
// in the GPU's own HBM (a local load has no side effect to repeat). Pure
// waiters
// (receivers that spin on a flag) then cost no coroutine until their data
// is there. Until the body starts, Proc returns nil and Waiting reports
// the wait; the time counts as polling.
func (g *GPU) LaunchWaiting(name string, threads int, r *mem.Region, off uint64, reason string,
	pred func(v uint64) bool, body func(t *Group)) *Group {
	if threads <= 0 || threads > 1024 {
		panic(fmt.Sprintf("gpu %s: launch %q with %d threads (want 1..1024)", g.name, name, threads))
	}
	if g.where(r) != local {
		panic(fmt.Sprintf("gpu %s: t=%v: LaunchWaiting %q on %v: the word must be in the GPU's own HBM", g.name, g.s.Now(), name, r))
	}
	t := g.newGroup(name, threads)
	t.body, t.wpred = body, pred
	t.wr, t.woff, t.why, t.wsince = r, off, reason, g.s.Now()
	g.s.Post(g.s.Now(), (*waiter)(t), 0) // where a process would first run
	return t
}

// waiter is a group without a process, waiting in LaunchWaiting. Its
// events are the first run (arg 0) and the poll that follows a change of
// the word (arg 1).
type waiter Group

// Handle polls the word; when the predicate holds it starts the body.
func (w *waiter) Handle(s *sim.Sim, arg uint64) {
	t := (*Group)(w)
	now := s.Now()
	if arg == 0 {
		// local HBM: WaitWord's period and load latency
		t.wbase, t.wper, t.wlat = now, t.g.cfg.PollInterval, t.g.cfg.L2Latency
	}
	if !t.wpred(t.wr.Load64(t.woff)) {
		t.armed = true
		t.wr.Watch(t.woff, t)
		return
	}
	if arg == 1 {
		// The poll read the change now: the body's WaitWord returns half
		// a load latency later, as a spinning group's would.
		t.poll += now.Sub(t.wbase)
		t.creditR, t.creditOff, t.creditAt, t.credit = t.wr, t.woff, now, t.wlat/2
	}
	t.wr, t.why = nil, ""
	body := t.body
	t.body, t.wpred = nil, nil
	s.Start(t.agent, func(p *sim.Proc) {
		t.p = p
		body(t)
		t.g.ended++
	})
}

// GPU returns the group's GPU.
func (t *Group) GPU() *GPU { return t.g }

// Proc returns the group's process (nil while a LaunchWaiting group still
// waits).
func (t *Group) Proc() *sim.Proc { return t.p }

// Size returns the number of threads.
func (t *Group) Size() int { return int(t.size) }

// Name returns the group's name.
func (t *Group) Name() string { return t.agent[len(t.g.name)+1:] }

// Agent returns the name used for the group's memory effects ("gpu0/x").
func (t *Group) Agent() string { return t.agent }

// SM returns the SM the group was placed on (round robin at launch).
func (t *Group) SM() int { return int(t.sm) }

// Now returns the current simulated time.
func (t *Group) Now() sim.Time { return t.g.s.Now() }

// Done reports whether the group's body has returned.
func (t *Group) Done() bool { return t.ended || t.p != nil && t.p.Done() }

// Busy returns the SM time charged to the group for work.
func (t *Group) Busy() sim.Duration { return t.busy }

// Polling returns the time the group spent spinning in WaitWord.
func (t *Group) Polling() sim.Duration { return t.poll }

// work charges d of SM-busy time.
func (t *Group) work(d sim.Duration) {
	if d > 0 {
		t.busy += d
		t.p.Sleep(d)
	}
}

// Cycles spends n SM clock cycles.
func (t *Group) Cycles(n int64) { t.work(t.g.Cycles(n)) }

// Compute spends d of SM time (work modelled by duration).
func (t *Group) Compute(d sim.Duration) { t.work(d) }

// Sleep suspends the group for d without occupying the SM (__nanosleep).
func (t *Group) Sleep(d sim.Duration) { t.p.Sleep(d) }

// Sync is coop.sync(): free for one thread, __syncwarp for up to a warp,
// bar.sync for a CTA.
func (t *Group) Sync() { t.work(t.syncTime()) }

func (t *Group) syncTime() sim.Duration {
	switch {
	case t.size == 1:
		return 0
	case t.size <= 32:
		return t.g.cfg.CoopSyncWarp
	default:
		return t.g.cfg.CoopSyncCTA
	}
}

// Fence is a memory fence of the given scope. A system-scope fence also
// waits until every posted write the group issued has landed (PCIe) or
// been acknowledged (NVLink: one traversal after it landed; an H200
// measured 931 ns for a peer store and __threadfence_system).
func (t *Group) Fence(scope Scope) { t.work(t.fenceTime(scope)) }

func (t *Group) fenceTime(scope Scope) sim.Duration {
	c := &t.g.cfg
	switch scope {
	case ScopeThread:
		return 0
	case ScopeBlock:
		return c.FenceBlock
	case ScopeDevice:
		return max(t.Now().Add(c.FenceGPU), t.acked).Sub(t.Now())
	default:
		if c.Mutations&MutFenceNoWait != 0 {
			return 0
		}
		return max(t.Now().Add(c.FenceSys), t.posted, t.acked).Sub(t.Now())
	}
}

// noteLocal records a local store landing at the L2 at landed: a fence
// waits for its acknowledgement.
func (t *Group) noteLocal(landed sim.Time) {
	t.acked = max(t.acked, landed.Add(t.g.cfg.StoreLatency))
}

func (t *Group) noteposted(at sim.Time) {
	if at > t.posted {
		t.posted = at
	}
}

// loadDone returns when a load of n bytes of r issued now completes.
func (t *Group) loadDone(r *mem.Region, n sim.Bytes) sim.Time {
	g := t.g
	now := t.Now()
	switch g.where(r) {
	case local:
		return now.Add(g.cfg.L2Latency)
	case peer:
		return g.nvl.Read(now, g.local, r.Loc().GPU, n)
	default:
		hub := g.cfg.HubLatency
		return g.bus.Read(now.Add(hub), g.dev, g.bus.Host(), n).Add(hub)
	}
}

// Load64 loads the 8-byte word at off of r: an L2 hit for local HBM, an
// NVLink read for a peer GPU, a PCIe read for host memory. The value is
// read when the load completes.
func (t *Group) Load64(r *mem.Region, off uint64) uint64 {
	t.work(t.loadDone(r, 8).Sub(t.Now()))
	return r.Load64(off)
}

// Read loads len(dst) bytes at off of r into dst. Local HBM: one HBM
// latency (bulk data is not L2-resident) plus the transfer at the group's
// load rate (16 B per thread per cycle, at most SMStoreBytesPerCycle);
// peer or host memory: the NVLink or PCIe read. A peer's memory is read
// latency-bound: each thread keeps one 16-B load in flight, so a group
// moves 16 B per thread per NVLink round trip (one CTA reading an H200
// peer measured 66 ns per KiB, one warp 1.8 us).
func (t *Group) Read(r *mem.Region, off uint64, dst []byte) {
	g := t.g
	n := sim.Bytes(len(dst))
	var d sim.Duration
	switch g.where(r) {
	case local:
		rate := min(sim.Bytes(t.size)*16, g.cfg.SMStoreBytesPerCycle)
		d = g.cfg.HBMLatency + g.Cycles(int64((n+rate-1)/rate))
	case peer:
		d = t.loadDone(r, n).Sub(t.Now())
		wave := sim.Bytes(t.size) * 16
		d = max(d, sim.Duration((n+wave-1)/wave)*g.nvl.ReadRoundTrip(wave))
	default:
		d = t.loadDone(r, n).Sub(t.Now())
	}
	t.work(d)
	r.Read(off, dst)
}

// Store64 stores v at off of r. It is posted: the group pays the issue cost
// and the word changes when the store lands (local HBM: StoreLatency; peer
// GPU: over NVLink; host memory: a PCIe write). It returns the landing time.
func (t *Group) Store64(r *mem.Region, off uint64, v uint64) sim.Time {
	landed := t.store64(r, off, v)
	t.work(t.g.cfg.StoreIssue)
	return landed
}

// store64 is Store64 without the issue cost.
func (t *Group) store64(r *mem.Region, off uint64, v uint64) sim.Time {
	g := t.g
	now := t.Now()
	var landed sim.Time
	switch g.where(r) {
	case local:
		landed = now.Add(g.cfg.StoreLatency)
		t.noteLocal(landed)
	case peer:
		landed = g.nvl.Write(now, g.local, r.Loc().GPU, 8)
		if g.cfg.WriteJitter > 0 {
			landed = landed.Add(g.writeJitter())
		}
		t.noteposted(g.nvl.Acked(landed))
	default:
		landed = g.bus.Write(now.Add(g.cfg.HubLatency), g.dev, g.bus.Host(), 8)
	}
	t.noteposted(landed)
	if g.cfg.Mutations&MutStoreUndrained != 0 && g.where(r) == local {
		landed = landed.Add(StoreLinger) // after what the fences wait for
	}
	g.later(landed, pending{r: r, off: off, v: v, op: pendStore, agent: t.agent})
	return landed
}

// Write stores n bytes of src (nil: unknown content) at off of r with the
// group's threads, posted: the issue time is n over the group's store rate
// (16 B per thread per cycle, at most SMStoreBytesPerCycle), the bytes land
// together after the path (local: StoreLatency; NVLink; PCIe) has carried
// them. It returns the landing time.
func (t *Group) Write(r *mem.Region, off uint64, src []byte, n sim.Bytes) sim.Time {
	landed, d := t.write(r, off, src, n)
	t.work(d)
	return landed
}

// write is Write without the sleep: it returns the landing time and the
// issue cost.
func (t *Group) write(r *mem.Region, off uint64, src []byte, n sim.Bytes) (sim.Time, sim.Duration) {
	return t.writeAt(r, off, src, n, 0)
}

// writeAt is write whose issue takes at least least: a copy's loads pace
// its stores.
func (t *Group) writeAt(r *mem.Region, off uint64, src []byte, n sim.Bytes, least sim.Duration) (sim.Time, sim.Duration) {
	g := t.g
	now := t.Now()
	where := g.where(r)
	rate := min(sim.Bytes(t.size)*16, g.cfg.SMStoreBytesPerCycle)
	if where == peer {
		rate = min(rate, g.cfg.PeerStoreBytesPerCycle)
	}
	issue := max(g.Cycles(int64((n+rate-1)/rate)), least)
	var landed sim.Time
	switch where {
	case local:
		landed = now.Add(issue + g.cfg.StoreLatency)
		t.noteLocal(landed)
	case peer:
		landed = g.nvl.Write(now, g.local, r.Loc().GPU, n)
		if lo := now.Add(issue + g.nvl.Config().Latency + g.nvl.Config().WriteLatency); landed < lo {
			landed = lo
		}
		if g.cfg.WriteJitter > 0 {
			landed = landed.Add(g.writeJitter())
		}
		t.noteposted(g.nvl.Acked(landed))
	default:
		landed = g.bus.Write(now.Add(g.cfg.HubLatency), g.dev, g.bus.Host(), n)
		if lo := now.Add(issue); landed < lo {
			landed = lo
		}
	}
	g.later(landed, pending{r: r, off: off, n: uint64(n), op: pendWrite, data: src, has: src != nil, agent: t.agent})
	t.noteposted(landed)
	return landed, max(issue, g.cfg.StoreIssue)
}

// Copy is a warp's copy of n bytes from local memory (src: its content,
// nil if unknown) to off of r, at most rate (the copy idiom's:
// Config.WarpCopyRate for an unrolled load/store loop, WarpTMARate for a
// TMA pipeline): the group is busy for the copy or the stores' issue,
// whichever is longer, and the bytes land as Write's, no earlier than the
// copy's end plus the path. It returns the landing time.
func (t *Group) Copy(r *mem.Region, off uint64, src []byte, n sim.Bytes, rate sim.BitRate) sim.Time {
	landed, d := t.writeAt(r, off, src, n, rate.TxTime(n))
	t.work(d)
	return landed
}

// NVLinkWrite stores n bytes of src at off of r, a region of GPU peerLocal
// of the same node, over NVLink (an LSA store through ncclGetLsaPointer).
// It returns the landing time.
func (t *Group) NVLinkWrite(peerLocal int, r *mem.Region, off uint64, src []byte, n sim.Bytes) sim.Time {
	t.checkPeer(peerLocal, r)
	return t.Write(r, off, src, n)
}

func (t *Group) checkPeer(peerLocal int, r *mem.Region) {
	if l := r.Loc(); l.Kind != mem.HBM || l.GPU != peerLocal || l.Node != t.g.node {
		panic(fmt.Sprintf("gpu %s: t=%v: NVLinkWrite to GPU %d but region %v is at %v", t.g.name, t.Now(), peerLocal, r, l))
	}
}

// AtomicAdd64 adds v to the word at off of r and returns the old value. On
// local HBM the scope sets the cost (THREAD: a private update; CTA; device
// at L2). On host memory it is a system-scope PCIe AtomicOp round trip, on
// a peer GPU an NVLink atomic. The add is applied when it reaches memory.
func (t *Group) AtomicAdd64(r *mem.Region, off uint64, v uint64, scope Scope) uint64 {
	applied, done := t.atomicTimes(r, scope)
	now := t.Now()
	if applied > now && done > applied {
		t.atomicAt(r, off, v, applied, done)
		t.p.Park("atomic in flight")
		return t.aold
	}
	t.work(applied.Sub(now))
	old := r.FetchAdd64(off, v, t.agent)
	t.work(done.Sub(applied))
	return old
}

// redSlots is how many reds (Red64) one thread keeps in flight: an H200
// thread issued back-to-back reds every 35 ns on a local word and every
// 219 ns on a peer's (validate/gpumicro red_issue, peer_red_issue), a
// quarter of the round trip of an atomic there (145 and 882 ns).
const redSlots = 4

// Red64 adds v to the word at off of r without returning the old value
// (red.add, an atomicAdd whose result is unused). The add is applied when
// it reaches memory, as AtomicAdd64's is, but the group goes on once it
// is issued: it waits only for a free slot of the redSlots a thread keeps
// in flight. Fences wait for the reds to complete. It returns when the
// add is applied.
func (t *Group) Red64(r *mem.Region, off uint64, v uint64, scope Scope) sim.Time {
	slot := &t.reds[t.redAt%redSlots]
	t.redAt++
	if now := t.Now(); *slot > now {
		t.work(slot.Sub(now))
	}
	applied, done := t.atomicTimes(r, scope)
	t.g.later(applied, pending{r: r, off: off, v: v, op: pendAdd, agent: t.agent})
	*slot = done
	t.acked = max(t.acked, done)
	t.noteposted(done)
	t.work(t.g.cfg.StoreIssue)
	return applied
}

// atomicTimes returns when an atomic on r issued now is applied and when
// it completes.
func (t *Group) atomicTimes(r *mem.Region, scope Scope) (applied, done sim.Time) {
	g := t.g
	now := t.Now()
	switch g.where(r) {
	case local:
		var d sim.Duration
		switch scope {
		case ScopeThread:
			d = g.cfg.AtomicThread
		case ScopeBlock:
			d = g.cfg.AtomicBlock
		default:
			d = g.cfg.AtomicGPU
		}
		return now.Add(d / 2), now.Add(d)
	case peer:
		return g.nvl.Atomic(now, g.local, r.Loc().GPU)
	default:
		applied, done = g.bus.Atomic(now.Add(g.cfg.HubLatency), g.dev, g.bus.Host())
		return applied, done.Add(g.cfg.HubLatency)
	}
}

// atomicAt schedules the add at applied; the group resumes at done. The
// add happens in an event at applied that then schedules the group's wake
// at done: the same events at the same instants, in the same order, as
// sleeping to applied, adding and sleeping to done, without resuming the
// coroutine in between.
func (t *Group) atomicAt(r *mem.Region, off, v uint64, applied, done sim.Time) {
	t.busy += done.Sub(t.Now())
	t.ar, t.aoff, t.av, t.adone = r, off, v, done
	t.g.s.Post(applied, (*atomicApply)(t), 0)
}

// atomicApply is a group whose AtomicAdd64 reaches memory now.
type atomicApply Group

// Handle applies the add, keeps the old value and wakes the group when the
// atomic completes.
func (a *atomicApply) Handle(s *sim.Sim, _ uint64) {
	t := (*Group)(a)
	t.aold = t.ar.FetchAdd64(t.aoff, t.av, t.agent)
	t.ar = nil
	if t.th != nil {
		t.thenAt(t.adone)
		return
	}
	t.p.WakeAt(t.adone)
}

// StoreWT writes n bytes at off of host region r as write-through 16-B
// stores (a proxy GFD): one PCIe write TLP per store, each landing on its
// own (a poller may see part of the descriptor). The content is unknown
// (see WriteWT). It returns when the last store has landed.
func (t *Group) StoreWT(r *mem.Region, off uint64, n sim.Bytes) sim.Time {
	return t.WriteWT(r, off, nil, n)
}

// WriteWT is StoreWT with content src (nil: unknown).
func (t *Group) WriteWT(r *mem.Region, off uint64, src []byte, n sim.Bytes) sim.Time {
	last, issued := t.writeWT(r, off, src, n)
	t.work(issued.Sub(t.Now()))
	return last
}

// writeWT starts WriteWT's stores and returns when the last lands and
// when the group has issued them all.
func (t *Group) writeWT(r *mem.Region, off uint64, src []byte, n sim.Bytes) (last, issued sim.Time) {
	g := t.g
	w := g.cfg.WTStoreBytes
	at := t.Now()
	issue := g.cfg.StoreIssue
	if g.where(r) == host {
		issue = g.cfg.WTStoreIssue
	}
	for k := sim.Bytes(0); k < n; k += w {
		m := min(w, n-k)
		var landed sim.Time
		if g.where(r) == host {
			landed = g.bus.Write(at.Add(g.cfg.HubLatency), g.dev, g.bus.Host(), m)
		} else {
			landed = at.Add(g.cfg.StoreLatency)
			t.noteLocal(landed)
		}
		p := pending{r: r, off: off + uint64(k), n: uint64(m), op: pendWrite, agent: t.agent}
		if src != nil {
			p.data, p.has = src[k:k+m], true
		}
		g.later(landed, p)
		last = max(last, landed)
		at = at.Add(issue)
	}
	t.noteposted(last)
	return last, at
}

// MMIO is a posted MMIO write of n bytes (a doorbell) to PCIe function dev.
// The group pays the issue cost; MMIO returns when the write arrives at the
// device (the caller schedules the device's reaction there).
func (t *Group) MMIO(dev pcie.DevID, n sim.Bytes) (arrive sim.Time) {
	arrive = t.mmio(dev, n)
	t.work(t.g.cfg.MMIOIssue)
	return arrive
}

func (t *Group) mmio(dev pcie.DevID, n sim.Bytes) sim.Time {
	g := t.g
	arrive := g.bus.Write(t.Now().Add(g.cfg.HubLatency), g.dev, dev, n)
	t.noteposted(arrive)
	return arrive
}

// WaitInfo describes what a group spinning in WaitWord waits for.
type WaitInfo struct {
	Region *mem.Region
	Off    uint64
	Reason string
	Since  sim.Time
}

// Waiting reports whether the group is inside WaitWord, and on what.
func (t *Group) Waiting() (WaitInfo, bool) {
	if t.wr == nil {
		return WaitInfo{}, false
	}
	return WaitInfo{Region: t.wr, Off: t.woff, Reason: t.why, Since: t.wsince}, true
}

// WaitSince returns when the group began waiting for the word at off of
// r, for an observer of the wait it is about to make: the launch of a
// group launched waiting on that word (LaunchWaiting) whose body now
// repeats the wait, else now.
func (t *Group) WaitSince(r *mem.Region, off uint64) sim.Time {
	if t.creditR == r && t.creditOff == off && t.creditAt == t.Now() {
		return t.wsince
	}
	return t.Now()
}

// WaitWord spin-polls the 8-byte word at off of r until pred(value) holds
// and returns the value seen. Polls are issued every period (PollInterval
// for local HBM, one read round trip for host or peer memory) from the
// call; each poll's load reads the word when it reaches memory, half a load
// latency after issue, and returns half a load latency later. A write
// landing at T is read by a poll a phase of the period later (uniform,
// pollPhase), and the group returns half a load latency after that read. Between polls that
// fail, the group parks on a watcher of the word (no event per iteration);
// reason names the wait in deadlock reports.
func (t *Group) WaitWord(r *mem.Region, off uint64, reason string, pred func(v uint64) bool) uint64 {
	start, lat, per, credit := t.waitStart(r, off)
	v := r.Load64(off)
	if pred(v) {
		t.work(lat - credit)
		return v
	}
	t.wr, t.woff, t.why, t.wbase, t.wper, t.wlat, t.wsince = r, off, reason, start, per, lat, start
	for {
		t.armed = true
		r.Watch(off, t)
		t.p.Park(reason)
		v = r.Load64(off)
		if pred(v) {
			break
		}
	}
	t.wr, t.why = nil, ""
	t.poll += t.Now().Sub(start)
	t.work(lat - lat/2) // woken at the successful poll's read
	return v
}

// waitStart begins a wait on the word at off of r now: it returns the
// start, the load latency, the poll period (PollInterval for local HBM,
// at least a read round trip elsewhere) and the credit of a LaunchWaiting
// hand-over at this poll's read (else 0), which it consumes.
func (t *Group) waitStart(r *mem.Region, off uint64) (start sim.Time, lat, per, credit sim.Duration) {
	g := t.g
	start = t.Now()
	lat = t.loadDone(r, 8).Sub(start)
	per = g.cfg.PollInterval
	if g.where(r) != local {
		per = max(per, lat)
	}
	if t.creditR == r && t.creditOff == off && t.creditAt == start {
		credit = t.credit // LaunchWaiting started the group at this poll's read
	}
	t.creditR = nil
	return start, lat, per, credit
}

// pollRead returns the read instant of the poll of the current wait that
// sees a change made now: a phase of the loop's period later (pollPhase),
// and no earlier than the first poll's read (issued at the call).
func (t *Group) pollRead(now sim.Time) sim.Time {
	return max(t.wbase.Add(t.wlat/2), now.Add(t.g.pollPhase(t.wper)))
}

// WordChanged implements mem.Watcher: the watched word changed now; the
// spin loop sees it at its next poll's read.
func (t *Group) WordChanged(r *mem.Region, off uint64) {
	if !t.armed || r != t.wr || off != t.woff {
		return
	}
	t.armed = false
	r.Unwatch(off, t)
	at := t.pollRead(t.Now())
	if t.th != nil { // WaitWordThen: poll without blocking the group
		t.g.s.Post(at, (*thenPoll)(t), 0)
		return
	}
	if t.p == nil { // a LaunchWaiting group: poll without a process
		t.g.s.Post(at, (*waiter)(t), 1)
		return
	}
	t.p.WakeAt(at)
}

// Parallel runs body for items 0..n-1 spread over the group's threads the
// way NCCL loops do (for i = thread_rank; i < n; i += size): thread k runs
// items k, k+size, ... in order, all threads concurrently, each as a
// one-thread child group; the group waits for the last one. With one thread
// or one item it runs inline. Children's SM time is not added to the
// GPU's busy time: the parent is charged the elapsed time instead.
func (t *Group) Parallel(n int, body func(th *Group, i int)) {
	if n > 1 && t.g.cfg.Mutations&MutParallelDropLast != 0 {
		n--
	}
	if n <= 0 {
		return
	}
	if t.size == 1 || n == 1 {
		for i := 0; i < n; i++ {
			body(t, i)
		}
		return
	}
	g := t.g
	k := min(n, int(t.size))
	live := k
	start := t.Now()
	kids := t.children(k)
	for j, c := range kids {
		c.p = g.s.Spawn(c.agent, func(*sim.Proc) {
			for i := j; i < n; i += k {
				body(c, i)
			}
			live--
			if live == 0 {
				t.p.Wake()
			}
		})
	}
	for live > 0 {
		t.p.Park("coop threads")
	}
	t.join(kids, start)
}

// children makes the k one-thread child groups of a Parallel section.
func (t *Group) children(k int) []*Group {
	g := t.g
	kids := make([]*Group, k)
	for j := range kids {
		c := g.newGroup(fmt.Sprintf("%s/t%d", t.Name(), j), 1)
		c.sm, c.child = t.sm, true
		kids[j] = c
	}
	return kids
}

// join ends a Parallel section that began at start: the group is charged
// the elapsed time and inherits its children's posted and local writes.
// The children are dropped from the GPU's groups once they are half of
// them.
func (t *Group) join(kids []*Group, start sim.Time) {
	t.busy += t.Now().Sub(start)
	for _, c := range kids {
		t.posted = max(t.posted, c.posted)
		t.acked = max(t.acked, c.acked)
		c.joined = true
	}
	g := t.g
	if g.joined += len(kids); g.joined >= 64 && 2*g.joined > len(g.groups) {
		g.compact()
	}
}
