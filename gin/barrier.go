package gin

import (
	"fmt"

	"github.com/ginsim/ginsim/gpu"
)

// MemoryOrder is the cuda::memory_order of a barrier or wait.
type MemoryOrder uint8

// Memory orders.
const (
	OrderRelaxed MemoryOrder = iota
	OrderAcquire
	OrderRelease
	OrderAcqRel
)

func (o MemoryOrder) String() string {
	return [...]string{"relaxed", "acquire", "release", "acq_rel"}[o]
}

func (o MemoryOrder) release() bool { return o == OrderRelease || o == OrderAcqRel }

// FenceLevel is ncclGinFenceLevel (2.30 bit flags).
type FenceLevel uint32

// Fence levels.
const (
	FenceNone FenceLevel = 0
	FencePut  FenceLevel = 1 // puts others issued to me before the barrier are visible
	FenceGet  FenceLevel = 2 // my gets issued before the barrier have landed
)

// BarrierKind says which barrier a session uses.
type BarrierKind uint8

// Barrier kinds.
const (
	BarrierRailGin  BarrierKind = iota // ncclGinBarrierSession(ncclTeamTagRail)
	BarrierWorldGin                    // ncclGinBarrierSession(ncclTeamTagWorld)
	BarrierLSA                         // ncclLsaBarrierSession (gin/lsa)
	BarrierHybrid                      // ncclBarrierSession (gin/lsa)
)

func (k BarrierKind) String() string {
	return [...]string{"rail_gin", "world_gin", "lsa", "hybrid"}[k]
}

// GinBarrier is ncclGinBarrierSession: barrier index of the rail or world
// GIN barriers, run through GIN signals on the handle's context (or every
// context with AllContexts), so it works over any backend.
type GinBarrier struct {
	g     *Gin
	kind  BarrierKind
	index int
	all   bool
	team  Team
	set   barrierSet
	slot  int // index into the 2.28 epochs
	abs   int // the barrier's position in its set (hybrid ones first)
}

// GinBarrier opens a GIN barrier session on g's coop: kind is
// BarrierRailGin or BarrierWorldGin, index the barrier instance,
// allContexts the ncclGinAllContexts variant.
func (g *Gin) GinBarrier(kind BarrierKind, index int, allContexts bool) *GinBarrier {
	dc := g.dc
	if allContexts && !dc.c.prof.HasAllContexts {
		g.fail("gin_barrier", ErrUnsupported, "ncclGinAllContexts (2.30)")
	}
	user := dc.UserBarrierBase()
	n := 0
	switch {
	case kind == BarrierRailGin && user > 0:
		n = dc.req.RailGinBarrierCount
	case kind == BarrierWorldGin && user > 0:
		n = dc.req.WorldGinBarrierCount
	}
	if user == 0 || (kind == BarrierWorldGin && dc.req.ConnectionType == ConnRail) {
		user, n = 0, -1 // the whole set
	}
	return g.ginBarrier(kind, index, user, n, allContexts)
}

// HybridGinBarrier opens the GIN barrier half of hybrid barrier index
// (ncclBarrierSession): its own set in 2.30, the shared one in 2.28.
func (g *Gin) HybridGinBarrier(kind BarrierKind, index int) *GinBarrier {
	return g.ginBarrier(kind, index, 0, -1, false)
}

// ginBarrier opens barrier base+index of kind's set, checking index
// against n (n < 0: the set's count).
func (g *Gin) ginBarrier(kind BarrierKind, index, base, n int, allContexts bool) *GinBarrier {
	dc := g.dc
	b := &GinBarrier{g: g, kind: kind, index: index, abs: base + index, all: allContexts}
	switch kind {
	case BarrierRailGin:
		b.team, b.set, b.slot = dc.Rail(g.rank), dc.railGin, base+index
	case BarrierWorldGin:
		b.team, b.set, b.slot = dc.World(g.rank), dc.worldGin, dc.railGin.count+base+index
	default:
		g.failf("gin_barrier", ErrInvalid, "barrier kind %v is not a GIN barrier", kind)
		return b
	}
	if n < 0 {
		n = b.set.count - base
	}
	if index < 0 || index >= n {
		g.failf("gin_barrier", ErrInvalid, "%v barrier %d of %d", kind, index, n)
	}
	return b
}

// firstSignal is the signal id of the barrier's first slot.
func (b *GinBarrier) firstSignal() int { return b.set.base + b.abs*b.set.width }

// Sync is ncclGinBarrierSession::sync (spec 4.1). fence is ignored by the
// 2.28 algorithm (Relaxed only).
func (b *GinBarrier) Sync(ord MemoryOrder, fence FenceLevel) {
	g := b.g
	g.record(Call{Op: CallBarrier, Barrier: BarrierCall{Kind: b.kind, Index: b.index, AllContexts: b.all, Order: ord, Fence: fence}})
	if fence != FenceNone && !g.dc.c.prof.HasBarrierFences {
		g.fail("gin_barrier", ErrUnsupported, "GIN barrier fence levels other than Relaxed (2.30)")
		return
	}
	b.sync(ord, fence)
}

// Run is Sync without reporting the call to the DevComm's hook: composite
// barriers (the hybrid one in gin/lsa) use it.
func (b *GinBarrier) Run(ord MemoryOrder, fence FenceLevel) { b.sync(ord, fence) }

func (b *GinBarrier) sync(ord MemoryOrder, fence FenceLevel) {
	g := b.g
	dc := g.dc
	t := g.t
	since := t.Now()
	ctxs := []int{g.ctx}
	if b.all {
		ctxs = make([]int, dc.nReq) // ginContextCount: the request (M5)
		for i := range ctxs {
			ctxs[i] = i
		}
	}
	// The signal's scopes: a release order makes the backend fence
	// (given = thread); relaxed passes system (no fence). 2.28 swaps the
	// arguments, so there the relaxed barrier fences (spec 2.5).
	given := gpu.ScopeSystem
	if ord.release() {
		given = gpu.ScopeThread
	}
	n := b.team.NRanks
	t.Sync()
	if dc.c.prof.BarrierPerPeerSlots {
		nPeer := n - 1
		if fence&FencePut != 0 {
			nPeer = n
		}
		base := b.set.base + b.abs*b.set.width
		t.Parallel(nPeer*len(ctxs), func(th *gpu.Group, i int) {
			ctx := ctxs[i/nPeer]
			peer := (b.team.Rank + 1 + i%nPeer) % n
			h := &Gin{dc: dc, t: th, rank: g.rank, ctx: ctx, sharing: g.sharing, internal: true, given: given, required: gpu.ScopeDevice}
			h.Signal(b.team, peer, SignalInc{Signal: base + b.team.Rank})
			sh := &dc.shadows[g.rank][ctx*dc.signals+base+peer]
			*sh = (*sh + 1) & mask(32)
			if dc.c.cfg.Mutations&MutBarrierNoWait == 0 {
				h.waitSignal(base+peer, *sh, 32)
			}
		})
		if fence&FenceGet != 0 {
			for _, ctx := range ctxs {
				h := &Gin{dc: dc, t: t, rank: g.rank, ctx: ctx, sharing: g.sharing, internal: true}
				h.flush()
			}
		}
	} else {
		// 2.28: one signal per barrier, SignalInc to every other member,
		// epoch += n-1, wait signal >= epoch (32 bits), per context.
		sig := b.set.base + b.abs
		for _, ctx := range ctxs {
			h := &Gin{dc: dc, t: t, rank: g.rank, ctx: ctx, sharing: g.sharing, internal: true, given: given, required: gpu.ScopeDevice}
			t.Parallel(n-1, func(th *gpu.Group, i int) {
				peer := (b.team.Rank + 1 + i) % n
				hh := h.With(th)
				hh.Signal(b.team, peer, SignalInc{Signal: sig})
			})
			ep := &dc.epochs28[g.rank][ctx*(dc.railGin.count+dc.worldGin.count)+b.slot]
			*ep += uint64(n - 1)
			h.waitSignal(sig, *ep&mask(32), 32)
		}
	}
	var all uint64
	if b.all {
		all = 1
	}
	if !dc.c.prof.BarrierPerPeerSlots {
		fence = 0 // 2.28: Relaxed only
	}
	g.completed("barrier", since, uint32(fence), all)
	t.Sync()
}

// String names the session.
func (b *GinBarrier) String() string { return fmt.Sprintf("%v barrier %d", b.kind, b.index) }
