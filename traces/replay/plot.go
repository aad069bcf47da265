package replay

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/ginsim/ginsim/internal/plotfit"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotFormats are the accepted Plot formats.
var PlotFormats = []string{"png", "svg"}

// Plot renders r: with several layers, bars of dispatch and combine time
// per layer; with one layer, the CDF of the ranks' receive-done times of
// both phases. format is "png" or "svg".
func (r *Report) Plot(format string) (io.WriterTo, error) {
	if !slices.Contains(PlotFormats, format) {
		return nil, fmt.Errorf("replay: plot format %q (want png or svg)", format)
	}
	p, _, _, err := r.plot()
	if err != nil {
		return nil, err
	}
	wt, err := p.WriterTo(plotSize[0], plotSize[1], format)
	if err != nil {
		return nil, fmt.Errorf("replay: plot: %w", err)
	}
	return wt, nil
}

// plotSize is Plot's size.
var plotSize = [2]vg.Length{8 * vg.Inch, 4.5 * vg.Inch}

// plot builds Plot's plot; it returns the legend's entries and the data
// as plotfit marks. The legend gets a band of its own above the data.
func (r *Report) plot() (*plot.Plot, []string, []plotfit.Mark, error) {
	var marks []plotfit.Mark
	legend := []string{"dispatch", "combine"}
	data := plotSize[1] - vg.Points(90) // less the title and the x axis, generously
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s %s over %s, EP%d (%s)", r.Model, r.Mode, r.Backend, r.EP, r.Cluster)
	p.Legend.Padding = vg.Points(2) // entries apart (gonum's default stacks them ink to ink)
	if len(r.Layers) > 1 {
		p.Y.Label.Text = "kernel time (us)"
		w := vg.Points(6)
		d, c := plotter.Values(r.DispatchUSPerLayer), plotter.Values(r.CombineUSPerLayer)
		bd, err := plotter.NewBarChart(d, w)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("replay: plot: %w", err)
		}
		bc, err := plotter.NewBarChart(c, w)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("replay: plot: %w", err)
		}
		var top float64
		for i := range d {
			marks = append(marks, plotfit.Mark{Kind: plotfit.Bar, X: float64(i), Y: d[i], Off: -w / 2, Half: w / 2},
				plotfit.Mark{Kind: plotfit.Bar, X: float64(i), Y: c[i], Off: w / 2, Half: w / 2})
			top = max(top, d[i], c[i])
		}
		bd.Color, bc.Color = plotutil.Color(0), plotutil.Color(1)
		bd.Offset, bc.Offset = -w/2, w/2
		p.Add(bd, bc)
		p.Legend.Add("dispatch", bd)
		p.Legend.Add("combine", bc)
		p.Legend.Top = true
		var names []string
		for _, l := range r.Layers {
			names = append(names, strconv.Itoa(l.Layer))
		}
		p.NominalX(names...)
		p.X.Tick.Marker = plotfit.SparseNominal(p, names, plotSize[0]-vg.Points(100))
		p.X.Label.Text = "layer"
		p.Y.Min = 0
		p.Y.Max = plotfit.Headroom(0, top, plotfit.LegendHeight(p, len(legend)), data)
	} else {
		p.X.Label.Text = "receive done (us after phase start)"
		p.Y.Label.Text = "fraction of ranks"
		for i, ph := range []struct {
			name string
			v    []float64
		}{{"dispatch", r.Layers[0].Dispatch.RecvDoneUS}, {"combine", r.Layers[0].Combine.RecvDoneUS}} {
			v := slices.Clone(ph.v)
			slices.Sort(v)
			pts := make(plotter.XYs, 0, 2*len(v))
			for j, x := range v {
				pts = append(pts, plotter.XY{X: x, Y: float64(j) / float64(len(v))})
				pts = append(pts, plotter.XY{X: x, Y: float64(j+1) / float64(len(v))})
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("replay: plot: %w", err)
			}
			for j := 1; j < len(pts); j++ {
				marks = append(marks, plotfit.Mark{Kind: plotfit.Segment, X: pts[j-1].X, Y: pts[j-1].Y, X2: pts[j].X, Y2: pts[j].Y})
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(ph.name, l)
		}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Y.Min = 0
		p.Y.Max = plotfit.Headroom(0, 1, plotfit.LegendHeight(p, len(legend)), data)
	}
	return p, legend, marks, nil
}
