package gpumicro

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
)

func TestParseErrors(t *testing.T) {
	ok := `{"name":"l2_load","ns":148.7,"cycles":294.3,"reps":7,"note":"x"}`
	for _, c := range []struct {
		name, in string
		line     int
		field    string
	}{
		{"not json", ok + "\n{oops", 2, ""},
		{"no name", `{"ns":1,"reps":1}`, 1, "name"},
		{"name not a string", `{"name":3,"ns":1,"reps":1}`, 1, "name"},
		{"zero time", `{"name":"a","ns":0,"reps":1}`, 1, "ns"},
		{"negative time", "\n\n" + `{"name":"a","ns":-2,"reps":1}`, 3, "ns"},
		{"no reps", `{"name":"a","ns":2}`, 1, "reps"},
		{"duplicate", ok + "\n" + ok, 2, "name"},
		{"ns not a number", `{"name":"a","ns":"fast","reps":1}`, 1, ""},
		{"bad device line", `{"name":"device","sms":"many"}` + "\n" + ok, 1, ""},
		{"empty", "\n \n", 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.in), "m.jsonl")
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, "m.jsonl", pe.File)
			assert.Equal(t, c.line, pe.Line)
			assert.Equal(t, c.field, pe.Field)
			assert.Contains(t, err.Error(), "m.jsonl:")
		})
	}
}

func TestParseCommitted(t *testing.T) {
	run, names, err := Measured("h200-2026-12-01.jsonl")
	require.NoError(t, err)
	require.Contains(t, names, "h200-2026-12-01.jsonl")
	assert.Equal(t, "NVIDIA H200", run.Device.GPU)
	assert.Equal(t, 132, run.Device.SMs)
	assert.InDelta(t, 1.98, run.Device.SMClockGHz, 0.01)
	require.GreaterOrEqual(t, len(run.Measurements), 15)
	for _, m := range run.Measurements {
		// ns and cycles agree through the measured clock
		assert.InDelta(t, m.Cycles/run.Device.SMClockGHz, m.NS, 0.2, m.Name)
	}
	_, _, err = Measured("nope.jsonl")
	require.ErrorContains(t, err, "h200-2026-12-01.jsonl")
}

// The gpu.Config defaults were set from the committed H200 run: every
// measurement the model stands for directly stays within 10 %. Rows the
// model does not match (release stores, the release flag hand-off, the
// GPU-CPU round trip and the plain-load streaming rates, see README
// "Validation") are listed, not asserted.
func TestModelMatchesH200(t *testing.T) {
	hw, _, err := Measured("h200-2026-12-01.jsonl")
	require.NoError(t, err)
	spec, _ := machine.Preset("h100-ib")
	model, err := Model(spec)
	require.NoError(t, err)
	known := map[string]bool{"store_release_gpu": true, "sm_to_sm_flag": true, "gpu_cpu_roundtrip": true,
		// one word in the L2 partition near the SM; the model charges
		// the mix of both partitions (TestAtomicPartitionMix)
		"atomic_gpu": true, "atomic_block": true, "atomic_sys": true,
		// gpumicro.cu streams with plain 16-B loads and stores, one per
		// thread per iteration: latency-bound reads; the model's bulk
		// rates stand for pipelined (TMA or unrolled) copies.
		"sm_read_kib": true, "sm_copy_kib": true, "warp_read_kib": true, "warp_write_kib": true, "warp_copy_kib": true}
	checked := 0
	for _, r := range Compare(hw, model) {
		if r.Hardware == 0 || r.Model == 0 || known[r.Name] {
			continue
		}
		assert.LessOrEqual(t, math.Abs(r.ErrPct()), 10.0, "%s: hardware %.1f ns, model %.1f ns", r.Name, r.Hardware, r.Model)
		checked++
	}
	assert.GreaterOrEqual(t, checked, 10)
	again, err := Model(spec)
	require.NoError(t, err)
	assert.Equal(t, model, again, "the model's measurements are deterministic")
}

// h200Model is the model's measurements on the h200-nvl preset, made once
// for the tests that compare it with the committed pair runs.
var h200Model = sync.OnceValues(func() (map[string]sim.Duration, error) {
	spec, _ := machine.Preset("h200-nvl")
	return Model(spec)
})

// checkRows asserts that every row of the committed run file whose name
// has prefix, except those in skip, that both the run and the model have
// is within tolFor(name) percent, and returns how many it checked and the
// model's values.
func checkRows(t *testing.T, file, prefix string, skip map[string]bool, tolFor func(name string) float64) (int, map[string]sim.Duration) {
	t.Helper()
	hw, _, err := Measured(file)
	require.NoError(t, err)
	model, err := h200Model()
	require.NoError(t, err)
	checked := 0
	for _, r := range Compare(hw, model) {
		if !strings.HasPrefix(r.Name, prefix) || skip[r.Name] || r.Hardware == 0 || r.Model == 0 {
			continue // not measured in this run, or hardware only (copy engines, uncached loads, ...)
		}
		assert.LessOrEqual(t, math.Abs(r.ErrPct()), tolFor(r.Name), "%s: hardware %.1f ns, model %.1f ns", r.Name, r.Hardware, r.Model)
		checked++
	}
	return checked, model
}

func tol(pct float64) func(string) float64 { return func(string) float64 { return pct } }

// The NVLink defaults (nvlink.Config, gpu.Config.PeerStoreBytesPerCycle)
// were set from the committed run on two H200s joined by 18 NVLink 4
// links: the peer latencies, fences, flag hand-offs and bandwidths stay
// within 10 %, a warp's message and flag within 15 %. Listed, not
// asserted: one warp streaming stores (slower than its bursts on
// hardware, locally too) and one CTA's latency-bound loads.
func TestModelMatchesH200Pair(t *testing.T) {
	n, _ := checkRows(t, "h200x2-2026-12-01.jsonl", "peer_", map[string]bool{"peer_warp_write_kib": true, "peer_sm_read_kib": true},
		func(name string) float64 {
			if strings.HasPrefix(name, "peer_put_") {
				return 15
			}
			return 10
		})
	assert.GreaterOrEqual(t, n, 17)
}

// NCCL's own LSA barrier (ncclbar.cu, NCCL 2.28.3 on the second H200-pair
// run) against gin/lsa's: the barrier and the large message hand-off
// within 10 %. Listed, not asserted: the 7-KiB hand-off by one warp
// (model 14 % fast: NCCL's barrier costs 90-170 ns more than a bare flag
// hand-off on hardware, 13-17 ns in the model).
func TestModelMatchesNCCLBarrier(t *testing.T) {
	n, _ := checkRows(t, "h200x2-2026-12-01-b.jsonl", "nccl_", map[string]bool{"nccl_lsa_put_7k_barrier": true}, tol(10))
	assert.Equal(t, 4, n)
}

// How many SMs fill NVLink (third H200-pair run): 1, 2, 4, 8, 16 and 32
// CTAs writing into the peer measured 50, 101, 201, 347, 340 and 360 GB/s;
// the model, 25 B/cycle per SM up to the link's 360 GB/s of data, stays
// within 10 % of each.
func TestModelSMsFillNVLink(t *testing.T) {
	n, model := checkRows(t, "h200x2-2026-12-01-c.jsonl", "peer_sms", nil, tol(10))
	assert.Equal(t, 6, n)
	// Doubling the SMs halves the time until the link is full.
	assert.InDelta(t, 2, model["peer_sms1_write_mib"].Seconds()/model["peer_sms2_write_mib"].Seconds(), 0.01)
	assert.Equal(t, model["peer_sms16_write_mib"], model["peer_sms32_write_mib"])
}

// The GPU's PCIe Gen5 port with copy engines (fourth H200-pair run): 55.4
// GB/s each way alone, 50.5 GB/s each way at once; the model's tree within
// 10 % (it loses less to the read requests sharing the link).
func TestModelPCIePort(t *testing.T) {
	n, model := checkRows(t, "h200x2-2026-12-01-d.jsonl", "pcie_", nil, tol(10))
	assert.Equal(t, 3, n)
	assert.Greater(t, model["pcie_bidir_mib"], model["pcie_h2d_mib"], "read requests share the link with the writes")
}

// Device-scope atomics cost what their word's L2 partition makes them: 146
// ns near, 247 far (the second and third pair runs' single word), 199 for
// words spread over 8 MiB (fifth pair run), which is what the model
// charges every local atomic.
func TestAtomicPartitionMix(t *testing.T) {
	n, model := checkRows(t, "h200x2-2026-12-01-e.jsonl", "atomic_gpu_spread", nil, tol(2))
	assert.Equal(t, 1, n)
	near, _, err := Measured("h200x2-2026-12-01-e.jsonl")
	require.NoError(t, err)
	far, _, err := Measured("h200x2-2026-12-01-b.jsonl")
	require.NoError(t, err)
	ns := func(r *Run, name string) float64 {
		for _, m := range r.Measurements {
			if m.Name == name {
				return m.NS
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	lo, hi := ns(near, "atomic_gpu"), ns(far, "atomic_gpu")
	assert.Less(t, lo, 150.0)
	assert.Greater(t, hi, 240.0)
	assert.InDelta(t, (lo+hi)/2, model["atomic_gpu_spread"].Ns(), 0.05*(lo+hi)/2, "the spread is the mean of near and far")
}

// A node of one GPU has no NVLink peer: the model skips the peer cases.
func TestModelOneGPUNode(t *testing.T) {
	spec, _ := machine.Preset("h200-nvl")
	spec.GPUsPerNode = 1
	model, err := Model(spec)
	require.NoError(t, err)
	assert.Contains(t, model, "l2_load")
	for name := range model {
		assert.False(t, strings.HasPrefix(name, "peer_") || strings.HasPrefix(name, "nccl_"), name)
	}
}

// Compare keeps the hardware order and appends model-only cases.
func TestCompareOrder(t *testing.T) {
	in := `{"name":"wt_store_issue","ns":15,"reps":1}` + "\n" + `{"name":"custom","ns":7,"reps":1}`
	hw, err := Parse(strings.NewReader(in), "x")
	require.NoError(t, err)
	spec, _ := machine.Preset("h100-ib")
	model, err := Model(spec)
	require.NoError(t, err)
	rows := Compare(hw, model)
	require.Equal(t, "wt_store_issue", rows[0].Name)
	require.Equal(t, "custom", rows[1].Name)
	assert.Zero(t, rows[1].Model)
	assert.True(t, math.IsNaN(rows[1].ErrPct()))
	assert.Len(t, rows, 2+len(Cases())-1)
}

func FuzzParse(f *testing.F) {
	b, _ := measured.ReadFile("measured/h200-2026-12-01.jsonl")
	f.Add(b)
	f.Add([]byte(`{"name":"a","ns":1,"reps":1}`))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		run, err := Parse(bytes.NewReader(in), "fuzz")
		if err != nil {
			var pe *ParseError
			require.True(t, errors.As(err, &pe))
			return
		}
		for _, m := range run.Measurements {
			require.Positive(t, m.NS)
			require.GreaterOrEqual(t, m.Reps, 1)
		}
	})
}

// Spreads keeps the order of first appearance and takes the median (the
// mean of the middle two for an even count) and the range of each row.
func TestSpreads(t *testing.T) {
	parse := func(in string) *Run {
		r, err := Parse(strings.NewReader(in), "x")
		require.NoError(t, err)
		return r
	}
	a := parse(`{"name":"b","ns":4,"reps":1}` + "\n" + `{"name":"a","ns":10,"reps":1}`)
	b := parse(`{"name":"a","ns":30,"reps":1}` + "\n" + `{"name":"c","ns":7,"reps":1}`)
	c := parse(`{"name":"a","ns":20,"reps":1}` + "\n" + `{"name":"b","ns":6,"reps":1}`)
	got := Spreads([]*Run{a, b, c}, map[string]sim.Duration{"a": 22 * sim.Nanosecond})
	require.Len(t, got, 3)
	assert.Equal(t, []string{"b", "a", "c"}, []string{got[0].Name, got[1].Name, got[2].Name})
	assert.Equal(t, Spread{Name: "b", Runs: 2, Median: 5, Min: 4, Max: 6}, got[0])
	assert.Equal(t, 3, got[1].Runs)
	assert.Equal(t, 20.0, got[1].Median)
	assert.Equal(t, 10.0, got[1].Min)
	assert.Equal(t, 30.0, got[1].Max)
	assert.InDelta(t, 10.0, got[1].ErrPct(), 1e-9)
	assert.True(t, math.IsNaN(got[2].ErrPct()))
	names, runs, err := Committed()
	require.NoError(t, err)
	assert.Len(t, runs, len(names))
	assert.Contains(t, names, "h200x2-2026-12-01.jsonl")
}
