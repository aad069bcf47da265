package check_test

import (
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gpu"
)

// TestRacesInPrograms runs user programs on both backends that read a
// payload with and without what the spec requires before the read, and
// checks that exactly the racy ones are flagged, naming the put.
func TestRacesInPrograms(t *testing.T) {
	const n = 8192
	cases := []struct {
		name string
		// send issues rank 0's ops; recv is rank 1's code before its
		// read of [0, n) of the window.
		send func(e *bench.Env, g, g1 *gin.Gin)
		recv func(e *bench.Env, g *gin.Gin)
		race bool
	}{
		{"read after the strong signal", func(e *bench.Env, g, _ *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, n, gin.SignalInc{Signal: 0}, nil)
		}, func(e *bench.Env, g *gin.Gin) { g.WaitSignal(0, 1, 64) }, false},
		{"read before waiting", func(e *bench.Env, g, _ *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, n, gin.SignalInc{Signal: 0}, nil)
		}, func(e *bench.Env, g *gin.Gin) { g.Sleep(40_000_000) }, true},
		{"a later strong signal covers an earlier put", func(e *bench.Env, g, _ *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, n, nil, nil)
			g.Signal(e.Dev.World(0), 1, gin.SignalInc{Signal: 0})
		}, func(e *bench.Env, g *gin.Gin) { g.WaitSignal(0, 1, 64) }, false},
		{"a weak signal covers only its own put", func(e *bench.Env, g, _ *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, n, nil, nil)
			g.Put(e.Dev.World(0), 1, e.Win, 1<<20, e.Win, 0, 8, gin.SignalInc{Signal: 0, Weak: true}, nil)
		}, func(e *bench.Env, g *gin.Gin) { g.WaitSignal(0, 1, 64) }, true},
		{"no order across contexts", func(e *bench.Env, g, g1 *gin.Gin) {
			g1.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, n, nil, nil)
			g.Signal(e.Dev.World(0), 1, gin.SignalInc{Signal: 0})
		}, func(e *bench.Env, g *gin.Gin) { g.WaitSignal(0, 1, 64) }, true},
	}
	for _, backend := range []string{"gdaki", "proxy"} {
		for _, tc := range cases {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, backend, 1)
				c := check.New()
				e.Observe(c)
				e.Ranks[0].GPU.Launch("s", 1, func(tg *gpu.Group) {
					tc.send(e, e.Dev.Gin(tg, 0, 0), e.Dev.Gin(tg, 0, 1))
				})
				e.Ranks[1].GPU.Launch("r", 1, func(tg *gpu.Group) {
					g := e.Dev.Gin(tg, 1, 0)
					tc.recv(e, g)
					g.ReadWindow(e.Win, 0, make([]byte, n))
				})
				if err := e.Sim.Run(); err != nil {
					t.Fatal(err)
				}
				c.End(false)
				r := c.Report()
				races := c.Count(check.Race)
				if races != b2i(tc.race) || int64(r.Violations) != races {
					t.Fatalf("race %v wanted; got %+v", tc.race, r.Kept)
				}
				if tc.race {
					v := r.Kept[0]
					if v.Op != 1 || v.OpKind != "put" || v.Rank != 0 || v.Who != "n1g0/r" || v.Where != "buf/r1" {
						t.Errorf("the race names %s", v.String())
					}
				}
			})
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
