package gin

import (
	"fmt"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Sharing is ncclGinResourceSharingMode (2.30.3+): who may use a context
// concurrently, which sets the scope of the backend's index atomics.
type Sharing uint8

// Resource-sharing modes.
const (
	SharingGPU    Sharing = iota // any thread of the GPU: device-scope atomics (default)
	SharingCTA                   // one CTA: block-scope atomics
	SharingThread                // one thread: no atomics
)

func (m Sharing) String() string { return [...]string{"gpu", "cta", "thread"}[m] }

// Scope returns the atomic scope the mode needs.
func (m Sharing) Scope() Scope {
	switch m {
	case SharingCTA:
		return gpu.ScopeBlock
	case SharingThread:
		return gpu.ScopeThread
	}
	return gpu.ScopeDevice
}

// Gin is ncclGin bound to the calling coop: one rank's handle on one GIN
// context. Create it inside the coop's body with DevComm.Gin.
type Gin struct {
	dc       *DevComm
	t        *gpu.Group
	rank     int
	ctx      int
	sharing  Sharing
	internal bool // barrier internals: no user-range checks, no recording
	given    Scope
	required Scope
	op       Op
	lastOp   obs.OpID // the last op this handle issued (observer only)
	call     *Call    // the last call reported to a hook (allocated by the first)
	// PutThen's and FlushThen's continuation and step (the program
	// counter of thenStep and flushStep, as every process-free machine
	// keeps one); the backend is the DevComm's (then).
	kh   sim.Handler
	karg uint64
	kpc  uint8
}

// Gin returns the handle of world rank rank's coop t on context ctx, in the
// default (GPU) resource-sharing mode. 2.28 takes ctx modulo the context
// count; 2.30 reports a context outside [0, ContextCount()) (ErrContext).
func (dc *DevComm) Gin(t *gpu.Group, rank, ctx int) *Gin {
	return dc.GinShared(t, rank, ctx, SharingGPU)
}

// GinShared is Gin with a resource-sharing mode (2.30.3+).
func (dc *DevComm) GinShared(t *gpu.Group, rank, ctx int, mode Sharing) *Gin {
	if !dc.c.prof.HasConnectionType && dc.nCtx > 0 && ctx >= 0 {
		ctx %= dc.nCtx // 2.28 maps contextIndex % ginContextCount (spec 2.5)
	}
	g := &Gin{dc: dc, t: t, rank: rank, ctx: ctx, sharing: mode, given: gpu.ScopeThread, required: gpu.ScopeDevice}
	switch {
	case !dc.gin:
		g.fail("ncclGin", ErrNoGin, "")
	case ctx < 0 || ctx >= dc.nReq:
		g.fail("ncclGin", ErrContext, fmt.Sprintf("context %d of %d", ctx, dc.nReq))
	case mode != SharingGPU && !dc.c.prof.HasSharingModes:
		g.fail("ncclGin", ErrUnsupported, "resource-sharing modes")
	}
	return g
}

// DevComm returns the handle's device communicator.
func (g *Gin) DevComm() *DevComm { return g.dc }

// Group returns the coop the handle is bound to.
func (g *Gin) Group() *gpu.Group { return g.t }

// Rank returns the handle's world rank.
func (g *Gin) Rank() int { return g.rank }

// Context returns the handle's context index.
func (g *Gin) Context() int { return g.ctx }

// Sharing returns the handle's resource-sharing mode.
func (g *Gin) Sharing() Sharing { return g.sharing }

// With returns a handle for the same rank and context bound to coop t
// (another thread of the same kernel).
func (g *Gin) With(t *gpu.Group) *Gin {
	return &Gin{dc: g.dc, t: t, rank: g.rank, ctx: g.ctx, sharing: g.sharing, internal: g.internal, given: g.given, required: g.required}
}

// SetRelease sets the givenRelease and requiredRelease scopes that the
// handle's later issue calls pass (defaults: thread, device). For 2.28 they
// are the header's (alreadyReleased, expected_scope), which the
// implementation receives swapped (spec 2.5).
func (g *Gin) SetRelease(given, required Scope) {
	g.given, g.required = given, required
}

// fail reports a user error and stops the coop: the run ends with err.
func (g *Gin) fail(op string, kind error, detail string) {
	name := ""
	if g.t != nil {
		name = g.t.Name()
	}
	s := g.dc.c.sim(g.rank)
	err := &Error{At: s.Now(), Rank: g.rank, Ctx: g.ctx, Coop: name, Op: op, Kind: kind, Detail: detail}
	s.Fail(err)
	if g.t != nil && g.t.Proc() != nil {
		g.t.Proc().Park("gin: failed: " + err.Error())
	}
}

// failf is fail with a formatted detail.
func (g *Gin) failf(op string, kind error, format string, args ...any) {
	g.fail(op, kind, fmt.Sprintf(format, args...))
}

func mask(bits int) uint64 {
	if bits >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(bits) - 1
}

// RollingLessEq is NCCL's rollingLessEq(a, b, bits): a <= b on a circle of
// 2^bits values, valid while the two are within half the range.
func RollingLessEq(a, b uint64, bits int) bool {
	m := mask(bits)
	return (b-a)&m <= m>>1
}

// peer checks (team, peer) and returns the world rank.
func (g *Gin) peer(op string, team Team, peer int) (int, bool) {
	if peer < 0 || peer >= team.NRanks || team.Rank < 0 || team.Rank >= team.NRanks {
		g.failf(op, ErrPeer, "peer %d of a team of %d ranks", peer, team.NRanks)
		return 0, false
	}
	w := TeamRankToWorld(g.rank, team, peer)
	if w < 0 || w >= len(g.dc.c.ranks) {
		g.failf(op, ErrPeer, "team rank %d maps to world rank %d of %d", peer, w, len(g.dc.c.ranks))
		return 0, false
	}
	if !g.dc.Connected(g.rank, w) {
		g.failf(op, ErrNotConnected, "world rank %d from rank %d", w, g.rank)
		return 0, false
	}
	return w, true
}

// window checks that [off, off+n) of w is valid.
func (g *Gin) window(op, what string, w *Window, off, n uint64) bool {
	if w == nil && n == 0 && what != "VA signal window" {
		return true // a zero-byte put may name no window
	}
	if w == nil || w.c != g.dc.c || w.dead {
		g.failf(op, ErrUnregistered, "%s %v", what, w)
		return false
	}
	if off > uint64(w.size) || n > uint64(w.size)-off {
		g.failf(op, ErrWindowBounds, "%s %v [%d,+%d) of %d bytes", what, w, off, n, w.size)
		return false
	}
	return true
}

func (g *Gin) signalID(op string, id int) bool {
	lim := g.dc.userSignals
	if g.internal {
		lim = g.dc.signals
	}
	if id < 0 || id >= lim {
		g.failf(op, ErrSignalRange, "signal %d of %d", id, lim)
		return false
	}
	return true
}

func (g *Gin) counterID(op string, id int) bool {
	if id < 0 || id >= g.dc.counters {
		g.failf(op, ErrCounterRange, "counter %d of %d", id, g.dc.counters)
		return false
	}
	return true
}

func (g *Gin) bits(op string, bits int) bool {
	if bits < 1 || bits > 64 {
		g.failf(op, ErrInvalid, "bits %d", bits)
		return false
	}
	return true
}

// options applies the flags and the handle's scopes to g.op.
func (g *Gin) options(op string, opts []OptFlags) bool {
	p := g.dc.c.prof
	given, required := g.given, g.required
	var flags OptFlags
	for _, o := range opts {
		flags |= o
	}
	if flags != 0 && !p.HasOptFlags {
		g.fail(op, ErrUnsupported, "optFlags (2.29.7+)")
		return false
	}
	if flags&^(OptAggregateRequests|OptMaySkipCreditCheck) != 0 {
		g.failf(op, ErrInvalid, "unknown optFlags %#x", uint32(flags))
		return false
	}
	if p.SwapScopes {
		given, required = required, given
	}
	g.op.Flags, g.op.GivenRelease, g.op.RequiredRelease = flags, given, required
	return true
}

// remote validates a remote action aimed at world rank peer.
func (g *Gin) remote(op string, a RemoteAction, peer int) bool {
	if a == nil {
		return true
	}
	p := g.dc.c.prof
	if IsWeak(a) && !p.HasWeakSignals {
		g.fail(op, ErrUnsupported, "weak signals (2.30.5+)")
		return false
	}
	if id, add, ok := SignalOf(a); ok {
		if !g.signalID(op, id) {
			return false
		}
		_, inc := a.(SignalInc)
		return g.dc.noteUpdate(g, op, false, peer, id, inc, add)
	}
	w, off, _, _ := VASignalOf(a)
	if !p.HasVASignals {
		g.fail(op, ErrUnsupported, "VA signals (2.29.7+)")
		return false
	}
	if !g.window(op, "VA signal window", w, off, 8) {
		return false
	}
	if w.flags&WinStrictOrdering == 0 || off%8 != 0 {
		g.failf(op, ErrInvalid, "VA signal at %v+%d needs an 8-byte aligned word of a NCCL_WIN_STRICT_ORDERING window", w, off)
		return false
	}
	return true
}

func (g *Gin) local(op string, a LocalAction) bool {
	if a == nil {
		return true
	}
	c := a.(CounterInc)
	if !g.counterID(op, c.Counter) {
		return false
	}
	return g.dc.noteUpdate(g, op, true, g.rank, c.Counter, true, 1)
}

// issue runs the coop protocol around the backend: Sync, thread 0 issues,
// Sync.
func (g *Gin) issue() {
	g.op.Ctx = g.ctx
	g.op.Sharing = g.sharing
	g.stamp()
	g.t.Sync()
	g.dc.backend.Issue(g.t, g.dc, g.rank, &g.op)
	g.t.Sync()
}

// Put is ncclGin::put: bytes from srcOff of src (this rank) to dstOff of dst
// at team member peer, with an optional remote action at the peer and
// local action here. It returns once the operation is enqueued.
func (g *Gin) Put(team Team, peer int, dst *Window, dstOff uint64, src *Window, srcOff uint64, bytes uint64, remote RemoteAction, local LocalAction, opts ...OptFlags) {
	if g.putOp(team, peer, dst, dstOff, src, srcOff, bytes, remote, local, opts) {
		g.issue()
	}
}

// PutThen is Put for a group without a process (gpu.GPU.LaunchHandler) on
// a backend that can issue for one (CanThen): h.Handle(s, arg) runs when
// Put would have returned. On a user error the run fails and h never runs.
func (g *Gin) PutThen(h sim.Handler, arg uint64, team Team, peer int, dst *Window, dstOff uint64, src *Window, srcOff uint64,
	bytes uint64, remote RemoteAction, local LocalAction, opts ...OptFlags) {
	if g.putOp(team, peer, dst, dstOff, src, srcOff, bytes, remote, local, opts) {
		g.issueThen(h, arg)
	}
}

// issueThen is issue for a group without a process: coop.Sync, the
// backend's IssueThen, coop.Sync, then h.Handle(s, arg).
func (g *Gin) issueThen(h sim.Handler, arg uint64) {
	if _, ok := g.dc.backend.(ThenBackend); !ok {
		panic(fmt.Sprintf("gin: %v on backend %s, which issues only for a group with a process (check CanThen)", g.op.Kind, g.dc.backend.Name()))
	}
	g.op.Ctx, g.op.Sharing = g.ctx, g.sharing
	g.stamp()
	g.kh, g.karg, g.kpc = h, arg, thenIssue
	g.t.SyncThen((*thenStep)(g), 0)
}

// then returns the backend as a ThenBackend (PutThen and FlushThen checked
// that it is one).
func (dc *DevComm) then() ThenBackend { return dc.backend.(ThenBackend) }

// CanThen reports whether the handle's backend can issue for a group
// without a process (PutThen).
func (g *Gin) CanThen() bool {
	_, ok := g.dc.backend.(ThenBackend)
	return ok
}

// thenStep is the front end's part of PutThen: coop.Sync, the backend's
// issue, coop.Sync, then the caller's continuation.
type thenStep Gin

const (
	thenIssue uint8 = iota
	thenSync
	thenDone
)

// Handle implements sim.Handler.
func (st *thenStep) Handle(s *sim.Sim, _ uint64) {
	g := (*Gin)(st)
	switch g.kpc {
	case thenIssue:
		g.kpc = thenSync
		g.dc.then().IssueThen(g.t, g.dc, g.rank, &g.op, st, 0)
	case thenSync:
		g.kpc = thenDone
		g.t.SyncThen(st, 0)
	default:
		h := g.kh
		g.kh = nil
		h.Handle(s, g.karg)
	}
}

// putOp checks a put and fills g.op with it (false: a user error failed
// the run).
func (g *Gin) putOp(team Team, peer int, dst *Window, dstOff uint64, src *Window, srcOff uint64, bytes uint64, remote RemoteAction, local LocalAction, opts []OptFlags) bool {
	const op = "put"
	w, ok := g.peer(op, team, peer)
	if !ok || !g.window(op, "destination", dst, dstOff, bytes) || !g.window(op, "source", src, srcOff, bytes) ||
		!g.options(op, opts) || !g.remote(op, remote, w) || !g.local(op, local) {
		return false
	}
	if g.dc.hook != nil && !g.internal {
		g.recordPut(team, peer, dst, dstOff, src, srcOff, bytes, remote, local)
	}
	o := &g.op
	flags, given, required := o.Flags, o.GivenRelease, o.RequiredRelease
	*o = Op{}
	o.Kind, o.Peer, o.Dst, o.DstOff, o.Src, o.SrcOff, o.Bytes = OpPut, w, dst, dstOff, src, srcOff, bytes
	o.Remote, o.Local, o.Flags, o.GivenRelease, o.RequiredRelease = remote, local, flags, given, required
	return true
}

// recordPut reports a put to the hook (kept out of Put's frame).
//
//go:noinline
func (g *Gin) recordPut(team Team, peer int, dst *Window, dstOff uint64, src *Window, srcOff uint64, bytes uint64, remote RemoteAction, local LocalAction) {
	g.record(Call{Op: CallPut, Team: team, Peer: peer, Dst: dst, DstOff: dstOff, Src: src, SrcOff: srcOff, Bytes: bytes, Remote: remote, Local: local, Opts: g.op})
}

// PutValue is ncclGin::putValue: size (1, 2, 4 or 8) bytes of value to
// dstOff of dst at peer, with an optional remote action (no local action).
func (g *Gin) PutValue(team Team, peer int, dst *Window, dstOff uint64, value uint64, size int, remote RemoteAction, opts ...OptFlags) {
	const op = "put_value"
	if size != 1 && size != 2 && size != 4 && size != 8 {
		g.failf(op, ErrInvalid, "value size %d (sizeof(T) must be 1, 2, 4 or 8)", size)
		return
	}
	w, ok := g.peer(op, team, peer)
	if !ok || !g.window(op, "destination", dst, dstOff, uint64(size)) || !g.options(op, opts) || !g.remote(op, remote, w) {
		return
	}
	value &= mask(8 * size)
	g.record(Call{Op: CallPutValue, Team: team, Peer: peer, Dst: dst, DstOff: dstOff, Value: value, Size: size, Remote: remote, Opts: g.op})
	g.op = Op{Kind: OpPutValue, Peer: w, Dst: dst, DstOff: dstOff, Value: value, ValueSize: size, Remote: remote,
		Flags: g.op.Flags, GivenRelease: g.op.GivenRelease, RequiredRelease: g.op.RequiredRelease}
	if g.dc.c.cfg.Mutations&MutPutValueWide != 0 {
		g.op.ValueSize = 8
	}
	g.issue()
}

// Signal is ncclGin::signal: the remote action alone, ordered like a
// zero-byte put with that action.
func (g *Gin) Signal(team Team, peer int, remote RemoteAction, opts ...OptFlags) {
	if g.signalOp(team, peer, remote, opts) {
		g.issue()
	}
}

// SignalThen is Signal for a group without a process, as PutThen is Put.
func (g *Gin) SignalThen(h sim.Handler, arg uint64, team Team, peer int, remote RemoteAction, opts ...OptFlags) {
	if g.signalOp(team, peer, remote, opts) {
		g.issueThen(h, arg)
	}
}

// signalOp checks a signal and fills g.op with it (false: a user error
// failed the run).
func (g *Gin) signalOp(team Team, peer int, remote RemoteAction, opts []OptFlags) bool {
	const op = "signal"
	if remote == nil {
		g.fail(op, ErrInvalid, "signal without a remote action")
		return false
	}
	w, ok := g.peer(op, team, peer)
	if !ok || !g.options(op, opts) || !g.remote(op, remote, w) {
		return false
	}
	g.record(Call{Op: CallSignal, Team: team, Peer: peer, Remote: remote, Opts: g.op})
	g.op = Op{Kind: OpSignal, Peer: w, Remote: remote,
		Flags: g.op.Flags, GivenRelease: g.op.GivenRelease, RequiredRelease: g.op.RequiredRelease}
	return true
}

// Get is ncclGin::get (2.30.3+): bytes from remoteOff of rwin at peer to
// localOff of lwin here; visible after Flush, FlushAsync+Wait or a barrier
// with the Get fence.
func (g *Gin) Get(team Team, peer int, rwin *Window, remoteOff uint64, lwin *Window, localOff uint64, bytes uint64, opts ...OptFlags) {
	const op = "get"
	if !g.dc.c.prof.HasGet {
		g.fail(op, ErrUnsupported, "get (2.30.3+)")
		return
	}
	w, ok := g.peer(op, team, peer)
	if !ok || !g.window(op, "remote", rwin, remoteOff, bytes) || !g.window(op, "local", lwin, localOff, bytes) || !g.options(op, opts) {
		return
	}
	g.record(Call{Op: CallGet, Team: team, Peer: peer, Src: rwin, SrcOff: remoteOff, Dst: lwin, DstOff: localOff, Bytes: bytes, Opts: g.op})
	g.op = Op{Kind: OpGet, Peer: w, Dst: lwin, DstOff: localOff, Src: rwin, SrcOff: remoteOff, Bytes: bytes,
		Flags: g.op.Flags, GivenRelease: g.op.GivenRelease, RequiredRelease: g.op.RequiredRelease}
	g.issue()
}

// Flush is ncclGin::flush: waits until everything issued on this context to
// every connected peer is locally complete. Peers are spread over the
// coop's threads (peer i on thread i % size); each thread snapshots and
// waits per peer.
func (g *Gin) Flush() {
	g.record(Call{Op: CallFlush})
	g.flush()
}

func (g *Gin) flush() {
	if !g.dc.gin {
		g.fail("flush", ErrNoGin, "")
		return
	}
	peers := g.dc.peers(g.rank)
	b, dc, rank, ctx := g.dc.backend, g.dc, g.rank, g.ctx
	since := g.t.Now()
	g.t.Sync()
	g.t.Parallel(len(peers), func(th *gpu.Group, i int) {
		r := b.FlushAsync(th, dc, rank, ctx, peers[i])
		b.Wait(th, dc, rank, r)
	})
	g.seen(obs.Completed, "flush", since, nil, 0, 0)
	g.t.Sync()
}

// FlushThen is Flush for a group without a process, as PutThen is Put:
// the same per-peer flushes on the same threads (gpu.Group.ParallelThen);
// h.Handle(s, arg) runs when Flush would have returned.
func (g *Gin) FlushThen(h sim.Handler, arg uint64) {
	g.record(Call{Op: CallFlush})
	if !g.dc.gin {
		g.fail("flush", ErrNoGin, "")
		return
	}
	if _, ok := g.dc.backend.(ThenBackend); !ok {
		panic(fmt.Sprintf("gin: flush on backend %s, which flushes only for a group with a process (check CanThen)", g.dc.backend.Name()))
	}
	g.kh, g.karg, g.kpc = h, arg, flushPeers
	g.t.SyncThen((*flushStep)(g), 0)
}

// flushStep is FlushThen's front end: coop.Sync, the per-peer flushes,
// coop.Sync, then the caller's continuation.
type flushStep Gin

const (
	flushPeers uint8 = iota
	flushSync
	flushDone
)

// Handle implements sim.Handler.
func (st *flushStep) Handle(s *sim.Sim, _ uint64) {
	g := (*Gin)(st)
	switch g.kpc {
	case flushPeers:
		g.kpc = flushSync
		g.t.ParallelThen(len(g.dc.peers(g.rank)), st.peer, st, 0)
	case flushSync:
		g.kpc = flushDone
		g.t.SyncThen(st, 0)
	default:
		h := g.kh
		g.kh = nil
		h.Handle(s, g.karg)
	}
}

// peer flushes the i-th connected peer on thread th.
func (st *flushStep) peer(th *gpu.Group, i int, h sim.Handler, arg uint64) {
	g := (*Gin)(st)
	g.dc.then().FlushThen(th, g.dc, g.rank, g.ctx, g.dc.peers(g.rank)[i], h, arg)
}

// FlushAsync is ncclGin::flushAsync (2.30.3+): snapshot what this context
// issued to peer; Wait completes it.
func (g *Gin) FlushAsync(team Team, peer int) Request {
	const op = "flush_async"
	if !g.dc.c.prof.HasFlushAsync {
		g.fail(op, ErrUnsupported, "flushAsync (2.30.3+)")
		return Request{}
	}
	w, ok := g.peer(op, team, peer)
	if !ok {
		return Request{}
	}
	g.record(Call{Op: CallFlushAsync, Team: team, Peer: peer})
	g.t.Sync()
	r := g.dc.backend.FlushAsync(g.t, g.dc, g.rank, g.ctx, w)
	g.t.Sync()
	return r
}

// Wait is ncclGin::wait on a FlushAsync request.
func (g *Gin) Wait(r Request) {
	const op = "wait"
	if !g.dc.c.prof.HasFlushAsync {
		g.fail(op, ErrUnsupported, "wait (2.30.3+)")
		return
	}
	if r.Ctx != g.ctx || !g.dc.Connected(g.rank, r.Peer) {
		g.failf(op, ErrInvalid, "request of ctx %d peer %d on a ctx %d handle", r.Ctx, r.Peer, g.ctx)
		return
	}
	g.record(Call{Op: CallWait, Req: r})
	since := g.t.Now()
	g.t.Sync()
	g.dc.backend.Wait(g.t, g.dc, g.rank, r)
	g.completed("wait", since, 0, uint64(r.Peer))
	g.t.Sync()
}

// lessEq is the waits' compare: RollingLessEq, or a mutant's.
func (dc *DevComm) lessEq(a, b uint64, bits int) bool {
	if m := dc.c.cfg.Mutations; m&(MutWaitStrict|MutWaitNoRolling) != 0 {
		a, b = a&mask(bits), b&mask(bits)
		if m&MutWaitStrict != 0 {
			return RollingLessEq(a+1, b, bits)
		}
		return a <= b
	}
	return RollingLessEq(a, b, bits)
}

// signalWord returns the word of signal id of this context and its offset.
func (g *Gin) signalWord(id int) (*mem.Region, uint64, uint64) {
	r, off := g.dc.backend.SignalWord(g.dc, g.rank, g.ctx, id)
	o := g.dc.backend.SignalOffset(g.dc, g.rank, g.ctx, id)
	if s, ok := g.ownReset(ownKey{g.t, g.ctx, id, false}); ok && s.Offset {
		o = s.Value
	}
	return r, off, o
}

// ownKey names a signal or counter reset by a group.
type ownKey struct {
	t       *gpu.Group
	ctx, id int
	counter bool
}

// ownReset returns the group's reset store of k if it has not landed yet:
// a thread sees its own store in program order (spec 2.2, resetSignal),
// before it reaches memory.
func (g *Gin) ownReset(k ownKey) (ResetStore, bool) {
	own := g.dc.part(g.rank).own
	if len(own) == 0 {
		return ResetStore{}, false
	}
	s, ok := own[k]
	if ok && g.t.Now() >= s.Landed {
		delete(own, k)
		return ResetStore{}, false
	}
	return s, ok
}

// noteOwnReset remembers a reset store of k that has not landed yet.
// Whenever the map has doubled since the last sweep, the stores landed by
// now are dropped (ownReset would drop them on the group's next look, but
// a group that resets a signal last, as a receiving warp does, never looks
// again, and its entry would keep the group in memory).
func (g *Gin) noteOwnReset(k ownKey, s ResetStore) {
	now := g.t.Now()
	if s.Landed <= now {
		return
	}
	p := g.dc.part(g.rank)
	if p.own == nil {
		p.own = map[ownKey]ResetStore{}
	}
	p.own[k] = s
	if len(p.own) >= max(2*p.ownKept, 64) {
		for k, s := range p.own {
			if s.Landed <= now {
				delete(p.own, k)
			}
		}
		p.ownKept = len(p.own)
	}
}

// seenRaw is the raw word the group sees: 0 while its own reset store of
// 0 into the word is in flight.
func (g *Gin) seenRaw(k ownKey, v uint64) uint64 {
	if s, ok := g.ownReset(k); ok && !s.Offset {
		return 0
	}
	return v
}

// ReadSignal is ncclGin::readSignal: (raw - offset) & mask(bits).
func (g *Gin) ReadSignal(id int, bits int) uint64 {
	const op = "read_signal"
	if !g.dc.gin {
		g.fail(op, ErrNoGin, "")
		return 0
	}
	if !g.signalID(op, id) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallReadSignal, Signal: id, Bits: bits})
	r, off, o := g.signalWord(id)
	v := g.seenRaw(ownKey{g.t, g.ctx, id, false}, g.t.Load64(r, off))
	g.read("signal", r, off, 8, v)
	return (v - o) & mask(bits)
}

// WaitSignal is ncclGin::waitSignal: thread 0 spins until
// rollingLessEq(least+offset, raw, bits), then the coop syncs. It returns
// the value seen (raw - offset, masked).
func (g *Gin) WaitSignal(id int, least uint64, bits int) uint64 {
	const op = "wait_signal"
	if !g.dc.gin {
		g.fail(op, ErrNoGin, "")
		return 0
	}
	if !g.signalID(op, id) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallWaitSignal, Signal: id, Value: least, Bits: bits})
	return g.waitSignal(id, least, bits)
}

func (g *Gin) waitSignal(id int, least uint64, bits int) uint64 {
	r, off, o := g.signalWord(id)
	what := "signal"
	if g.internal {
		what = "barrier signal"
	}
	d := g.dc.wait(g, what, id, least, bits, o, r, off)
	k := ownKey{g.t, g.ctx, id, false}
	since := g.t.WaitSince(r, off)
	v := g.t.WaitWord(r, off, "gin signal", func(v uint64) bool { return g.dc.lessEq(least+o, g.seenRaw(k, v), bits) })
	v = g.seenRaw(k, v)
	g.seen(obs.SignalSeen, "signal", since, r, off, v)
	g.dc.endWait(g, d)
	g.t.Sync()
	return (v - o) & mask(bits)
}

// SignalShadow returns this context's shadow of signal id (a local scratch
// word, getSignalShadowPtr).
func (g *Gin) SignalShadow(id int) uint64 {
	if !g.signalID("signal_shadow", id) {
		return 0
	}
	return g.dc.shadows[g.rank][g.ctx*g.dc.signals+id]
}

// SetSignalShadow stores v into the shadow of signal id.
func (g *Gin) SetSignalShadow(id int, v uint64) {
	if g.signalID("signal_shadow", id) {
		g.dc.shadows[g.rank][g.ctx*g.dc.signals+id] = v
	}
}

// IncreaseSignalShadow is ncclGin::increaseSignalShadow (a CTA-scope
// red.add on the shadow).
func (g *Gin) IncreaseSignalShadow(id int, delta uint64) {
	const op = "increase_signal_shadow"
	if !g.signalID(op, id) {
		return
	}
	g.record(Call{Op: CallIncreaseShadow, Signal: id, Value: delta})
	g.dc.shadows[g.rank][g.ctx*g.dc.signals+id] += delta
	g.t.Compute(g.t.GPU().Config().AtomicBlock)
}

// WaitSignalMeetShadow is ncclGin::waitSignalMeetShadow: wait until the
// signal reaches its shadow.
func (g *Gin) WaitSignalMeetShadow(id int, bits int) uint64 {
	const op = "wait_signal_meet_shadow"
	if !g.dc.gin || !g.signalID(op, id) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallWaitMeetShadow, Signal: id, Bits: bits})
	return g.waitSignal(id, g.dc.shadows[g.rank][g.ctx*g.dc.signals+id], bits)
}

// WaitSignalFollowShadow is ncclGin::waitSignalFollowShadow: wait until the
// signal reaches shadow+leastDelta, set the shadow to the value seen, and
// return the old shadow and the increase.
func (g *Gin) WaitSignalFollowShadow(id int, leastDelta uint64, bits int) (before, delta uint64) {
	const op = "wait_signal_follow_shadow"
	if !g.dc.gin || !g.signalID(op, id) || !g.bits(op, bits) {
		return 0, 0
	}
	g.record(Call{Op: CallWaitFollowShadow, Signal: id, Value: leastDelta, Bits: bits})
	sh := &g.dc.shadows[g.rank][g.ctx*g.dc.signals+id]
	before = *sh
	v := g.waitSignal(id, before+leastDelta, bits)
	if g.dc.c.prof.FollowShadowStores {
		*sh = v
	}
	return before, (v - before) & mask(bits)
}

// ResetSignal is ncclGin::resetSignal: the signal and its shadow become 0
// (a store of 0, or the proxy v2 offset). It must not race with updates:
// a reset while an update issued before it has not landed, or an update
// landing between the reset and the reset's store landing, is reported
// (ErrResetRace).
func (g *Gin) ResetSignal(id int) {
	const op = "reset_signal"
	if !g.dc.gin || !g.signalID(op, id) {
		return
	}
	g.record(Call{Op: CallResetSignal, Signal: id})
	g.dc.shadows[g.rank][g.ctx*g.dc.signals+id] = 0
	tr := g.dc.beginReset(g, op, false, id)
	if g.dc.c.cfg.Mutations&MutResetNoStore != 0 {
		return
	}
	s := g.dc.backend.ResetSignal(g.t, g.dc, g.rank, g.ctx, id)
	g.noteOwnReset(ownKey{g.t, g.ctx, id, false}, s)
	r, off, o := g.signalWord(id)
	g.dc.endReset(tr, r, off, o)
}

// counterWord returns the word of counter id.
func (g *Gin) counterWord(id int) (*mem.Region, uint64) {
	return g.dc.backend.CounterWord(g.dc, g.rank, g.ctx, id)
}

// ReadCounter is ncclGin::readCounter (bits: 56 by default).
func (g *Gin) ReadCounter(id int, bits int) uint64 {
	const op = "read_counter"
	if !g.dc.gin || !g.counterID(op, id) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallReadCounter, Counter: id, Bits: bits})
	r, off := g.counterWord(id)
	v := g.seenRaw(ownKey{g.t, g.ctx, id, true}, g.t.Load64(r, off))
	g.read("counter", r, off, 8, v)
	return v & mask(bits)
}

// WaitCounter is ncclGin::waitCounter: spin until the counter reaches least
// (rolling compare on bits; 64 bits in 2.28, spec 2.5), then sync.
func (g *Gin) WaitCounter(id int, least uint64, bits int) uint64 {
	const op = "wait_counter"
	if !g.dc.gin || !g.counterID(op, id) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallWaitCounter, Counter: id, Value: least, Bits: bits})
	cb := bits
	if g.dc.c.prof.WaitCounter64 {
		cb = 64
	}
	r, off := g.counterWord(id)
	d := g.dc.wait(g, "counter", id, least, cb, 0, r, off)
	k := ownKey{g.t, g.ctx, id, true}
	since := g.t.WaitSince(r, off)
	v := g.t.WaitWord(r, off, "gin counter", func(v uint64) bool { return g.dc.lessEq(least, g.seenRaw(k, v), cb) })
	v = g.seenRaw(k, v)
	g.seen(obs.Completed, "counter", since, r, off, v)
	g.dc.endWait(g, d)
	g.t.Sync()
	return v & mask(bits)
}

// ResetCounter is ncclGin::resetCounter: a plain store of 0; no update may
// be in flight (ErrResetRace).
func (g *Gin) ResetCounter(id int) {
	const op = "reset_counter"
	if !g.dc.gin || !g.counterID(op, id) {
		return
	}
	g.record(Call{Op: CallResetCounter, Counter: id})
	tr := g.dc.beginReset(g, op, true, id)
	r, off := g.counterWord(id)
	g.noteOwnReset(ownKey{g.t, g.ctx, id, true}, ResetStore{Landed: g.t.Store64(r, off, 0)})
	g.dc.endReset(tr, r, off, 0)
}

// ReadVASignal reads the VA signal at off of this rank's part of w.
func (g *Gin) ReadVASignal(w *Window, off uint64, bits int) uint64 {
	const op = "read_va_signal"
	if !g.dc.c.prof.HasVASignals {
		g.fail(op, ErrUnsupported, "VA signals (2.29.7+)")
		return 0
	}
	if !g.window(op, "VA signal window", w, off, 8) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallReadVASignal, Dst: w, DstOff: off, Bits: bits})
	r := w.regions[g.rank]
	v := g.t.Load64(r, off)
	g.read("va signal", r, off, 8, v)
	return v & mask(bits)
}

// ReadWindow is a device load of len(dst) bytes at off of this rank's part
// of w (the payload a kernel consumes; gpu.Group.Read's timing). It is not
// a GIN call: it exists so that an observer sees which window bytes device
// code read, and when.
func (g *Gin) ReadWindow(w *Window, off uint64, dst []byte) {
	if len(dst) == 0 || !g.window("read_window", "window", w, off, uint64(len(dst))) {
		return
	}
	r := w.regions[g.rank]
	g.t.Read(r, off, dst)
	g.read("window", r, off, uint64(len(dst)), 0)
}

// WaitVASignal waits until the VA signal at off of this rank's part of w
// reaches least.
func (g *Gin) WaitVASignal(w *Window, off uint64, least uint64, bits int) uint64 {
	const op = "wait_va_signal"
	if !g.dc.c.prof.HasVASignals {
		g.fail(op, ErrUnsupported, "VA signals (2.29.7+)")
		return 0
	}
	if !g.window(op, "VA signal window", w, off, 8) || !g.bits(op, bits) {
		return 0
	}
	g.record(Call{Op: CallWaitVASignal, Dst: w, DstOff: off, Value: least, Bits: bits})
	r := w.regions[g.rank]
	d := g.dc.wait(g, "va signal "+w.name, int(off), least, bits, 0, r, off)
	since := g.t.WaitSince(r, off)
	v := g.t.WaitWord(r, off, "gin va signal", func(v uint64) bool { return RollingLessEq(least, v, bits) })
	g.seen(obs.SignalSeen, "va signal", since, r, off, v)
	g.dc.endWait(g, d)
	g.t.Sync()
	return v & mask(bits)
}

// ResetVASignal stores 0 into the VA signal at off of this rank's part of w.
func (g *Gin) ResetVASignal(w *Window, off uint64) {
	const op = "reset_va_signal"
	if !g.dc.c.prof.HasVASignals {
		g.fail(op, ErrUnsupported, "VA signals (2.29.7+)")
		return
	}
	if !g.window(op, "VA signal window", w, off, 8) {
		return
	}
	g.record(Call{Op: CallResetVASignal, Dst: w, DstOff: off})
	g.t.Store64(w.regions[g.rank], off, 0)
}

// Compute spends d of SM time in the coop (recorded as a program op).
func (g *Gin) Compute(d sim.Duration) {
	g.record(Call{Op: CallCompute, Duration: d})
	g.t.Compute(d)
}

// Sleep suspends the coop for d (recorded as a program op).
func (g *Gin) Sleep(d sim.Duration) {
	g.record(Call{Op: CallSleep, Duration: d})
	g.t.Sleep(d)
}
