package plotfit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

const w, h = 6 * vg.Inch, 4 * vg.Inch

// line draws y = x over [0, 10] with a legend entry; the top-left legend
// stays clear of it, the top-right one covers its top end.
func line(left bool) (*plot.Plot, []Mark) {
	p := plot.New()
	pts := plotter.XYs{{X: 0, Y: 0}, {X: 10, Y: 10}}
	l, _ := plotter.NewLine(pts)
	p.Add(l)
	p.Legend.Add("y = x", l)
	p.Legend.Top, p.Legend.Left = true, left
	return p, []Mark{{Kind: Segment, X: 0, Y: 0, X2: 10, Y2: 10}}
}

func TestLegendOverData(t *testing.T) {
	p, marks := line(true)
	assert.Empty(t, Check(p, w, h, []string{"y = x"}, marks))
	p, marks = line(false)
	probs := Check(p, w, h, []string{"y = x"}, marks)
	assert.Len(t, probs, 1)
	assert.Contains(t, strings.Join(probs, "\n"), "legend")

	// A point or a bar under the legend counts too; Headroom makes room.
	p, _ = line(false)
	bar := Mark{Kind: Bar, X: 9.5, Y: 10, Half: vg.Points(5)}
	assert.NotEmpty(t, Check(p, w, h, []string{"y = x"}, []Mark{bar}))
	assert.NotEmpty(t, Check(p, w, h, []string{"y = x"}, []Mark{{X: 10, Y: 10}}))
	p.Y.Min, p.Y.Max = 0, Headroom(0, 10, LegendHeight(p, 1), h-vg.Points(60))
	assert.Empty(t, Check(p, w, h, []string{"y = x"}, []Mark{bar, {X: 10, Y: 10}}))
	assert.NotEmpty(t, Check(p, w, h, []string{"y = x", "missing"}, nil), "an entry not drawn is reported")
}

func TestTicksOverlapAndClipping(t *testing.T) {
	p := plot.New()
	var names []string
	for i := range 40 {
		names = append(names, "cluster-"+strconv.Itoa(i))
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, 39.5
	probs := Check(p, w, h, nil, nil)
	assert.NotEmpty(t, probs)
	assert.Contains(t, probs[0], "overlap")

	p = plot.New()
	p.NominalX("a", "b", "c")
	p.X.Min, p.X.Max = -0.5, 2.5
	assert.Empty(t, Check(p, w, h, nil, nil))
	p.Title.Text = strings.Repeat("a title far too long for the plot ", 4)
	probs = Check(p, w, h, nil, nil)
	assert.NotEmpty(t, probs)
	assert.Contains(t, probs[0], "clipped")
}
