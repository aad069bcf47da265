package proxy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gpu"
)

// TestGoldenBarrier records a world GIN barrier (ncclGinBarrierSession on
// the world team of 2 ranks, 2.30, acq_rel, no fence) run by both ranks:
// each signals its slot at the peer and waits for the peer's.
func TestGoldenBarrier(t *testing.T) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, WorldGinBarriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := e.Record()
	for r := range e.Ranks {
		e.Ranks[r].GPU.Launch("bar", 1, func(tg *gpu.Group) {
			e.Dev.Gin(tg, r, 0).GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FenceNone)
		})
	}
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if err := e.Comm.CheckDeadlock(); err != nil {
		t.Fatal(err)
	}
	got := l.String()
	path := filepath.Join("testdata", "barrier.txt")
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite)", err)
	}
	if got != string(want) {
		t.Errorf("barrier timeline differs from %s (rerun with -rewrite and review the diff):\n%s", path, got)
	}
}
