package scaling

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/internal/plotfit"
)

func TestFill(t *testing.T) {
	rows := []Row{{Workers: 1, WallS: 8, Events: 8e6}, {Workers: 2, WallS: 5, Events: 8e6}, {Workers: 4, WallS: 2.5, Events: 8e6}}
	Fill(rows)
	assert.InDelta(t, 1e6, rows[0].EventsPerS, 1e-6)
	assert.InDelta(t, 1.6, rows[1].Speedup, 1e-12)
	assert.InDelta(t, 0.8, rows[1].Efficiency, 1e-12)
	assert.InDelta(t, 3.2, rows[2].Speedup, 1e-12)
	var b bytes.Buffer
	WriteTable(&b, rows)
	assert.Contains(t, b.String(), "       4      2.500      0.000         3.20      3.20        80 %")

	noBase := []Row{{Workers: 2, WallS: 1, Events: 1}}
	Fill(noBase)
	assert.Zero(t, noBase[0].Speedup)
	_, _, _, err := Plot(noBase, "x")
	assert.Error(t, err)
}

// The plot reads well for a short and a long sweep of worker counts.
func TestPlotReadsWell(t *testing.T) {
	for _, n := range []int{2, 16} {
		var rows []Row
		for w := 1; w <= n; w *= 2 {
			rows = append(rows, Row{Workers: w, WallS: 10 / (float64(w) * (1 - 0.03*float64(w))), Events: 1e7})
		}
		Fill(rows)
		p, legend, marks, err := Plot(rows, "PHOLD, 32 partitions")
		require.NoError(t, err)
		assert.Empty(t, plotfit.Check(p, Size[0], Size[1], legend, marks), "%d workers", n)
		var b bytes.Buffer
		require.NoError(t, WritePlot(&b, rows, "t", "png"))
		assert.Greater(t, b.Len(), 1000)
	}
}
