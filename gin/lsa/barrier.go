package lsa

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
)

// Barrier is ncclLsaBarrierSession (unicast): barrier index of the LSA
// barriers of the device communicator.
type Barrier struct {
	l     *LSA
	index int
	epoch uint64
}

// Barrier opens LSA barrier session index (hybrid barriers use indices
// [0, barrierCount), then the lsaBarrierCount ones).
func (l *LSA) Barrier(index int) *Barrier {
	base := l.dc.UserBarrierBase()
	if n := l.dc.LSABarrierCount() - base; index < 0 || index >= n {
		l.fail("lsa_barrier", gin.ErrInvalid, "LSA barrier %d of %d", index, n)
		return nil
	}
	return l.barrier(base + index)
}

// barrier opens the barrier at index of the whole LSA set (the hybrid
// barrier's come first).
func (l *LSA) barrier(index int) *Barrier {
	return &Barrier{l: l, index: index, epoch: *l.dc.LSAEpoch(l.rank, index)}
}

// Arrive releases the coop's earlier stores (system fence) and stores
// epoch+1 into every other LSA peer's inbox slot for this rank, over
// NVLink, peers spread over the coop's threads.
func (b *Barrier) Arrive(ord gin.MemoryOrder) {
	l := b.l
	t := l.t
	t.Sync()
	if (ord == gin.OrderRelease || ord == gin.OrderAcqRel) && l.dc.Comm().Config().Mutations&gin.MutLSABarrierNoFence == 0 {
		t.Fence(gpu.ScopeSystem)
	}
	n := l.team.NRanks
	me := l.team.Rank
	next := (b.epoch + 1) & 0xffffffff
	t.Parallel(n-1, func(th *gpu.Group, i int) {
		p := (me + 1 + i) % n
		w := gin.TeamRankToWorld(l.rank, l.team, p)
		r, off := l.dc.LSAInbox(w, b.index, me)
		th.Store64(r, off, next)
	})
	t.Sync()
}

// Wait spins until every other peer's inbox slot holds epoch+1 (32-bit
// rolling compare), then advances the epoch.
func (b *Barrier) Wait(ord gin.MemoryOrder) {
	l := b.l
	t := l.t
	n := l.team.NRanks
	me := l.team.Rank
	next := (b.epoch + 1) & 0xffffffff
	t.Sync()
	t.Parallel(n-1, func(th *gpu.Group, i int) {
		p := (me + 1 + i) % n
		r, off := l.dc.LSAInbox(l.rank, b.index, p)
		th.WaitWord(r, off, fmt.Sprintf("lsa barrier %d inbox of lsa rank %d >= %d", b.index, p, next), func(v uint64) bool {
			return gin.RollingLessEq(next, v, 32)
		})
	})
	b.epoch = next
	*l.dc.LSAEpoch(l.rank, b.index) = b.epoch
	t.Sync()
}

// Sync is Arrive then Wait.
func (b *Barrier) Sync(ord gin.MemoryOrder) {
	b.l.record(gin.Call{Op: gin.CallLSABarrier, Barrier: gin.BarrierCall{Kind: gin.BarrierLSA, Index: b.index, Order: ord}})
	b.Arrive(ord)
	b.Wait(ord)
}

// Session is the hybrid ncclBarrierSession (spec 4.3) over the LSA team and
// the rail (or world) GIN team, barrier index of the devComm's barrierCount.
type Session struct {
	dc    *gin.DevComm
	t     *gpu.Group
	rank  int
	ctx   int
	l     *LSA
	index int
}

// NewSession opens hybrid barrier index for world rank rank's coop t; its
// GIN part runs on context ctx (unused without GIN).
func NewSession(dc *gin.DevComm, t *gpu.Group, rank, ctx, index int) *Session {
	return &Session{dc: dc, t: t, rank: rank, ctx: ctx, l: New(dc, t, rank), index: index}
}

// Sync: with the Put fence, unrailed connections and a world GIN barrier,
// the world GIN barrier alone; otherwise the LSA barrier (release half of
// ord) then the rail GIN barrier (acquire half) with the fence.
func (s *Session) Sync(ord gin.MemoryOrder, fence gin.FenceLevel) {
	dc := s.dc
	s.l.recordCtx(s.ctx, gin.Call{Op: gin.CallBarrier, Barrier: gin.BarrierCall{Kind: gin.BarrierHybrid, Index: s.index, Order: ord, Fence: fence}})
	req := dc.Requirements()
	if s.index < 0 || s.index >= req.BarrierCount {
		s.l.fail("barrier", gin.ErrInvalid, "hybrid barrier %d of %d", s.index, req.BarrierCount)
		return
	}
	_, _, worlds := dc.WorldGinBarrierSignals()
	if fence&gin.FencePut != 0 && dc.ConnectionType() != gin.ConnRail && worlds > 0 && dc.Profile().BarrierPerPeerSlots {
		dc.Gin(s.t, s.rank, s.ctx).HybridGinBarrier(gin.BarrierWorldGin, s.index).Run(ord, fence)
		return
	}
	rel, acq := gin.OrderRelaxed, gin.OrderRelaxed
	if ord == gin.OrderRelease || ord == gin.OrderAcqRel {
		rel = gin.OrderRelease
	}
	if ord == gin.OrderAcquire || ord == gin.OrderAcqRel {
		acq = gin.OrderAcquire
	}
	if s.l.team.NRanks > 1 {
		b := s.l.barrier(s.index)
		b.Arrive(rel)
		b.Wait(rel)
	}
	if dc.Rail(s.rank).NRanks > 1 && dc.HasGin() {
		dc.Gin(s.t, s.rank, s.ctx).HybridGinBarrier(gin.BarrierRailGin, s.index).Run(acq, fence)
	}
}
