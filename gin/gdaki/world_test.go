package gdaki_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
)

// worldContexts connects a GDAKI communicator of two nodes of two GPUs
// with two NICs each on a World, requesting ctxs contexts, and returns
// which contexts of rank 0 have channel rings and the QP number the next
// QP on rank 0's first NIC gets.
func worldContexts(t *testing.T, version gin.Version, ctxs int) (built []bool, next uint32) {
	spec, err := machine.Resolve("h100-ib")
	require.NoError(t, err)
	spec.GPUsPerNode, spec.NICsPerGPU = 2, 2
	w := sim.NewWorld(sim.Config{Seed: 1}, 2, machine.Lookahead(spec, 2))
	m, err := machine.BuildWorld(w, spec, 2, nil)
	require.NoError(t, err)
	g, err := gdaki.New(gdaki.DefaultConfig())
	require.NoError(t, err)
	c, err := gin.NewComm(m.Ranks, gin.CommConfig{Version: version, Backends: map[gin.Type]gin.Backend{gin.TypeGDAKI: g}})
	require.NoError(t, err)
	dc, err := c.DevCommCreate(gin.Requirements{GinContextCount: ctxs, GinSignalCount: 2, ConnectionType: gin.ConnFull})
	require.NoError(t, err)
	built = make([]bool, dc.CreatedContexts())
	for _, r := range m.Mem.Regions() {
		for ctx := range built {
			if strings.HasPrefix(r.Name(), "gdaki/r0/c"+string(rune('0'+ctx))+"/p1/sq") {
				built[ctx] = true
			}
		}
	}
	g1, n1 := m.Ranks[0].GPU, m.Ranks[0].NICs[0]
	cq, err := n1.CreateCQ(16, g1.Alloc("other/cq", 16*64, false), g1.Dev())
	require.NoError(t, err)
	qp, err := n1.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: 16, SQRing: g1.Alloc("other/sq", 16*64, false), SQWhere: g1.Dev()})
	require.NoError(t, err)
	return built, qp.QPN()
}

// On a World every context is built at Connect, except those past the
// request (2.30 rounds one context up to one per connection, two here;
// 2.28 creates four for any request): they only set their QP numbers
// aside, so that a later QP gets the number it gets when all are built.
func TestWorldBuildsRequestedContexts(t *testing.T) {
	for v, n := range map[gin.Version]int{gin.V2_28: 4, gin.V2_30: 2} {
		one, next1 := worldContexts(t, v, 1)
		all, nextAll := worldContexts(t, v, n)
		want := make([]bool, n)
		want[0] = true
		require.Equal(t, want, one, "%v: request 1", v)
		for i := range want {
			want[i] = true
		}
		require.Equal(t, want, all, "%v: request %d", v, n)
		require.Equal(t, nextAll, next1, "%v: the QP number after the communicator's", v)
	}
}
