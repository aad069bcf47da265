package machine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPresetsValid(t *testing.T) {
	require.Equal(t, []string{"h100-ib", "h200-nvl", "h800-cx7"}, PresetNames())
	for _, p := range Presets() {
		require.NoError(t, p.Validate(), p.Name)
		// The YAML form round-trips to the same spec.
		b, err := MarshalSpec(p)
		require.NoError(t, err)
		q, err := ParseSpec(b, p.Name+".yaml")
		require.NoError(t, err, string(b))
		assert.Equal(t, p, q)
	}
}

func TestNodesFor(t *testing.T) {
	s, _ := Preset("h100-ib")
	for _, c := range []struct{ ep, nodes int }{{1, 1}, {8, 1}, {9, 2}, {16, 2}, {256, 32}} {
		n, err := s.NodesFor(c.ep)
		require.NoError(t, err)
		assert.Equal(t, c.nodes, n, "EP %d", c.ep)
	}
	h200, _ := Preset("h200-nvl")
	_, err := h200.NodesFor(16)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "nodes", fe.Field)
}

func TestParseUnits(t *testing.T) {
	for _, c := range []struct {
		in   string
		want sim.BitRate
	}{{"400Gb/s", 400 * sim.Gbps}, {"400Gbps", 400 * sim.Gbps}, {"50GB/s", sim.GBps(50)}, {"1.5Tb/s", 1500 * sim.Gbps}} {
		r, err := ParseRate(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, Rate(c.want), r, c.in)
	}
	for _, c := range []struct {
		in   string
		want sim.Duration
	}{{"150ns", 150 * sim.Nanosecond}, {"1.5us", 1500 * sim.Nanosecond}, {"2µs", 2 * sim.Microsecond}, {"7", 7 * sim.Nanosecond}, {"3ps", 3}} {
		d, err := ParseDuration(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, Duration(c.want), d, c.in)
	}
	for _, bad := range []string{"", "fast", "-1ns", "0.5ps", "Gb/s"} {
		_, err1 := ParseDuration(bad)
		_, err2 := ParseRate(bad)
		assert.True(t, err1 != nil || err2 != nil, bad)
	}
}

func TestParseSpecBase(t *testing.T) {
	s, err := ParseSpec([]byte("base: h100-ib\nname: mine\nnodes: 4\ntopology:\n  spines: 2\n"), "c.yaml")
	require.NoError(t, err)
	assert.Equal(t, "mine", s.Name)
	assert.Equal(t, 4, s.Nodes)
	assert.Equal(t, 2, s.Topology.Spines)
	assert.Equal(t, TopoRailOptimized, s.Topology.Kind) // kept from the base
	assert.Equal(t, Rate(400*sim.Gbps), s.LinkRate)
}

func TestParseSpecErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"unknown field", "base: h100-ib\nname: x\ngpus_per_nod: 4\n",
			`c.yaml:3:1: field "gpus_per_nod": unknown field (have name, description, profile, nodes, gpus_per_node, nics_per_gpu, link_rate, nvlink, topology, faults, gpus_per_pcie_switch, pcie_switch_ports, gpu, nic, pcie, proxy, gdaki, base)`},
		{"bad type", "base: h100-ib\nnodes: many\n", `c.yaml:2:8: field "nodes": cannot unmarshal !!str ` + "`many`" + ` into int`},
		{"bad rate", "base: h100-ib\nlink_rate: 400 furlongs\n", `c.yaml:2:12: field "link_rate": rate "400 furlongs": want a number with a unit such as 400Gb/s or 50GB/s`},
		{"nested bad duration", "base: h100-ib\ntopology:\n  switch_latency: soon\n",
			`c.yaml:3:19: field "topology.switch_latency": duration "soon": want a number with a unit such as 150ns or 1.5us`},
		{"validation with line", "base: h100-ib\ntopology:\n  kind: torus\n",
			`c.yaml:3:9: field "topology.kind": unknown kind "torus" (have [single-switch rail-optimized leaf-spine fat-tree])`},
		{"validation missing", "name: x\nprofile: h100\n", `c.yaml: field "gpus_per_node": 0 out of range [1, 72] (field missing)`},
		{"unknown base", "base: dgx9\n", `c.yaml:1:7: field "base": unknown preset "dgx9" (have [h100-ib h200-nvl h800-cx7])`},
		{"unknown profile", "base: h100-ib\nprofile: tpu\n", `c.yaml:2:10: field "profile": unknown profile "tpu" (have [h100 h800 h200])`},
		{"syntax", "name: [x\n", `c.yaml:1: did not find expected ',' or ']'`},
		{"not a mapping", "- a\n- b\n", `c.yaml:1:1: want a mapping of cluster fields`},
		{"duplicate", "base: h100-ib\nnodes: 2\nnodes: 3\n", `c.yaml:3:1: field "nodes": duplicate key`},
		{"empty", "", `c.yaml: empty file`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(c.yaml), "c.yaml")
			require.Error(t, err)
			assert.Equal(t, c.want, err.Error())
			assert.True(t, errors.Is(err, ErrInvalid))
		})
	}
}

func TestLoadSpecFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(p, []byte("base: h800-cx7\nnics_per_gpu: 0\n"), 0o644))
	_, err := LoadSpec(p)
	require.Error(t, err)
	assert.Equal(t, p+`:2:15: field "nics_per_gpu": 0 out of range [1, 8]`, err.Error())
	_, err = Resolve(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	s, err := Resolve("h800-cx7")
	require.NoError(t, err)
	assert.Equal(t, Rate(sim.GBps(168)), s.NVLink.Bandwidth)
}
