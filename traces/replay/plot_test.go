package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/plotfit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The breakdown chart reads the breakdown generically from the report's
// JSON: any phase, any column ending in _us, in order, total_us apart;
// other fields are left out.
func TestBreakdownOf(t *testing.T) {
	js := `{"mode":"ll","breakdown":{"dispatch":{"a_us":1.5,"pcie_cap_us":2,"total_us":3.5,"bound":"nic","share":0.4},
		"combine":{"pcie_cap_us":4,"queue_us":0,"total_us":4}, "note":"x"}}`
	got, err := BreakdownOf([]byte(js))
	require.NoError(t, err)
	assert.Equal(t, []BreakdownPhase{
		{Phase: "dispatch", Columns: []BreakdownColumn{{"a_us", 1.5}, {"pcie_cap_us", 2}}, TotalUS: 3.5},
		{Phase: "combine", Columns: []BreakdownColumn{{"pcie_cap_us", 4}, {"queue_us", 0}}, TotalUS: 4},
	}, got)
	for _, bad := range []string{`{}`, `{"breakdown":{"dispatch":{"total_us":1}}}`, `[1]`} {
		_, err := BreakdownOf([]byte(bad))
		assert.Error(t, err, bad)
	}
	p, legend, marks, err := breakdownPlot(got, "t")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "pcie cap"}, legend, "a column zero in every phase is left out")
	assert.Len(t, marks, 4)
	assert.Empty(t, plotfit.Check(p, breakdownSize[0], breakdownSize[1], legend, marks))
}

// Every plot replay writes reads well: nothing clipped, no texts over one
// another (tick labels included), no legend over data; for the breakdown
// chart, the per-layer bars of a whole model and the CDF of one layer,
// including one whose ranks but one finish early (a CDF that climbs at
// once, where a top-left legend would sit).
func TestPlotsReadWell(t *testing.T) {
	rep := &Report{Model: "DeepSeek-V3", Mode: "ll", Backend: "gdaki", EP: 64, Cluster: "h100-ib"}
	for l := 3; l < 61; l++ {
		rep.Layers = append(rep.Layers, LayerReport{Layer: l})
		rep.DispatchUSPerLayer = append(rep.DispatchUSPerLayer, 150+float64(l%7)*10)
		rep.CombineUSPerLayer = append(rep.CombineUSPerLayer, 300+float64(l%5)*20)
	}
	p, legend, marks, err := rep.plot()
	require.NoError(t, err)
	assert.Empty(t, plotfit.Check(p, plotSize[0], plotSize[1], legend, marks), "per-layer bars")

	one := &Report{Model: "DeepSeek-V3", Mode: "ll", Backend: "gdaki", EP: 16, Cluster: "h100-ib"}
	var early, spread []float64
	for r := range 16 {
		early = append(early, 10)
		spread = append(spread, 50+float64(r)*7)
	}
	early[15] = 400
	one.Layers = []LayerReport{{}}
	one.Layers[0].Dispatch.RecvDoneUS, one.Layers[0].Combine.RecvDoneUS = early, spread
	p, legend, marks, err = one.plot()
	require.NoError(t, err)
	assert.Empty(t, plotfit.Check(p, plotSize[0], plotSize[1], legend, marks), "receive CDF")

	tiny := tinyReport(t)
	js, err := json.Marshal(tiny)
	require.NoError(t, err)
	phases, err := BreakdownOf(js)
	require.NoError(t, err)
	p, legend, marks, err = breakdownPlot(phases, strings.Repeat("a long title ", 5))
	require.NoError(t, err)
	assert.Empty(t, plotfit.Check(p, breakdownSize[0], breakdownSize[1], legend, marks), "breakdown")
	wt, err := tiny.PlotBreakdown("svg")
	require.NoError(t, err)
	var b bytes.Buffer
	_, err = wt.WriteTo(&b)
	require.NoError(t, err)
	assert.Contains(t, b.String(), ">nic<")
	_, err = tiny.PlotBreakdown("gif")
	assert.ErrorContains(t, err, `plot format "gif"`)
}

// tinyReport replays a small trace, RDMA only (its breakdown has a NIC).
func tinyReport(t *testing.T) *Report {
	t.Helper()
	spec, _ := machine.Preset("h100-ib")
	rep, err := Run(tinyTrace(t, 8, 4), spec, Options{Mode: ModeLL, Backend: BackendProxy, RDMAOnly: true, Seed: 1, Backends: backends})
	require.NoError(t, err)
	return rep
}
