package sweep

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tinyStudy = `name: tiny
base:
  model: deepseek-v3
  tokens: 4
  cluster: h100-ib
list:
  - {nics_per_gpu: 1}
  - {nics_per_gpu: 2, link_rate: 200Gb/s}
grid:
  backend: [gdaki, proxy]
  ep: [8, 16]
`

func TestParseExpands(t *testing.T) {
	st, err := Parse([]byte(tinyStudy), "tiny.yaml")
	require.NoError(t, err)
	assert.Equal(t, "tiny", st.Name)
	assert.Equal(t, []string{"nics_per_gpu", "link_rate", "backend", "ep"}, st.Axes)
	require.Len(t, st.Points, 8)
	// List entries outermost, then the grid with its last key fastest.
	var got [][3]any
	ids := map[string]bool{}
	for i, p := range st.Points {
		assert.Equal(t, i, p.Index)
		got = append(got, [3]any{p.Cluster.NICsPerGPU, p.Settings.Backend, p.Settings.EP})
		ids[p.ID] = true
	}
	assert.Equal(t, [][3]any{{1, "gdaki", 8}, {1, "gdaki", 16}, {1, "proxy", 8}, {1, "proxy", 16},
		{2, "gdaki", 8}, {2, "gdaki", 16}, {2, "proxy", 8}, {2, "proxy", 16}}, got)
	assert.Len(t, ids, 8, "point ids are distinct")
	assert.Equal(t, "200Gb/s", st.Points[4].Cluster.LinkRate.String())
	assert.Equal(t, map[string]string{"nics_per_gpu": "2", "link_rate": "200Gb/s", "backend": "gdaki", "ep": "8"},
		st.Points[4].Values)
	assert.Equal(t, 4, st.Points[0].Settings.Tokens)
	// Ids depend on the configuration only: the same study parses to the
	// same ids; a changed base changes them.
	again, err := Parse([]byte(tinyStudy), "elsewhere.yaml")
	require.NoError(t, err)
	assert.Equal(t, st.Points[3].ID, again.Points[3].ID)
	other, err := Parse([]byte(tinyStudy+"  seed: [2]\n"), "tiny.yaml")
	require.NoError(t, err)
	assert.NotEqual(t, st.Points[3].ID, other.Points[3].ID)
}

// sms and rdma_only are replay settings; a point that sets neither (or
// sets them to their defaults) keeps the ID it had before they existed.
func TestParseSMsAndRDMAOnly(t *testing.T) {
	st, err := Parse([]byte("base: {mode: ncclep, ep: 8}\ngrid:\n  rdma_only: [false, true]\n  sms: [0, 16]\n"), "s.yaml")
	require.NoError(t, err)
	require.Len(t, st.Points, 4)
	assert.Equal(t, []string{"rdma_only", "sms"}, st.Axes)
	p := st.Points[3].Settings
	assert.True(t, p.RDMAOnly)
	assert.Equal(t, 16, p.SMs)
	plain, err := Parse([]byte("base: {mode: ncclep, ep: 8}\n"), "s.yaml")
	require.NoError(t, err)
	assert.Equal(t, plain.Points[0].ID, st.Points[0].ID, "defaults leave the id as it was")
	assert.NotEqual(t, st.Points[0].ID, st.Points[1].ID)
	assert.NotEqual(t, st.Points[0].ID, st.Points[2].ID)
}

// DeepEP V1 LL, V2 direct and the NCCL baseline run NVLink to the peers of
// the node by default. The path decides the id: a default point takes the
// id of the NVLink runs (nvlink: true), a pure-RDMA one the id of the runs
// from when RDMA was the default; NCCL EP, whose default was already
// NVLink, and V2 hybrid keep theirs.
func TestParseDefaultPathIDs(t *testing.T) {
	id := func(y string) string {
		st, err := Parse([]byte(y), "s.yaml")
		require.NoError(t, err, y)
		return st.Points[0].ID
	}
	for _, base := range []string{"mode: ll", "mode: ll, backend: nccl", "mode: v2-direct", "mode: v2, ep: 8"} {
		def := id("base: {" + base + "}\n")
		assert.Equal(t, id("base: {"+base+", nvlink: true}\n"), def, base)
		rdma := id("base: {" + base + ", rdma_only: true}\n")
		assert.NotEqual(t, def, rdma, base)
		st, err := Parse([]byte("base: {"+base+", rdma_only: true}\n"), "s.yaml")
		require.NoError(t, err)
		s := st.Points[0].Settings
		assert.True(t, s.RDMAOnly, base)
		assert.False(t, s.NVLink, base)
		s.RDMAOnly = false
		assert.Equal(t, pointID(s, st.Points[0].Cluster, false), rdma, "%s: rdma_only keeps the id of nvlink: false", base)
	}
	ncclep := id("base: {mode: ncclep}\n")
	assert.NotEqual(t, ncclep, id("base: {mode: ncclep, nvlink: true}\n"), "ncclep keeps its ids")
	assert.NotEqual(t, ncclep, id("base: {mode: ncclep, rdma_only: true}\n"))
}

func TestParseFaultAxes(t *testing.T) {
	st, err := Parse([]byte("grid:\n  loss: [0, 0.1%]\n  faults.straggler.rank: [3]\n  faults.straggler.factor: [2]\n"), "f.yaml")
	require.NoError(t, err)
	require.Len(t, st.Points, 2)
	f := st.Points[1].Cluster.Faults
	assert.InDelta(t, 0.001, float64(f.Loss.Host), 1e-12)
	assert.InDelta(t, 0.001, float64(f.Loss.Fabric), 1e-12)
	assert.Equal(t, 3, f.Straggler.Rank)
	assert.Zero(t, st.Points[0].Cluster.Faults.Loss.Host)
	assert.Equal(t, "f", st.Name)
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"grid:\n  backend: [gdaki, gpu]\n", `s.yaml:2:20: field "backend": "gpu": want one of [gdaki proxy nccl]`},
		{"grid:\n  ep: [8, x]\n", `s.yaml:2:11: field "ep": "x": want a whole number in [1, 4096]`},
		{"base:\n  nics_per_gpu: 9\n", `s.yaml:2:17: field "nics_per_gpu": cluster field "nics_per_gpu": 9 out of range [1, 8]`},
		{"grid:\n  topology.kind: [torus]\n", `s.yaml:2:19: field "topology.kind": cluster field "topology.kind": unknown kind "torus" (have [single-switch rail-optimized leaf-spine fat-tree])`},
		{"grid:\n  loss: [0, 2]\n", `s.yaml:2:13: field "loss": cluster field "faults.loss.host": probability 2 out of range [0, 1]`},
		{"grid:\n  faults.loss.core: [0.1]\n", `s.yaml:2:22: field "faults.loss.core": cluster field "faults.loss.core": unknown field (have host, fabric)`},
		{"base:\n  cluster: nosuch\n", `s.yaml:2:12: field "cluster": "nosuch" is neither a preset (h100-ib h200-nvl h800-cx7) nor a file`},
		{"base:\n  model: gpt-9\n", `s.yaml:2:10: field "model": traces: unknown model "gpt-9"`},
		{"gird:\n  ep: [8]\n", `s.yaml:1:1: field "gird": unknown field (have name, description, base, grid, list)`},
		{"grid:\n  ep: []\n", `s.yaml:2:7: field "grid.ep": no values`},
		{"list:\n  - {ep: 8}\ngrid:\n  ep: [16]\n", `s.yaml:4:8: field "grid.ep": set by both grid and list`},
		{"grid:\n  ep: [8, 8]\n", `s.yaml: points 0 and 1 are the same configuration`},
		{"base:\n  cluster: h200-nvl\n  ep: 16\n", `s.yaml: field "ep": EP 16 on cluster h200-nvl: machine: field "nodes": cluster "h200-nvl" has 1 nodes; EP 16 needs 2`},
		{"base: [1\n", `s.yaml:1: did not find expected ',' or ']'`},
		{"- 1\n", `s.yaml:1:1: want a mapping with name, base, grid and/or list`},
		{"", `s.yaml: empty file`},
		{"grid:\n  sms: [8, -2]\n", `s.yaml:2:12: field "sms": "-2": want a whole number in [0, 65536]`},
		{"grid:\n  rdma_only: [maybe]\n", `s.yaml:2:15: field "rdma_only": "maybe": want true or false`},
		{"grid:\n  nvlink: [false, true]\n", `s.yaml:2:12: field "nvlink": false: NVLink to the peers of the node is the library's default`},
		{"base: {mode: ht, rdma_only: true}\n", `s.yaml:1:29: field "rdma_only": --mode ht runs ht, which forwards over NVLink`},
		{"base: {mode: v2, rdma_only: true}\n", `s.yaml:1:29: field "rdma_only": --mode v2 runs v2-hybrid, which forwards over NVLink`},
		{"base: {rdma_only: true, nvlink: true}\n", `s.yaml:1:19: field "rdma_only": contradicts nvlink: true`},
	} {
		_, err := Parse([]byte(c.yaml), "s.yaml")
		require.Error(t, err, c.yaml)
		assert.True(t, strings.HasPrefix(err.Error(), c.want), "got  %s\nwant %s", err, c.want)
		assert.True(t, errors.Is(err, ErrInvalid), c.yaml)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(tinyStudy))
	f.Add([]byte("grid:\n  loss: [0, 0.1%]\n"))
	f.Add([]byte("list:\n  - {ep: 8, backend: proxy}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parse(b, "f.yaml", 64)
		if err != nil {
			return
		}
		ids := map[string]bool{}
		for i, p := range st.Points {
			if p.Index != i || ids[p.ID] {
				t.Fatalf("point %d: index %d, id %s repeated %v", i, p.Index, p.ID, ids[p.ID])
			}
			ids[p.ID] = true
		}
	})
}
