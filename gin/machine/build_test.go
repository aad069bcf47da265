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

// TestBuildFromYAML builds a file that sets the fabric's shape and device
// constants and checks they reach the models.
func TestBuildFromYAML(t *testing.T) {
	for _, c := range []struct {
		name, yaml        string
		nodes             int
		switches, uplinks int
	}{
		// 4 nodes x 8 NICs = 32 ports on a k=6 fat tree (54 host ports): 45 switches.
		{"fat tree", "base: h100-ib\ntopology:\n  kind: fat-tree\nnic:\n  tx_latency: 200ns\ngpu:\n  sms: 100\n", 4, 45, 0},
		// Rail leaves of 4 hosts at 2:1 keep 2 uplinks, spread over 2 spines.
		{"oversubscribed", "base: h100-ib\ntopology:\n  spines: 2\n  oversubscription: 2\n", 4, 10, 8 * 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := ParseSpec([]byte(c.yaml), "c.yaml")
			require.NoError(t, err)
			m, err := Build(sim.New(sim.Config{Seed: 1}), spec, c.nodes)
			require.NoError(t, err)
			assert.Equal(t, c.switches, m.Net.Switches())
			if c.uplinks > 0 {
				assert.Equal(t, c.nodes*8+c.uplinks, m.Net.Links())
			}
			if spec.GPU != nil {
				assert.Equal(t, 100, m.Profile.GPU.SMs)
				assert.Equal(t, 200*sim.Nanosecond, m.NICs[0].Config().TxLatency)
			}
		})
	}
}
