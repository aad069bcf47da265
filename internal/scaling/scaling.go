package scaling

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/ginsim/ginsim/internal/plotfit"
)

// Row is one run at a worker count.
type Row struct {
	Workers int     `json:"workers"`
	WallS   float64 `json:"wall_s"`
	CPUS    float64 `json:"cpu_s"`
	Events  uint64  `json:"events"`
	// EventsPerS is Events per wall second.
	EventsPerS float64 `json:"events_per_s"`
	// Speedup is the one-worker wall time over this one; Efficiency is
	// Speedup over Workers. Both are 0 without a one-worker row.
	Speedup    float64 `json:"speedup"`
	Efficiency float64 `json:"efficiency"`
}

// Fill computes each row's rate, speed-up and efficiency against the
// row with one worker (if any).
func Fill(rows []Row) {
	var base float64
	for _, r := range rows {
		if r.Workers == 1 {
			base = r.WallS
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.WallS > 0 {
			r.EventsPerS = float64(r.Events) / r.WallS
			if base > 0 {
				r.Speedup = base / r.WallS
				r.Efficiency = r.Speedup / float64(r.Workers)
			}
		}
	}
}

// WriteTable prints the rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%8s %10s %10s %12s %9s %11s\n", "workers", "wall s", "CPU s", "M events/s", "speed-up", "efficiency")
	for _, r := range rows {
		sp, eff := "-", "-"
		if r.Speedup > 0 {
			sp, eff = fmt.Sprintf("%.2f", r.Speedup), fmt.Sprintf("%.0f %%", 100*r.Efficiency)
		}
		fmt.Fprintf(w, "%8d %10.3f %10.3f %12.2f %9s %11s\n", r.Workers, r.WallS, r.CPUS, r.EventsPerS/1e6, sp, eff)
	}
}

// Size is the plot's size.
var Size = [2]vg.Length{6 * vg.Inch, 4 * vg.Inch}

// Plot draws speed-up against workers, with the ideal (speed-up =
// workers) dashed, for the rows that have a speed-up. It returns the
// legend entries and the data marks for plotfit.Check.
func Plot(rows []Row, title string) (*plot.Plot, []string, []plotfit.Mark, error) {
	var pts plotter.XYs
	hi := 1.0
	for _, r := range rows {
		if r.Speedup > 0 {
			pts = append(pts, plotter.XY{X: float64(r.Workers), Y: r.Speedup})
			hi = max(hi, r.Speedup, float64(r.Workers))
		}
	}
	if len(pts) == 0 {
		return nil, nil, nil, fmt.Errorf("scaling: no speed-up to plot (no one-worker row)")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "speed-up over one worker"
	maxW := pts[len(pts)-1].X
	for _, q := range pts {
		maxW = max(maxW, q.X)
	}
	ideal := plotter.XYs{{X: 1, Y: 1}, {X: maxW, Y: maxW}}
	li, err := plotter.NewLine(ideal)
	if err != nil {
		return nil, nil, nil, err
	}
	li.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	li.Color = plotutil.Color(1)
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return nil, nil, nil, err
	}
	l.Color, s.Color = plotutil.Color(0), plotutil.Color(0)
	l.Width = vg.Points(1.5)
	p.Add(plotter.NewGrid(), li, l, s)
	legend := []string{"measured", "ideal"}
	p.Legend.Add(legend[0], l, s)
	p.Legend.Add(legend[1], li)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.Padding = vg.Points(2)
	var marks []plotfit.Mark
	for j, q := range pts {
		marks = append(marks, plotfit.Mark{Kind: plotfit.Point, X: q.X, Y: q.Y})
		if j > 0 {
			marks = append(marks, plotfit.Mark{Kind: plotfit.Segment, X: pts[j-1].X, Y: pts[j-1].Y, X2: q.X, Y2: q.Y})
		}
	}
	marks = append(marks, plotfit.Mark{Kind: plotfit.Segment, X: 1, Y: 1, X2: maxW, Y2: maxW})
	p.X.Min, p.X.Max = 0, maxW*1.05+0.5
	p.Y.Min = 0
	lh := plotfit.LegendHeight(p, len(legend))
	p.Y.Max = plotfit.Headroom(0, hi*1.05, lh, Size[1]-vg.Points(90))
	var ticks []plot.Tick
	for _, q := range pts {
		ticks = append(ticks, plot.Tick{Value: q.X, Label: strconv.Itoa(int(math.Round(q.X)))})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	return p, legend, marks, nil
}

// WritePlot writes the plot in format ("png", "svg", "pdf") to w.
func WritePlot(w io.Writer, rows []Row, title, format string) error {
	p, _, _, err := Plot(rows, title)
	if err != nil {
		return err
	}
	wt, err := p.WriterTo(Size[0], Size[1], format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
