package gin

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/gpu"
	"github.com/stretchr/testify/require"
)

// gin-semantics-review M3: NCCL 2.28.9's waitSignalFollowShadow computes
// before and delta but never stores the shadow (gin__funcs.h@228
// L368-389); the store appears in 2.29.2 (@230 L1066-1068).
func TestFollowShadowWritesShadowFrom230(t *testing.T) {
	for _, c := range []struct {
		v      Version
		shadow uint64
	}{{V2_28, 0}, {V2_30, 2}} {
		cl := newCluster(t, 2, 1, c.v)
		dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull})
		require.NoError(t, err)
		var before, delta, sh uint64
		cl.launch("k", 1, func(t *gpu.Group, rank int) {
			g := dc.Gin(t, rank, 0)
			if rank == 1 {
				g.Signal(dc.World(1), 0, SignalInc{Signal: 0})
				g.Signal(dc.World(1), 0, SignalInc{Signal: 0})
				return
			}
			before, delta = g.WaitSignalFollowShadow(0, 2, 64)
			sh = g.SignalShadow(0)
		})
		require.NoError(t, cl.s.Run())
		require.Equal(t, []uint64{0, 2, c.shadow}, []uint64{before, delta, sh}, "%v: before, delta, shadow", c.v)
	}
}

// gin-semantics-review M9: 2.28 has no ncclGinAllContexts, no fence
// levels but Relaxed (gin_barrier.h@228 L17-33) and no ginQueueDepth; its
// barrier sets are shared with the hybrid barrier and sized as the
// maximum (dev_runtime.cc@228 L771-777).
func TestProfile228RefusesWhatItLacks(t *testing.T) {
	cl := newCluster(t, 2, 1, V2_28)
	_, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, GinQueueDepth: 64})
	require.ErrorContains(t, err, "ginQueueDepth")
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, BarrierCount: 2, RailGinBarrierCount: 1, LSABarrierCount: 1})
	require.NoError(t, err)
	_, _, rail := dc.RailGinBarrierSignals()
	_, _, world := dc.WorldGinBarrierSignals()
	require.Equal(t, []int{2, 0, 2}, []int{rail, world, dc.LSABarrierCount()}, "2.28 rail, world and LSA barriers: max(barrierCount, x), no world set")
	for _, c := range []struct {
		name string
		run  func(g *Gin)
	}{
		{"all contexts", func(g *Gin) { g.GinBarrier(BarrierRailGin, 0, true).Sync(OrderAcqRel, FenceNone) }},
		{"fence get", func(g *Gin) { g.GinBarrier(BarrierRailGin, 0, false).Sync(OrderAcqRel, FenceGet) }},
		{"fence put", func(g *Gin) { g.GinBarrier(BarrierRailGin, 0, false).Sync(OrderAcqRel, FencePut) }},
	} {
		cl := newCluster(t, 2, 1, V2_28)
		dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, RailGinBarrierCount: 1})
		require.NoError(t, err)
		cl.launch("k", 1, func(t *gpu.Group, rank int) { c.run(dc.Gin(t, rank, 0)) })
		err = cl.s.Run()
		require.Error(t, err, c.name)
		require.True(t, errors.Is(err, ErrUnsupported), "%s: %v", c.name, err)
	}
}

// gin-semantics-review M4: 2.30 gives the hybrid barrier its own rail and
// world GIN barrier sets (hybridRailGinBarrier, hybridWorldGinBarrier,
// dev_runtime.cc@230 L1194-1217): a user GIN barrier never shares signals
// with the hybrid barrier of the same index. 2.28 shares them.
func TestHybridBarrierSetsSeparateFrom230(t *testing.T) {
	for _, c := range []struct {
		v      Version
		shared bool
	}{{V2_28, true}, {V2_30, false}} {
		cl := newCluster(t, 2, 1, c.v)
		req := Requirements{GinSignalCount: 1, BarrierCount: 1, RailGinBarrierCount: 1, ConnectionType: ConnFull}
		dc, err := cl.comm.DevCommCreate(req)
		require.NoError(t, err)
		cl.launch("k", 1, func(t *gpu.Group, rank int) {
			g := dc.Gin(t, rank, 0)
			user, hybrid := g.GinBarrier(BarrierRailGin, 0, false), g.HybridGinBarrier(BarrierRailGin, 0)
			if rank == 0 {
				if (user.firstSignal() == hybrid.firstSignal()) != c.shared {
					panic(fmt.Sprintf("%v: user and hybrid rail barrier 0 sharing signals: %v", c.v, !c.shared))
				}
			}
		})
		require.NoError(t, cl.s.Run())
	}
}

// gin-semantics-review M5: 2.30 sets devComm.ginContextCount to the
// requested count and creates ROUNDUP(count, nConnections) contexts
// (gin_host.cc@230 L210-222): ContextCount reports the request, the
// backend gets the rounded count, and an AllContexts barrier signals the
// requested contexts only.
func TestContextCountIsRequested(t *testing.T) {
	for _, hint := range []int{1, 3} {
		cl := newCluster(t, 2, 1, V2_30)
		comm, err := NewComm(cl.ranks, CommConfig{Version: V2_30, NConnections: 2, Backends: map[Type]Backend{TypeProxy: cl.fb}})
		require.NoError(t, err)
		dc, err := comm.DevCommCreate(Requirements{GinContextCount: hint, WorldGinBarrierCount: 1, ConnectionType: ConnFull})
		require.NoError(t, err)
		require.Equal(t, hint, dc.ContextCount(), "ginContextCount")
		require.Equal(t, (hint+1)/2*2, dc.CreatedContexts(), "contexts created")
		cl.launch("b", 32, func(t *gpu.Group, rank int) {
			dc.Gin(t, rank, 0).GinBarrier(BarrierWorldGin, 0, true).Sync(OrderAcqRel, FenceNone)
		})
		require.NoError(t, cl.s.Run())
		require.Equal(t, uint64(2*hint), cl.fb.Stats().Ops, "hint %d: one signal per rank and requested context", hint)
	}
}
