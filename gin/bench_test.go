package gin

import (
	"testing"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// 2.28 maps context indices modulo the context count.
func TestContextModulo228(t *testing.T) {
	cl := newCluster(t, 2, 1, V2_28)
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1})
	check(t, err == nil, "devcomm: %v", err)
	var ctx int
	cl.ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) { ctx = dc.Gin(tg, 0, 9).Context() })
	check(t, cl.s.Run() == nil, "run")
	check(t, ctx == 1, "context 9 of 4 maps to %d", ctx)
}

func check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// BenchmarkPutSignalWait measures the front end's cost per put+signal
// (validation, tracking, coop syncs, the fake backend's events) with a
// waiter on the other rank.
func BenchmarkPutSignalWait(b *testing.B) {
	t := &testing.T{}
	cl := newCluster(t, 2, 1, V2_30)
	cl.fb.lat = 100 * sim.Nanosecond
	dc, _ := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull})
	w, _ := cl.comm.WindowRegister("w", 1<<20, 0, false)
	n := b.N
	cl.launch("k", 32, func(t *gpu.Group, rank int) {
		g := dc.Gin(t, rank, 0)
		if rank == 0 {
			for i := 0; i < n; i++ {
				g.Put(dc.World(0), 1, w, 0, w, 0, 4096, SignalInc{Signal: 0}, nil)
			}
			return
		}
		for i := 1; i <= n; i++ {
			g.WaitSignal(0, uint64(i), 64)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	if err := cl.s.Run(); err != nil {
		b.Fatal(err)
	}
}
