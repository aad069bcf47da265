package sweep

import (
	"bytes"
	"strings"
	"testing"

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
