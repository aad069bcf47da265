package sweep

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/ginsim/ginsim/internal/plotfit"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotOptions say what Plot draws.
type PlotOptions struct {
	// X is the column on the horizontal axis (categorical, in numeric order
	// when every value is a number), Y the metric, By the column whose
	// values get one line each ("": one line).
	X, Y, By string
	// LogY draws Y on a log scale (values <= 0 are left out).
	LogY bool
	// Title (default: the study's name and the columns).
	Title string
	// Format is "png" or "svg".
	Format string
}

// Plot draws metric Y against column X of a results table, one line per
// value of By; points with the same (X, By) (other axes, such as seeds)
// are averaged. Failed rows are left out.
func Plot(t *Table, opt PlotOptions) (io.WriterTo, error) {
	if opt.Format != "png" && opt.Format != "svg" {
		return nil, fmt.Errorf("sweep: plot format %q (want png or svg)", opt.Format)
	}
	p, _, _, err := plotOf(t, opt)
	if err != nil {
		return nil, err
	}
	wt, err := p.WriterTo(plotSize[0], plotSize[1], opt.Format)
	if err != nil {
		return nil, fmt.Errorf("sweep: plot: %w", err)
	}
	return wt, nil
}

// plotSize is Plot's size.
var plotSize = [2]vg.Length{7 * vg.Inch, 4.5 * vg.Inch}

// plotOf builds Plot's plot; it returns the legend's entries and the data
// as plotfit marks.
func plotOf(t *Table, opt PlotOptions) (*plot.Plot, []string, []plotfit.Mark, error) {
	fail := func(err error) (*plot.Plot, []string, []plotfit.Mark, error) { return nil, nil, nil, err }
	col := func(name, what string) (int, error) {
		if name == "" {
			return -1, nil
		}
		if c := t.Column(name); c >= 0 {
			return c, nil
		}
		return 0, fmt.Errorf("sweep: plot: %s column %q not in the results (have %v)", what, name, t.Header)
	}
	xc, err := col(opt.X, "x")
	if err != nil {
		return fail(err)
	}
	yc, err := col(opt.Y, "y")
	if err != nil {
		return fail(err)
	}
	if xc < 0 || yc < 0 {
		return fail(fmt.Errorf("sweep: plot: --x and --y are needed"))
	}
	bc, err := col(opt.By, "by")
	if err != nil {
		return fail(err)
	}
	ec := t.Column("error")
	type key struct{ x, by string }
	sum, cnt := map[key]float64{}, map[key]int{}
	var xs, bys []string
	for i, r := range t.Records {
		if len(r) != len(t.Header) || ec >= 0 && r[ec] != "" {
			continue
		}
		y, err := strconv.ParseFloat(r[yc], 64)
		if err != nil {
			return fail(fmt.Errorf("sweep: plot: row %d: %s %q is not a number", i+1, opt.Y, r[yc]))
		}
		k := key{x: r[xc]}
		if bc >= 0 {
			k.by = r[bc]
		}
		if !slices.Contains(xs, k.x) {
			xs = append(xs, k.x)
		}
		if !slices.Contains(bys, k.by) {
			bys = append(bys, k.by)
		}
		sum[k] += y
		cnt[k]++
	}
	if len(xs) == 0 {
		return fail(fmt.Errorf("sweep: plot: no successful rows to draw"))
	}
	numericSort(xs)
	numericSort(bys)
	p := plot.New()
	p.Title.Text = opt.Title
	if p.Title.Text == "" {
		p.Title.Text = opt.Y + " against " + opt.X
		if opt.By != "" {
			p.Title.Text += ", by " + opt.By
		}
	}
	p.X.Label.Text = opt.X
	p.Y.Label.Text = opt.Y
	if opt.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.NominalX(xs...)
	p.Legend.Top = true
	p.Legend.Left = true
	var legend []string
	var marks []plotfit.Mark
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, b := range bys {
		var pts plotter.XYs
		for xi, x := range xs {
			k := key{x, b}
			if cnt[k] == 0 {
				continue
			}
			y := sum[k] / float64(cnt[k])
			if opt.LogY && y <= 0 {
				continue
			}
			lo, hi = min(lo, y), max(hi, y)
			pts = append(pts, plotter.XY{X: float64(xi), Y: y})
		}
		if len(pts) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fail(fmt.Errorf("sweep: plot: %w", err))
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		if opt.By != "" {
			p.Legend.Add(opt.By+" "+b, l, s)
			legend = append(legend, opt.By+" "+b)
		}
		for j, q := range pts {
			marks = append(marks, plotfit.Mark{Kind: plotfit.Point, X: q.X, Y: q.Y})
			if j > 0 {
				marks = append(marks, plotfit.Mark{Kind: plotfit.Segment, X: pts[j-1].X, Y: pts[j-1].Y, X2: q.X, Y2: q.Y})
			}
		}
	}
	if math.IsInf(lo, 1) {
		return fail(fmt.Errorf("sweep: plot: nothing to draw (log scale leaves out values <= 0)"))
	}
	p.Legend.Padding = vg.Points(2)
	p.Legend.ThumbnailWidth = vg.Points(20)
	// A margin below the lowest point; above the highest, a band of its
	// own for the legend (and a margin).
	lh := plotfit.LegendHeight(p, len(legend))
	data := plotSize[1] - vg.Points(90) // less the title and the x axis, generously
	if opt.LogY {
		p.Y.Min = lo / 1.5
		top := math.Log10(hi * 1.5)
		p.Y.Max = math.Pow(10, plotfit.Headroom(math.Log10(p.Y.Min), top, lh, data))
	} else {
		span := max(hi-lo, math.Abs(hi)*0.1, 1e-9)
		p.Y.Min = max(0, lo-0.05*span)
		if lo < 0 {
			p.Y.Min = lo - 0.05*span
		}
		p.Y.Max = plotfit.Headroom(p.Y.Min, hi+0.05*span, lh, data)
	}
	p.X.Min, p.X.Max = -0.3, float64(len(xs)-1)+0.3
	p.X.Tick.Marker = plotfit.SparseNominal(p, xs, plotSize[0]-vg.Points(100))
	p.Add(plotter.NewGrid())
	return p, legend, marks, nil
}

// numericSort sorts values numerically when all are numbers, else keeps
// their order of appearance.
func numericSort(v []string) {
	for _, s := range v {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return
		}
	}
	slices.SortStableFunc(v, func(a, b string) int {
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
}
