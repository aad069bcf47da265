package sweep

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/internal/plotfit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const plotCSV = `ep,backend,seed,dispatch_us,error
16,gdaki,1,52,
8,gdaki,1,47,
8,gdaki,2,49,
8,proxy,1,48,
16,proxy,1,61,
32,proxy,1,0,replay failed
`

func TestPlot(t *testing.T) {
	tb, err := ReadCSV(strings.NewReader(plotCSV), "p.csv")
	require.NoError(t, err)
	wt, err := Plot(tb, PlotOptions{X: "ep", Y: "dispatch_us", By: "backend", Format: "svg"})
	require.NoError(t, err)
	var b bytes.Buffer
	_, err = wt.WriteTo(&b)
	require.NoError(t, err)
	svg := b.String()
	// Numeric x in numeric order; the failed row's x is left out; one
	// legend entry per backend.
	assert.Contains(t, svg, ">backend gdaki<")
	assert.Contains(t, svg, ">backend proxy<")
	assert.Less(t, strings.Index(svg, ">8<"), strings.Index(svg, ">16<"))
	assert.NotContains(t, svg, ">32<")
	png, err := Plot(tb, PlotOptions{X: "backend", Y: "dispatch_us", LogY: true, Format: "png"})
	require.NoError(t, err)
	b.Reset()
	_, err = png.WriteTo(&b)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b.Bytes(), []byte("\x89PNG")))

	for _, c := range []struct {
		opt  PlotOptions
		want string
	}{
		{PlotOptions{X: "nope", Y: "dispatch_us", Format: "png"}, `x column "nope" not in the results`},
		{PlotOptions{X: "ep", Y: "backend", Format: "png"}, `backend "gdaki" is not a number`},
		{PlotOptions{X: "ep", Y: "dispatch_us", Format: "gif"}, `plot format "gif"`},
	} {
		_, err := Plot(tb, c.opt)
		assert.ErrorContains(t, err, c.want)
	}
}

func TestNumericSort(t *testing.T) {
	v := []string{"16", "8", "0.001", "0"}
	numericSort(v)
	assert.Equal(t, []string{"0", "0.001", "8", "16"}, v)
	w := []string{"proxy", "gdaki", "8"}
	numericSort(w)
	assert.Equal(t, []string{"proxy", "gdaki", "8"}, w, "order of appearance when not all are numbers")
}

// Sweep plots read well (internal/plotfit): no legend over the lines, no
// tick labels over one another, nothing clipped; with many series, many
// x values, long names and a log scale.
func TestPlotsReadWell(t *testing.T) {
	var csv strings.Builder
	csv.WriteString("cluster,backend,dispatch_us\n")
	for i := range 30 {
		for j, b := range []string{"gdaki", "proxy", "nccl", "gdaki-nvlink", "proxy-nvlink"} {
			fmt.Fprintf(&csv, "h100-ib-%02d-nodes,%s,%d\n", i, b, 40+i*3+j*7+(i%4)*9)
		}
	}
	tb, err := ReadCSV(strings.NewReader(csv.String()), "many.csv")
	require.NoError(t, err)
	small, err := ReadCSV(strings.NewReader(plotCSV), "p.csv")
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		tb   *Table
		opt  PlotOptions
	}{
		{"by backend", small, PlotOptions{X: "ep", Y: "dispatch_us", By: "backend"}},
		{"one line, log", small, PlotOptions{X: "backend", Y: "dispatch_us", LogY: true}},
		{"many", tb, PlotOptions{X: "cluster", Y: "dispatch_us", By: "backend"}},
		{"many, log", tb, PlotOptions{X: "cluster", Y: "dispatch_us", By: "backend", LogY: true}},
	} {
		p, legend, marks, err := plotOf(c.tb, c.opt)
		require.NoError(t, err, c.name)
		assert.Empty(t, plotfit.Check(p, plotSize[0], plotSize[1], legend, marks), c.name)
	}
}
