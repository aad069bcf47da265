package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backends and tinyTrace are replaytest's.
var (
	backends  = replaytest.Backends
	tinyTrace = replaytest.TinyTrace
)

func TestReplayTiny(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct {
		name    string
		ep      int
		mode    string
		backend string
		nvlink  bool
	}{
		{"ll-ep8", 8, ModeLL, BackendGDAKI, false},
		{"ll-ep16", 16, ModeLL, BackendGDAKI, false},
		{"ll-ep16-proxy", 16, ModeLL, BackendProxy, false},
		{"ll-ep16-nvlink", 16, ModeLL, BackendGDAKI, true},
		{"ncclep-ep16", 16, ModeNCCLEP, BackendGDAKI, false},
		{"ncclep-ep8-proxy", 8, ModeNCCLEP, BackendProxy, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := tinyTrace(t, c.ep, 4)
			// The rows without nvlink are the pure-RDMA runs.
			rep, err := Run(tr, spec, Options{Mode: c.mode, Backend: c.backend, NVLink: c.nvlink,
				RDMAOnly: !c.nvlink, Seed: 1, TraceName: "tiny", Backends: backends})
			require.NoError(t, err)
			require.Len(t, rep.Layers, 1)
			l := rep.Layers[0]
			var sel int64
			for _, r := range tr.StepRoutes(0, tr.Layers()[0]) {
				for _, tk := range r.TopK {
					for _, e := range tk {
						if e >= 0 {
							sel++
						}
					}
				}
			}
			// One message per valid selection each way; E count signals
			// per rank in dispatch, one flag per (local expert, rank) pair
			// in combine.
			assert.Equal(t, sel, l.Dispatch.Messages)
			assert.Equal(t, sel, l.Combine.Messages)
			assert.Equal(t, int64(c.ep*tr.Slots()), l.Dispatch.Signals)
			assert.Equal(t, int64(c.ep*tr.Slots()), l.Combine.Signals)
			assert.Greater(t, l.Dispatch.US, 3.0)
			assert.Greater(t, l.Combine.US, 3.0)
			assert.Len(t, l.Dispatch.RecvDoneUS, c.ep)
			b := rep.Breakdown.Dispatch
			sum := partsSum(b)
			assert.InDelta(t, b.TotalUS, sum, 0.01, "breakdown parts add up")
			if c.nvlink {
				assert.Less(t, l.Dispatch.RDMABytes, sel*int64(traces.LLDispatchBytes(7168, traces.FP8)))
			}
		})
	}
}

// Every mode whose library chooses sends to the GPUs of its node over
// NVLink by default, as the library does (DeepEP V1 LL's Buffer
// allow_nvlink_for_low_latency_mode=True, V2's and NCCL EP's LSA stores,
// NCCL's P2P transport); RDMAOnly sends everything through the NICs, the
// published pure-RDMA runs. NVLink asks for the default. HT and V2 hybrid
// have no pure-RDMA path.
func TestEveryModeDefaultsToNVLink(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 8, 32)
	for _, c := range []struct{ mode, backend string }{
		{ModeLL, BackendGDAKI}, {ModeLL, BackendProxy}, {ModeV2Direct, BackendGDAKI}, {ModeV2, BackendGDAKI},
		{ModeNCCLEP, BackendGDAKI}, {ModeLL, BackendNCCL},
	} {
		name := c.mode + "/" + c.backend
		run := func(o Options) *Report {
			o.Mode, o.Backend, o.Seed, o.Layers, o.Backends = c.mode, c.backend, 1, 1, backends
			rep, err := Run(tr, spec, o)
			require.NoError(t, err, name)
			return rep
		}
		def := run(Options{})
		assert.True(t, def.NVLink, name)
		assert.False(t, def.RDMAOnly, name)
		assert.Zero(t, def.Layers[0].Dispatch.RDMABytes, "%s: EP8 in one node: nothing through the NIC", name)
		asked := run(Options{NVLink: true})
		assert.Equal(t, def.Layers, asked.Layers, "%s: NVLink is the default", name)
		rdma := run(Options{RDMAOnly: true})
		assert.False(t, rdma.NVLink, name)
		assert.True(t, rdma.RDMAOnly, name)
		assert.Positive(t, rdma.Layers[0].Dispatch.RDMABytes, name)
		assert.Less(t, def.DispatchUS, rdma.DispatchUS, name)
		_, err := Run(tr, spec, Options{Mode: c.mode, Backend: c.backend, RDMAOnly: true, NVLink: true})
		assert.ErrorContains(t, err, "contradict", name)
	}
	for _, mode := range []string{ModeHT, ModeV2Hybrid} {
		_, err := Run(tinyTrace(t, 16, 2), spec, Options{Mode: mode, Backend: BackendGDAKI, RDMAOnly: true, Backends: backends})
		assert.ErrorIs(t, err, ErrNoRDMAOnly, mode)
	}
	// v2 picks the hybrid kernels on two nodes.
	_, err := Run(tinyTrace(t, 16, 2), spec, Options{Mode: ModeV2, Backend: BackendGDAKI, RDMAOnly: true, Backends: backends})
	assert.ErrorIs(t, err, ErrNoRDMAOnly)
	assert.ErrorContains(t, err, "2 nodes")
}

// The header names the path that ran, says whether it is the library's
// default and which flag gives the other.
func TestHeaderSaysThePath(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 2)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Mode: ModeLL, Backend: BackendGDAKI}, "NVLink inside the node (the library's default: DeepEP's Buffer(allow_nvlink_for_low_latency_mode=True); --rdma-only for pure RDMA"},
		{Options{Mode: ModeLL, Backend: BackendGDAKI, RDMAOnly: true}, "RDMA only (--rdma-only, as the published pure-RDMA tables; the library's default is NVLink inside the node"},
		{Options{Mode: ModeV2Direct, Backend: BackendGDAKI}, "NVLink inside the node (the library's default: DeepEP V2's LSA stores"},
		{Options{Mode: ModeV2, Backend: BackendGDAKI}, "NVLink forwarding inside the node (DeepEP V2 hybrid's only path)"},
		{Options{Mode: ModeNCCLEP, Backend: BackendProxy, RDMAOnly: true}, "RDMA only (--rdma-only, as the published pure-RDMA tables; the library's default is NVLink inside the node: NCCL EP's LSA"},
		{Options{Mode: ModeLL, Backend: BackendNCCL}, "NVLink inside the node (the library's default: NCCL's P2P transport and PXN; --rdma-only"},
	} {
		c.o.Seed, c.o.Layers, c.o.Backends = 1, 1, backends
		rep, err := Run(tr, spec, c.o)
		require.NoError(t, err)
		var b strings.Builder
		require.NoError(t, rep.WriteTable(&b))
		head, _, _ := strings.Cut(b.String(), "\n\n")
		assert.Contains(t, head, c.want)
	}
}

// Same trace, same seed: byte-identical reports, for every GIN workload.
func TestReplayDeterministic(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, mode := range []string{ModeLL, ModeV2Direct, ModeV2Hybrid, ModeNCCLEP} {
		run := func() []byte {
			tr := tinyTrace(t, 16, 8)
			rep, err := Run(tr, spec, Options{Mode: mode, Backend: BackendGDAKI, Seed: 7, Backends: backends})
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, rep.WriteJSON(&b))
			return b.Bytes()
		}
		assert.Equal(t, string(run()), string(run()), mode)
	}
}

func TestReplayErrors(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 8, 2)
	_, err := Run(tr, spec, Options{Mode: "x", Backend: BackendGDAKI})
	assert.ErrorContains(t, err, `mode "x"`)
	bad := workload.DefaultParams()
	bad.HTSMs = 1
	_, err = Run(tr, spec, Options{Mode: ModeHT, Backend: BackendGDAKI, Params: &bad, Backends: backends})
	assert.ErrorContains(t, err, "HTSMs 1")
	bad = workload.DefaultParams()
	bad.HTDispatch.RDMARecv = 4
	_, err = Run(tr, spec, Options{Mode: ModeHT, Backend: BackendGDAKI, Params: &bad, Backends: backends})
	assert.ErrorContains(t, err, "a ring must hold at least one chunk")
	h200, _ := machine.Preset("h200-nvl")
	_, err = Run(tinyTrace(t, 16, 2), h200, Options{Mode: ModeLL, Backend: BackendGDAKI, Backends: backends})
	assert.ErrorContains(t, err, "needs 2")
}

// TestReplayCalibrationLL prints the unfitted model against the GIN paper's
// DeepEP LL row (160.8 us / 302.8 us); run with -v.
func TestReplayCalibrationLL(t *testing.T) {
	if testing.Short() {
		t.Skip("calibration run")
	}
	tr, err := traces.OpenExample("deepseek-v3-ll-ep8-288e.jsonl.gz")
	require.NoError(t, err)
	spec, _ := machine.Preset("h100-ib")
	// The paper's row is a pure-RDMA run.
	rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, RDMAOnly: true, Seed: 1, TraceName: "ep8-288e", Backends: backends})
	require.NoError(t, err)
	t.Logf("EP8 LL GDAKI: dispatch %.1f us (paper 160.8), combine %.1f us (paper 302.8)", rep.DispatchUS, rep.CombineUS)
}

// update rewrites the golden files in testdata (go test -run Golden -update).
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The LL family's report and timeline are pinned by their sha256 in
// testdata/golden-ll.txt: DeepEP V1 LL and NCCL EP over GDAKI and Proxy,
// RDMA only (rdma) and NVLink, and the NCCL baseline. Their process-free
// sender warps replaced process closures that gave the same hashes. The
// ll and nccl rows without nvlink were the default before NVLink became
// it; they set RDMAOnly, which adds "rdma_only": true to their reports
// and changes nothing else. The ncclep rows are NCCL EP's default (LSA).
// They pin the sequential kernel, the reference (TestWorkersDoNotChangeTheRun
// checks the World).
func TestLLGolden(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	var got strings.Builder
	for _, c := range []struct {
		name    string
		tr      *traces.Trace
		mode    string
		nvlink  bool
		rdma    bool
		backend string
	}{
		{"ll-gdaki-ep8", tinyTrace(t, 8, 160), ModeLL, false, true, BackendGDAKI},
		{"ll-gdaki-ep16-nvlink", tinyTrace(t, 16, 32), ModeLL, true, false, BackendGDAKI},
		{"ncclep-gdaki-ep16", tinyTrace(t, 16, 32), ModeNCCLEP, false, false, BackendGDAKI},
		{"ll-proxy-ep8", tinyTrace(t, 8, 160), ModeLL, false, true, BackendProxy},
		{"ll-proxy-ep16-nvlink", tinyTrace(t, 16, 32), ModeLL, true, false, BackendProxy},
		{"ncclep-proxy-ep16", tinyTrace(t, 16, 32), ModeNCCLEP, false, false, BackendProxy},
		{"ll-nccl-ep16", tinyTrace(t, 16, 32), ModeLL, false, true, BackendNCCL},
	} {
		var tl bytes.Buffer
		tw := timeline.NewWriter(&tl)
		rep, err := Run(c.tr, spec, Options{Mode: c.mode, NVLink: c.nvlink, RDMAOnly: c.rdma, Backend: c.backend, Seed: 1, Layers: 1,
			Backends: backends, Timeline: tw, Sequential: true})
		require.NoError(t, err, c.name)
		require.NoError(t, tw.Close(), c.name)
		js, err := json.Marshal(rep)
		require.NoError(t, err, c.name)
		fmt.Fprintf(&got, "%s report %x timeline %x\n", c.name, sha256.Sum256(js), sha256.Sum256(tl.Bytes()))
	}
	path := filepath.Join("testdata", "golden-ll.txt")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run Golden -update to write it")
	assert.Equal(t, string(want), got.String())
}

// Replaying steps at once (Options.Jobs) changes nothing but the wall
// time: the report, its events and the timeline are byte-identical to
// those of one step at a time, in every mode family; and the progress
// callback counts every step once.
func TestJobsDoNotChangeTheRun(t *testing.T) {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: 16, RanksPerNode: 8, TokensPerRank: 8, Layers: 3, Seed: 3})
	require.NoError(t, err)
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct{ mode, backend string }{{ModeLL, BackendGDAKI}, {ModeLL, BackendProxy}, {ModeV2, BackendGDAKI}, {ModeLL, BackendNCCL}} {
		run := func(jobs int) ([]byte, string) {
			var tl bytes.Buffer
			tw := timeline.NewWriter(&tl)
			var calls, totals []int // appended from the step goroutines, one call at a time
			rep, err := Run(tr, spec, Options{Mode: c.mode, Backend: c.backend, Seed: 1, Backends: backends, Jobs: jobs,
				Timeline: tw, Progress: func(done, total int) {
					calls, totals = append(calls, done), append(totals, total)
				}})
			require.NoError(t, err)
			require.NoError(t, tw.Close())
			require.Equal(t, []int{1, 2, 3}, calls)
			require.Equal(t, []int{3, 3, 3}, totals)
			js, err := json.Marshal(rep)
			require.NoError(t, err)
			return js, tl.String()
		}
		wantRep, wantTL := run(1)
		gotRep, gotTL := run(3)
		require.Equal(t, string(wantRep), string(gotRep), "%s %s", c.mode, c.backend)
		require.Equal(t, wantTL, gotTL, "%s %s", c.mode, c.backend)
		require.Contains(t, wantTL, "layer 5", "three layers drawn")
	}
}

// A failing step fails the replay with the earliest failing step's error
// whatever the number of jobs: layers 4 and 6 of five lack rank 0's
// route record.
func TestJobsReportTheEarliestFailure(t *testing.T) {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	full, err := traces.Generate(traces.GenConfig{Model: m, EP: 16, RanksPerNode: 8, TokensPerRank: 8, Layers: 5, Seed: 3})
	require.NoError(t, err)
	tr, err := traces.NewTrace(full.Header())
	require.NoError(t, err)
	for _, r := range full.Routes() {
		if r.Rank == 0 && (r.Layer == 4 || r.Layer == 6) {
			continue
		}
		require.NoError(t, tr.Add(r))
	}
	spec, _ := machine.Preset("h100-ib")
	for _, jobs := range []int{1, 2, 5} {
		_, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends, Jobs: jobs})
		require.Error(t, err)
		require.Contains(t, err.Error(), "iter 0 layer 4: ", "jobs %d", jobs)
		require.Contains(t, err.Error(), "no route record for rank 0", "jobs %d", jobs)
	}
}

// A seed sweep holds exactly the runs Run makes with each seed, its
// spread is theirs (mean, sample SD, extremes), and neither depends on
// the number of jobs.
func TestReplaySeeds(t *testing.T) {
	tr := tinyTrace(t, 16, 8)
	spec, _ := machine.Preset("h100-ib")
	opt := Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 7, Backends: backends}
	sw, err := RunSeeds(tr, spec, opt, 3)
	require.NoError(t, err)
	require.Len(t, sw.Runs, 3)
	var d []float64
	for i, r := range sw.Runs {
		o := opt
		o.Seed = 7 + uint64(i)
		want, err := Run(tr, spec, o)
		require.NoError(t, err)
		require.Equal(t, want, r, "seed %d", o.Seed)
		d = append(d, r.DispatchUS)
	}
	require.Equal(t, []uint64{7, 8, 9}, sw.Spread.Seeds)
	mean := (d[0] + d[1] + d[2]) / 3
	require.InDelta(t, mean, sw.Spread.DispatchUS.Mean, 0.001)
	sd := math.Sqrt(((d[0]-mean)*(d[0]-mean) + (d[1]-mean)*(d[1]-mean) + (d[2]-mean)*(d[2]-mean)) / 2)
	require.InDelta(t, sd, sw.Spread.DispatchUS.SD, 0.001)
	require.Equal(t, slices.Min(d), sw.Spread.DispatchUS.Min)
	require.Equal(t, slices.Max(d), sw.Spread.DispatchUS.Max)
	require.Greater(t, sw.Spread.DispatchUS.SD, 0.0, "seeds move ECMP hashes and poll phases")

	opt.Jobs = 3
	par, err := RunSeeds(tr, spec, opt, 3)
	require.NoError(t, err)
	require.Equal(t, sw, par)

	_, err = RunSeeds(tr, spec, opt, 0)
	require.Error(t, err)
	opt.Timeline = timeline.NewWriter(io.Discard)
	_, err = RunSeeds(tr, spec, opt, 2)
	require.ErrorContains(t, err, "one run")
}

// SMs sets each library's SM count; LL refuses it; the JSON names it.
func TestReplaySMs(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 32)
	for _, c := range []struct {
		mode string
		sms  int
	}{
		{ModeHT, 8},
		{ModeV2Direct, 6},
		{ModeV2Hybrid, 6},
		{ModeNCCLEP, 64},
	} {
		t.Run(c.mode, func(t *testing.T) {
			tr := tr
			if c.mode == ModeNCCLEP {
				tr = tinyTrace(t, 16, 128) // more tokens than SMs, so the count matters
			}
			def, err := Run(tr, spec, Options{Mode: c.mode, Backend: BackendGDAKI, Seed: 1, Backends: backends})
			require.NoError(t, err)
			assert.Zero(t, def.SMs)
			require.NotEqual(t, c.sms, def.kernelSMs, "the case must change the SM count")
			got, err := Run(tr, spec, Options{Mode: c.mode, Backend: BackendGDAKI, SMs: c.sms, Seed: 1, Backends: backends})
			require.NoError(t, err)
			assert.Equal(t, c.sms, got.SMs)
			if c.mode == ModeNCCLEP {
				// max_num_sms 64 for 256 experts: 4 warp groups on 64 SMs.
				assert.Equal(t, 64, got.kernelSMs)
			} else {
				assert.Equal(t, c.sms, got.kernelSMs)
			}
			var b bytes.Buffer
			require.NoError(t, got.WriteJSON(&b))
			assert.Contains(t, b.String(), `"sms": `)
			assert.NotEqual(t, def.DispatchUS, got.DispatchUS)
		})
	}
	for _, c := range []struct {
		mode string
		sms  int
		want string
	}{
		{ModeLL, 8, "no SM count"},
		{ModeHT, 7, "even"},
		{ModeNCCLEP, 10, "at least"},
		{ModeV2Direct, 1000, "out of"},
	} {
		_, err := Run(tr, spec, Options{Mode: c.mode, Backend: BackendGDAKI, SMs: c.sms, Seed: 1, Backends: backends})
		assert.ErrorContains(t, err, c.want, c.mode)
	}
}
