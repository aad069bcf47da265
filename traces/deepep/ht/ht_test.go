package ht_test

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/deepep/ht"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/ginsim/ginsim/traces/workload"
)

// htExpect is what the HT kernels must send, computed from the route
// records alone.
type htExpect struct {
	pairs, remote          int64 // unique (token, node) pairs; of which remote
	dispChunks, combChunks int64
}

// htChunkCount walks one ring: chunks of at most chunk records, never
// across the ring's wrap.
func htChunkCount(n, chunk, ring int) int64 {
	var k int64
	for pos := 0; pos < n; k++ {
		pos += min(chunk, n-pos, ring-pos%ring)
	}
	return k
}

func htExpected(tr *traces.Trace, channels int, disp, comb workload.HTChunks) htExpect {
	var x htExpect
	layer := tr.Layers()[0]
	home := tr.Placement(layer)
	for r, rt := range tr.StepRoutes(tr.Iterations()[0], layer) {
		me := r / 8
		sets := make([]uint64, rt.Tokens)
		for t, sel := range rt.TopK {
			for _, e := range sel {
				if e >= 0 {
					sets[t] |= 1 << uint(home[e]/8)
				}
			}
			x.pairs += int64(bits.OnesCount64(sets[t]))
			x.remote += int64(bits.OnesCount64(sets[t] &^ (1 << uint(me))))
		}
		per := (rt.Tokens + channels - 1) / channels
		for c := range channels {
			lo := min(c*per, rt.Tokens)
			hi := min(lo+per, rt.Tokens)
			for d := range tr.Nodes() {
				if d == me {
					continue
				}
				n := 0
				for t := lo; t < hi; t++ {
					if sets[t]&(1<<uint(d)) != 0 {
						n++
					}
				}
				x.dispChunks += htChunkCount(n, disp.RDMASend, disp.RDMARecv)
				x.combChunks += htChunkCount(n, comb.RDMASend, comb.RDMARecv)
			}
		}
	}
	return x
}

// observeHT runs f with an Options.Observe that captures the workload of
// the last HT step, and returns it.
func observeHT(t *testing.T, f func(obs func(replay.Workload))) *ht.Workload {
	var w *ht.Workload
	f(func(x replay.Workload) { w = x.(*ht.Workload) })
	require.NotNil(t, w)
	return w
}

func TestReplayHT(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct {
		name    string
		ep      int
		backend string
	}{
		{"ep16-gdaki", 16, replay.BackendGDAKI},
		{"ep16-proxy", 16, replay.BackendProxy},
		{"ep32-gdaki", 32, replay.BackendGDAKI},
		{"ep8-one-node", 8, replay.BackendGDAKI},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := replaytest.HTTrace(t, c.ep, 48)
			var rep *replay.Report
			w := observeHT(t, func(obs func(replay.Workload)) {
				var err error
				rep, err = replay.Run(tr, spec, replay.Options{Observe: obs, Mode: replay.ModeHT, Backend: c.backend, Seed: 1, Backends: replaytest.Backends})
				require.NoError(t, err)
			})
			dd, cd := ht.DefaultChunks(c.ep)
			x := htExpected(tr, workload.DefaultParams().HTSMs/2, dd, cd)
			l := rep.Layers[0]
			hidden := rep.Hidden
			recD := int64(traces.HTDispatchBytes(hidden, 8, traces.FP8))
			recC := int64(traces.HTCombineBytes(hidden, 8))
			// RDMA carries one record per remote (token, node) pair, in
			// chunk puts that each get a tail signal; credits add signals.
			assert.Equal(t, x.remote*recD, l.Dispatch.RDMABytes)
			assert.Equal(t, x.remote*recC, l.Combine.RDMABytes)
			assert.Equal(t, x.dispChunks, l.Dispatch.Messages)
			assert.Equal(t, x.combChunks, l.Combine.Messages)
			assert.Equal(t, x.dispChunks, w.Stats().DispTails)
			assert.Equal(t, x.combChunks, w.Stats().CombTails)
			assert.Equal(t, w.Stats().DispTails+w.Stats().DispCredits, l.Dispatch.Signals)
			assert.Equal(t, w.Stats().CombTails+w.Stats().CombCredits, l.Combine.Signals)
			assert.GreaterOrEqual(t, l.Dispatch.Signals, l.Dispatch.Messages)
			// Bandwidth numerators: every pair, the local node included.
			assert.Equal(t, traces.HTBandwidthBytes(x.pairs, hidden, traces.FP8), l.Dispatch.BandwidthBytes)
			assert.Equal(t, traces.HTBandwidthBytes(x.pairs, hidden, traces.BF16), l.Combine.BandwidthBytes)
			// Rail alignment, seen on the NICs' transmit side.
			assert.Zero(t, w.Stats().CrossRail, "packets between different local indices")
			if c.ep > 8 {
				assert.Positive(t, w.Stats().Packets)
				assert.Greater(t, l.Dispatch.US, 5.0)
			} else {
				assert.Zero(t, w.Stats().Packets, "one node: nothing through the NICs")
				assert.Zero(t, l.Dispatch.RDMABytes)
			}
			assert.Len(t, l.Dispatch.RecvDoneUS, c.ep)
			for _, b := range []workload.Breakdown{rep.Breakdown.Dispatch, rep.Breakdown.Combine} {
				sum := b.GPUIssueUS + b.ProxyUS + b.PCIeUS + b.NICUS + b.WireUS + b.RemoteWriteUS + b.SignalSeenUS + b.ReceiverUS
				assert.InDelta(t, b.TotalUS, sum, 0.01, "breakdown parts add up")
			}
		})
	}
}

func TestReplayHTDeterministic(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := replaytest.HTTrace(t, 16, 40)
	run := func() string {
		rep, err := replay.Run(tr, spec, replay.Options{Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 3, Backends: replaytest.Backends})
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, rep.WriteJSON(&b))
		return b.String()
	}
	assert.Equal(t, run(), run())
}

// TestReplayHTCreditStarved shrinks the RDMA receive windows to one chunk:
// every chunk then waits for the previous one's head credit, so the run is
// slower but still completes (no deadlock in the credit protocol).
func TestReplayHTCreditStarved(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := replaytest.HTTrace(t, 16, 384)
	run := func(p workload.Params) (*replay.Report, *ht.Workload) {
		var rep *replay.Report
		w := observeHT(t, func(obs func(replay.Workload)) {
			var err error
			rep, err = replay.Run(tr, spec, replay.Options{Observe: obs, Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 1, Params: &p, Backends: replaytest.Backends})
			require.NoError(t, err)
		})
		return rep, w
	}
	base, bw := run(workload.DefaultParams())
	p := workload.DefaultParams()
	p.HTDispatch.RDMARecv = 20 // = rdma_send for EP16
	p.HTCombine.RDMARecv = 12
	starved, sw := run(p)
	assert.Greater(t, starved.DispatchUS, base.DispatchUS)
	assert.GreaterOrEqual(t, starved.CombineUS, base.CombineUS)
	assert.Zero(t, bw.Stats().CreditWaits, "128-slot windows hold every channel's records")
	assert.Positive(t, sw.Stats().CreditWaits, "one-chunk windows wait for credits")
	assert.Equal(t, base.Layers[0].Dispatch.RDMABytes, starved.Layers[0].Dispatch.RDMABytes)
	t.Logf("window 128: dispatch %.1f us combine %.1f us; one chunk: %.1f us, %.1f us",
		base.DispatchUS, base.CombineUS, starved.DispatchUS, starved.CombineUS)
}

// TestReplayCalibrationHT prints the unfitted model against the GIN paper's
// DeepEP HT EP16 row (76.9 GB/s dispatch, 66.2 GB/s combine): DeepSeek-V3,
// 2 nodes x 8 H100, 4096 tokens per rank, 256 experts, grouped routing;
// run with -v.
func TestReplayCalibrationHT(t *testing.T) {
	if testing.Short() {
		t.Skip("calibration run")
	}
	spec, _ := machine.Preset("h100-ib")
	tr := replaytest.HTTrace(t, 16, 4096)
	start := time.Now()
	rep, err := replay.Run(tr, spec, replay.Options{Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 1, Backends: replaytest.Backends})
	require.NoError(t, err)
	t.Logf("EP16 HT GDAKI: dispatch %.1f us %.1f GB/s (paper 76.9), combine %.1f us %.1f GB/s (paper 66.2); %d events in %v",
		rep.DispatchUS, rep.DispatchGBps, rep.CombineUS, rep.CombineGBps, rep.Events, time.Since(start))
	t.Logf("dispatch critical path %+v", rep.Breakdown.Dispatch)
	t.Logf("combine critical path %+v", rep.Breakdown.Combine)
}

// TestReplayHTBothDirectionsAtOnce checks that on every rail both
// directions of a phase start together: each rank's first chunk put to
// the other node comes within 25% of the earliest rank's, and combine then
// runs at the line rate of the busiest NIC direction. Combine NVLink
// senders that served the forwarders of one source node only after the
// other's (one ring per sender and forwarder instead of one sub-ring per
// source node) start one direction of every rail hundreds of records late.
func TestReplayHTBothDirectionsAtOnce(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := replaytest.HTTrace(t, 16, 512)
	var rep *replay.Report
	w := observeHT(t, func(obs func(replay.Workload)) {
		var err error
		rep, err = replay.Run(tr, spec, replay.Options{Observe: obs, Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 1, Backends: replaytest.Backends})
		require.NoError(t, err)
	})
	for i, ph := range []*workload.Phase{&w.Env().Disp, &w.Env().Comb} {
		lo, hi := sim.Duration(math.MaxInt64), sim.Duration(0)
		for r, at := range w.Stats().FirstPut[i] {
			require.NotZero(t, at, "%s: rank %d put nothing to the other node", ph.Name, r)
			d := at.Sub(ph.Start)
			lo, hi = min(lo, d), max(hi, d)
		}
		t.Logf("%s: first chunk put %.1f..%.1f us after the start", ph.Name, lo.Us(), hi.Us())
		assert.LessOrEqual(t, hi, lo+lo/4, "%s: the first chunk puts of the ranks are spread over %.1f..%.1f us",
			ph.Name, lo.Us(), hi.Us())
	}
	// Payload bytes each rank's NIC sends and receives in combine: one
	// record per (token, node) pair between the nodes.
	var busiest sim.Bytes
	for r := range tr.EP() {
		me, l := r/w.G, r%w.G
		var tx, rx sim.Bytes
		for c := range w.C {
			for s := range w.N {
				if s != me {
					tx += sim.Bytes(len(w.SeqOf(w.Rank(s, l), c, me))) * sim.Bytes(w.RecC())
					rx += sim.Bytes(len(w.SeqOf(r, c, s))) * sim.Bytes(w.RecC())
				}
			}
		}
		busiest = max(busiest, tx, rx)
	}
	wire := w.Env().M.Net.LinkRate(0).TxTime(busiest)
	var first sim.Time
	for _, at := range w.Stats().FirstPut[1] {
		first = max(first, at)
	}
	bound := first.Sub(w.Env().Comb.Start) + wire + wire/5
	t.Logf("combine %.1f us; busiest NIC direction %d B = %.1f us at line rate; bound %.1f us",
		rep.CombineUS, busiest, wire.Us(), bound.Us())
	assert.LessOrEqual(t, rep.CombineUS, bound.Us(), "combine runs at line rate once the first chunks go")
}

// TestReplayHTCombineSubRings shrinks the combine NVLink rings: with one
// slot per source node the senders and forwarders still finish (each
// source node's sub-ring drains on its own), and a ring whose share per
// source node holds less than one NVLSend chunk is refused.
func TestReplayHTCombineSubRings(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := replaytest.HTTrace(t, 16, 96)
	p := workload.DefaultParams()
	p.HTCombine = workload.HTChunks{NVLSend: 1, NVLRecv: 2}
	rep, err := replay.Run(tr, spec, replay.Options{Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 1, Params: &p, Backends: replaytest.Backends})
	require.NoError(t, err)
	base, err := replay.Run(tr, spec, replay.Options{Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 1, Backends: replaytest.Backends})
	require.NoError(t, err)
	assert.Greater(t, rep.CombineUS, base.CombineUS, "one slot per source node is slower")
	assert.Equal(t, base.Layers[0].Combine.RDMABytes, rep.Layers[0].Combine.RDMABytes)

	p.HTCombine = workload.HTChunks{NVLSend: 4, NVLRecv: 6} // 3 slots per source node
	_, err = replay.Run(tr, spec, replay.Options{Mode: replay.ModeHT, Backend: replay.BackendGDAKI, Seed: 1, Params: &p, Backends: replaytest.Backends})
	require.ErrorContains(t, err, "per source node")
}

var update = flag.Bool("update", false, "rewrite testdata/golden.txt with the actual digests")

// TestHTGolden pins every HT warp's behaviour: the sha256 of the report
// JSON, the Perfetto timeline and the kernels' counts of each case are
// those in testdata/golden.txt, over GDAKI and the proxy, on two and four
// nodes, and with rings small enough that every wait (credits, NVLink
// space, sub-ring heads) happens. The digests were first written while
// every warp still also existed as a process closure and the two forms
// gave the same runs; regenerate with -update only for an intended change,
// and say why in the commit. They pin the sequential kernel, the reference.
func TestHTGolden(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	small := workload.DefaultParams()
	small.HTDispatch = workload.HTChunks{NVLSend: 2, NVLRecv: 4, RDMASend: 4, RDMARecv: 8}
	small.HTCombine = workload.HTChunks{NVLSend: 1, NVLRecv: 2, RDMASend: 2, RDMARecv: 4}
	var got strings.Builder
	for _, c := range []struct {
		name    string
		ep, tok int
		backend string
		p       workload.Params
	}{
		{"ep16-gdaki", 16, 256, replay.BackendGDAKI, workload.DefaultParams()},
		{"ep16-proxy", 16, 256, replay.BackendProxy, workload.DefaultParams()},
		{"ep32-gdaki", 32, 128, replay.BackendGDAKI, workload.DefaultParams()},
		{"ep16-small-rings", 16, 128, replay.BackendGDAKI, small},
		{"ep16-small-rings-proxy", 16, 96, replay.BackendProxy, small},
	} {
		tr := replaytest.HTTrace(t, c.ep, c.tok)
		var tl bytes.Buffer
		tw := timeline.NewWriter(&tl)
		var rep *replay.Report
		w := observeHT(t, func(obs func(replay.Workload)) {
			var err error
			rep, err = replay.Run(tr, spec, replay.Options{Observe: obs, Mode: replay.ModeHT, Backend: c.backend, Seed: 1, Layers: 1,
				Params: &c.p, Backends: replaytest.Backends, Timeline: tw, Sequential: true})
			require.NoError(t, err, c.name)
		})
		require.NoError(t, tw.Close())
		var js bytes.Buffer
		require.NoError(t, rep.WriteJSON(&js))
		st := w.Stats()
		if c.name == "ep16-small-rings" {
			assert.Positive(t, st.CreditWaits, "small rings wait for credits")
		}
		fmt.Fprintf(&got, "%s report %x\n", c.name, sha256.Sum256(js.Bytes()))
		fmt.Fprintf(&got, "%s timeline %x\n", c.name, sha256.Sum256(tl.Bytes()))
		fmt.Fprintf(&got, "%s stats %x\n", c.name, sha256.Sum256(fmt.Appendf(nil, "%+v", st)))
	}
	const golden = "testdata/golden.txt"
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got.String(), "HT runs differ from %s (go test -run TestHTGolden -update rewrites it)", golden)
}
