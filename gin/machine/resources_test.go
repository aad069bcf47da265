package machine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// loadRun is a GIN bandwidth run on two nodes (one GPU each): every CTA of
// each sending rank streams puts of size bytes to the other rank. It
// returns the resources over the measured span (after one warm-up
// iteration), the span and the bandwidth each sender reached (GB/s).
type loadRun struct {
	res  []machine.Resource
	span sim.Duration
	gbps float64
	snap machine.Snapshot
	smp  *machine.Sampler
	end  sim.Time
}

func runLoad(t *testing.T, cluster, backend string, bidir bool, ctas, iters int, size uint64) loadRun {
	return runLoadSampled(t, cluster, backend, bidir, ctas, iters, size, 0, nil)
}

func runLoadSampled(t *testing.T, cluster, backend string, bidir bool, ctas, iters int, size uint64, every sim.Duration,
	tune func(*machine.Profile)) loadRun {
	t.Helper()
	e, err := bench.NewEnv(bench.EnvConfig{Profile: cluster, Backend: backend, Contexts: ctas,
		WindowBytes: uint64(ctas) * size, Seed: 1, Tune: tune})
	require.NoError(t, err)
	senders := []int{0}
	if bidir {
		senders = []int{0, 1}
	}
	var s0, s1 machine.Snapshot
	var smp *machine.Sampler
	var t0, t1 sim.Time
	started, ended := 0, 0
	for _, rank := range senders {
		gp := e.Ranks[rank].GPU
		for c := range ctas {
			gp.Launch(fmt.Sprintf("load%d/cta%d", rank, c), 1, func(tg *gpu.Group) {
				g := e.Dev.GinShared(tg, rank, c, gin.SharingGPU)
				team := e.Dev.World(rank)
				off := uint64(c) * size
				for i := range iters + 1 {
					if i == 1 {
						if started++; started == len(senders)*ctas {
							t0 = tg.Now()
							s0 = e.Machine.Snapshot(servers(e))
						}
					}
					g.Put(team, 1-rank, e.Win, off, e.Win, off, size, gin.SignalInc{Signal: 0, Weak: true}, nil)
				}
				g.Flush()
				if ended++; ended == len(senders)*ctas {
					t1 = tg.Now()
					s1 = e.Machine.Snapshot(servers(e))
					if smp != nil {
						smp.Stop()
					}
				}
			})
		}
	}
	if every > 0 {
		smp = e.Machine.Sample(every, servers(e))
	}
	require.NoError(t, e.Sim.Run())
	require.NotZero(t, t1, "load kernels did not finish")
	span := t1.Sub(t0)
	return loadRun{res: s1.Since(s0), span: span, snap: s1, smp: smp, end: t1,
		gbps: float64(size) * float64(iters*ctas) / span.Seconds() / 1e9}
}

func servers(e *bench.Env) []*proxy.Server {
	if e.Proxy == nil {
		return nil
	}
	return e.Proxy.Servers()
}

func writeCluster(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func find(rs []machine.Resource, kind machine.Kind, name, dir string) machine.Resource {
	for _, r := range rs {
		if r.Kind == kind && r.Name == name && r.Dir == dir {
			return r
		}
	}
	return machine.Resource{}
}

const (
	oneBy400 = "base: h100-ib\nname: h100-1x400\n"
	twoBy400 = "base: h100-ib\nname: h100-2x400\nnics_per_gpu: 2\nlink_rate: 400Gb/s\n"
)

// TestBindingNICvsPCIe loads two nodes, one GPU each, with 1 MiB puts
// from 8 CTAs. With one 400G NIC per GPU the NIC port binds; with two, the
// GPU's PCIe Gen5 x16 link binds (both NICs read the payload through it),
// so doubling the NIC bandwidth gains far less than 2x.
func TestBindingNICvsPCIe(t *testing.T) {
	one := runLoad(t, writeCluster(t, oneBy400), "gdaki", false, 8, 8, 1<<20)
	two := runLoad(t, writeCluster(t, twoBy400), "gdaki", false, 8, 8, 1<<20)
	bi := runLoad(t, writeCluster(t, twoBy400), "gdaki", true, 8, 8, 1<<20)
	for _, r := range []struct {
		name string
		r    loadRun
	}{{"1x400", one}, {"2x400", two}, {"2x400 bidirectional", bi}} {
		var b bytes.Buffer
		require.NoError(t, machine.WriteTable(&b, r.r.res, 0.05))
		t.Logf("%s: %.2f GB/s per sender over %v; bound by %v\n%s", r.name, r.r.gbps, r.r.span, machine.Bind(r.r.res), b.String())
	}

	b1 := machine.Bind(one.res)
	assert.Equal(t, machine.KindNIC, b1.Top.Kind, "1x400: %v", b1)
	assert.Equal(t, "tx", b1.Top.Dir)
	assert.Greater(t, b1.Top.Util, 0.95)

	b2 := machine.Bind(two.res)
	assert.Equal(t, machine.KindGPUPCIe, b2.Top.Kind, "2x400: %v", b2)
	assert.Equal(t, "n0/gpu0", b2.Top.Name)
	assert.Equal(t, "up", b2.Top.Dir, "the NICs' reads of GPU memory leave the GPU")
	assert.Greater(t, b2.Top.Util, 0.95)
	assert.Less(t, b2.Other.Util, 0.75, "the NIC ports are far from busy")
	assert.Equal(t, machine.KindNIC, b2.Other.Kind)
	// The GPU link queues the reads: the sender's PCIe link shows the wait.
	gl := find(two.res, machine.KindGPUPCIe, "n0/gpu0", "up")
	assert.Greater(t, gl.WaitMean, find(one.res, machine.KindGPUPCIe, "n0/gpu0", "up").WaitMean*10)
	gain := two.gbps / one.gbps
	assert.Less(t, gain, 1.3, "twice the NIC bandwidth, capped by PCIe")
	assert.Greater(t, gain, 1.0)

	bb := machine.Bind(bi.res)
	assert.Equal(t, machine.KindGPUPCIe, bb.Top.Kind, "2x400 bidirectional: %v", bb)

	// The cause: with the GPU's link twice as fast (a Gen6 x16 link), the
	// same two NICs bind again and the bandwidth nearly doubles.
	gen6 := runLoadSampled(t, writeCluster(t, twoBy400), "gdaki", false, 8, 8, 1<<20, 0, func(p *machine.Profile) {
		p.PCIe.LinkRate *= 2
	})
	b6 := machine.Bind(gen6.res)
	t.Logf("2x400, PCIe link rate doubled: %.2f GB/s per sender; bound by %v", gen6.gbps, b6)
	assert.Equal(t, machine.KindNIC, b6.Top.Kind, "2x400 with a faster GPU link: %v", b6)
	assert.Greater(t, gen6.gbps/one.gbps, 1.8)

	// The two NICs share the load evenly.
	n0 := find(two.res, machine.KindNIC, "n0g0/nic0", "tx")
	n1 := find(two.res, machine.KindNIC, "n0g0/nic1", "tx")
	assert.InDelta(t, n0.Util, n1.Util, 0.05)
}

// TestSnapshotShape checks the snapshot's contents, order, JSON names and
// determinism, and that Since subtracts.
func TestSnapshotShape(t *testing.T) {
	a := runLoad(t, writeCluster(t, twoBy400), "proxy", false, 2, 2, 64<<10)
	b := runLoad(t, writeCluster(t, twoBy400), "proxy", false, 2, 2, 64<<10)
	ja, err := json.Marshal(a.snap)
	require.NoError(t, err)
	jb, err := json.Marshal(b.snap)
	require.NoError(t, err)
	assert.Equal(t, string(ja), string(jb), "same seed, same snapshot")

	count := map[machine.Kind]int{}
	for _, r := range a.snap.Resources {
		count[r.Kind]++
	}
	// bench's machine: 2 nodes x 2 GPUs x 2 NICs, one leaf switch per node
	// under a spine.
	assert.Equal(t, 2*2*2*2, count[machine.KindNIC])
	assert.Equal(t, 2*2*2, count[machine.KindGPUPCIe])
	assert.Equal(t, 2*2*2*2, count[machine.KindNICPCIe])
	assert.Equal(t, 2*2*2, count[machine.KindNVLink])
	assert.Equal(t, 2, count[machine.KindCPU], "one proxy thread per rank")
	assert.Positive(t, count[machine.KindSwitch])
	for i := 1; i < len(a.snap.Resources); i++ {
		p, r := a.snap.Resources[i-1], a.snap.Resources[i]
		assert.False(t, p.Kind == r.Kind && (p.Name > r.Name || p.Name == r.Name && p.Dir >= r.Dir), "order at %d: %v %v", i, p, r)
	}
	cpu := find(a.snap.Resources, machine.KindCPU, "n0g0/proxy", "")
	if cpu.Name == "" {
		for _, r := range a.snap.Resources {
			if r.Kind == machine.KindCPU {
				cpu = r
				break
			}
		}
	}
	assert.Positive(t, cpu.Busy)
	assert.Positive(t, cpu.Poll)

	var m []map[string]any
	j, err := json.Marshal(a.res)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(j, &m))
	assert.Contains(t, m[0], "util")
	assert.Contains(t, m[0], "busy_ps")
	assert.Contains(t, m[0], "kind")

	// Since: the span's bytes are the difference of the cumulative ones.
	tx := find(a.snap.Resources, machine.KindNIC, "n0g0/nic0", "tx")
	d := find(a.res, machine.KindNIC, "n0g0/nic0", "tx")
	assert.LessOrEqual(t, d.Bytes, tx.Bytes)
	assert.Positive(t, d.Bytes)
	for _, r := range a.snap.Since(a.snap) {
		assert.Zero(t, r.Bytes)
		assert.Zero(t, r.Util)
	}
	whole := a.snap.Since(machine.Snapshot{})
	assert.Equal(t, tx.Bytes, find(whole, machine.KindNIC, "n0g0/nic0", "tx").Bytes)
}

func TestBind(t *testing.T) {
	rs := []machine.Resource{
		{Name: "a", Kind: machine.KindNIC, Dir: "tx", Util: 0.5},
		{Name: "b", Kind: machine.KindNIC, Dir: "tx", Util: 0.9},
		{Name: "g", Kind: machine.KindGPUPCIe, Dir: "up", Util: 0.7},
	}
	b := machine.Bind(rs)
	assert.Equal(t, "b", b.Top.Name)
	assert.Equal(t, "g", b.Other.Name)
	assert.Equal(t, "nic b tx 90.0% (next: gpu-pcie g up 70.0%)", b.String())
	assert.Equal(t, "no resources", machine.Bind(nil).String())
	assert.Empty(t, machine.Bind(rs[:2]).Other.Name)
}

// A sampler draws the GPU link's utilisation over time without changing
// the run.
func TestSampler(t *testing.T) {
	c := writeCluster(t, twoBy400)
	plain := runLoad(t, c, "gdaki", false, 8, 4, 1<<20)
	sampled := runLoadSampled(t, c, "gdaki", false, 8, 4, 1<<20, 50*sim.Microsecond, nil)
	assert.Equal(t, plain.end, sampled.end, "sampling must not perturb the run")
	assert.Equal(t, plain.res, sampled.res)
	snaps := sampled.smp.Snapshots()
	require.Greater(t, len(snaps), 10)
	for i := 1; i < len(snaps)-1; i++ {
		assert.Equal(t, snaps[i-1].At.Add(50*sim.Microsecond), snaps[i].At)
	}
	assert.Equal(t, sampled.end, snaps[len(snaps)-1].At, "Stop takes the last sample")
	var gl machine.Series
	for _, s := range sampled.smp.Series() {
		if s.Kind == machine.KindGPUPCIe && s.Name == "n0/gpu0" && s.Dir == "up" {
			gl = s
		}
	}
	require.Len(t, gl.Util, len(snaps))
	require.Len(t, gl.At, len(snaps))
	// Mid-run the link is saturated; the intervals add up to the whole.
	assert.Greater(t, gl.Util[len(gl.Util)/2], 0.95)
	var busy float64
	for i := 0; i+1 < len(gl.At); i++ {
		busy += gl.Util[i] * float64(gl.At[i+1].Sub(gl.At[i]))
	}
	whole := find(snaps[len(snaps)-1].Since(snaps[0]), machine.KindGPUPCIe, "n0/gpu0", "up")
	assert.InEpsilon(t, float64(whole.Busy), busy, 1e-9)
}
