package machine

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPresetsBuild(t *testing.T) {
	for _, p := range Presets() {
		nodes := 2
		if p.Nodes != 0 {
			nodes = p.Nodes
		}
		s := sim.New(sim.Config{Seed: 1})
		m, err := Build(s, p, nodes)
		require.NoError(t, err, p.Name)
		n := nodes * p.GPUsPerNode
		require.Len(t, m.Ranks, n, p.Name)
		require.Len(t, m.GPUs, n)
		require.Len(t, m.NICs, n*p.NICsPerGPU)
		require.Len(t, m.PCIe, nodes)
		require.Len(t, m.NVLink, nodes)
		for i, r := range m.Ranks {
			assert.Equal(t, i, r.World)
			assert.Equal(t, i/p.GPUsPerNode, r.Node)
			assert.Equal(t, i%p.GPUsPerNode, r.Local)
			assert.Len(t, r.NICs, p.NICsPerGPU)
			assert.Same(t, m.PCIe[r.Node], r.GPU.Bus())
			assert.Equal(t, sim.BitRate(p.NVLink.Bandwidth), r.GPU.NVLink().Config().PortRate)
		}
		// NIC endpoints are distinct.
		seen := map[int]bool{}
		for _, nc := range m.NICs {
			assert.False(t, seen[int(nc.Endpoint())])
			seen[int(nc.Endpoint())] = true
			assert.Equal(t, sim.BitRate(p.LinkRate), m.Net.LinkRate(nc.Endpoint()))
		}
	}
}

func TestBuildErrors(t *testing.T) {
	s := sim.New(sim.Config{})
	p, _ := Preset("h200-nvl")
	_, err := Build(s, p, 2)
	require.Error(t, err)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "nodes", fe.Field)
	_, err = Build(s, p, 0)
	require.Error(t, err)
}
