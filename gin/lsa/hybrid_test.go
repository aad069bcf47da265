package lsa

import (
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gintest"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/require"
)

// The hybrid barrier across 2 nodes × 2 GPUs: LSA + rail GIN (relaxed fence
// or 2.28) or the world GIN barrier (Put fence, 2.30). Nobody leaves
// before every member arrived.
func TestHybridAcrossNodes(t *testing.T) {
	for _, c := range []struct {
		v     gin.Version
		fence gin.FenceLevel
	}{{gin.V2_30, gin.FenceNone}, {gin.V2_30, gin.FencePut}, {gin.V2_28, gin.FenceNone}} {
		t.Run(fmt.Sprintf("%v/%d", c.v, c.fence), func(t *testing.T) {
			cl, err := gintest.NewCluster(2, 2, c.v)
			require.NoError(t, err)
			dc, err := cl.Comm.DevCommCreate(gin.Requirements{BarrierCount: 2, GinSignalCount: 1, ConnectionType: gin.ConnFull})
			require.NoError(t, err)
			arrive := make([]sim.Time, 4)
			leave := make([]sim.Time, 4)
			for r := range cl.Ranks {
				cl.Ranks[r].GPU.Launch("k", 32, func(tg *gpu.Group) {
					for round := 0; round < 3; round++ {
						tg.Sleep(sim.Duration(3-r) * sim.Microsecond)
						arrive[r] = tg.Now()
						NewSession(dc, tg, r, 0, 1).Sync(gin.OrderAcqRel, c.fence)
						leave[r] = tg.Now()
					}
				})
			}
			require.NoError(t, cl.Sim.Run())
			require.NoError(t, cl.Comm.CheckDeadlock())
			last := max(arrive[0], arrive[1], arrive[2], arrive[3])
			for r := range leave {
				require.Greater(t, leave[r], last, "rank %d left at %v before the last arrival %v", r, leave[r], last)
			}
			gins := cl.Backend.Stats().Ops
			require.Positive(t, gins, "the GIN part signalled")
		})
	}
}
