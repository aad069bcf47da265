package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/internal/plotfit"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// BreakdownColumn is one part of a phase's critical path as the report's
// JSON names it ("nic_us") and its value in microseconds.
type BreakdownColumn struct {
	Name string
	US   float64
}

// BreakdownPhase is one phase's critical-path breakdown: its parts in
// the JSON's order and the phase time (total_us; 0 when absent).
type BreakdownPhase struct {
	Phase   string
	Columns []BreakdownColumn
	TotalUS float64
}

// BreakdownOf reads the critical-path breakdown out of a report's JSON:
// for each phase under "breakdown", in order, every number whose name
// ends in _us, total_us apart. It knows no column by name, so the chart
// follows the report's columns whatever they are.
func BreakdownOf(reportJSON []byte) ([]BreakdownPhase, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(reportJSON, &top); err != nil {
		return nil, fmt.Errorf("replay: breakdown: %w", err)
	}
	raw, ok := top["breakdown"]
	if !ok {
		return nil, fmt.Errorf("replay: breakdown: the report has no \"breakdown\" object")
	}
	phases, err := orderedObject(raw)
	if err != nil {
		return nil, fmt.Errorf("replay: breakdown: %w", err)
	}
	var out []BreakdownPhase
	for _, ph := range phases {
		fields, err := orderedObject(ph.raw)
		if err != nil {
			continue // not a phase object
		}
		bp := BreakdownPhase{Phase: ph.key}
		for _, f := range fields {
			var v float64
			if !strings.HasSuffix(f.key, "_us") || json.Unmarshal(f.raw, &v) != nil {
				continue
			}
			if f.key == "total_us" {
				bp.TotalUS = v
				continue
			}
			bp.Columns = append(bp.Columns, BreakdownColumn{Name: f.key, US: v})
		}
		if len(bp.Columns) > 0 {
			out = append(out, bp)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("replay: breakdown: no phase with _us columns")
	}
	return out, nil
}

type keyed struct {
	key string
	raw json.RawMessage
}

// orderedObject returns a JSON object's members in their order.
func orderedObject(raw json.RawMessage) ([]keyed, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, fmt.Errorf("want an object, have %v", t)
	}
	var out []keyed
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, keyed{t.(string), v})
	}
	return out, nil
}

// columnLabel turns a JSON column name into a legend entry:
// "doorbell_pcie_us" -> "doorbell pcie".
func columnLabel(name string) string {
	return strings.ReplaceAll(strings.TrimSuffix(name, "_us"), "_", " ")
}

// breakdownSize is the chart's size.
var breakdownSize = [2]vg.Length{8 * vg.Inch, 4.5 * vg.Inch}

// breakdownBar is a bar's width.
const breakdownBar = 60

// PlotBreakdown draws the report's critical-path breakdown as one stacked
// bar per phase (format "png" or "svg"), read from its JSON.
func (r *Report) PlotBreakdown(format string) (io.WriterTo, error) {
	if !slices.Contains(PlotFormats, format) {
		return nil, fmt.Errorf("replay: plot format %q (want png or svg)", format)
	}
	js, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("replay: breakdown plot: %w", err)
	}
	phases, err := BreakdownOf(js)
	if err != nil {
		return nil, err
	}
	title := fmt.Sprintf("critical path of the slowest receiver: %s %s over %s, EP%d (%s)", r.Model, r.Mode, r.Backend, r.EP, r.Cluster)
	p, _, _, err := breakdownPlot(phases, title)
	if err != nil {
		return nil, err
	}
	wt, err := p.WriterTo(breakdownSize[0], breakdownSize[1], format)
	if err != nil {
		return nil, fmt.Errorf("replay: breakdown plot: %w", err)
	}
	return wt, nil
}

// breakdownPlot builds the stacked bars: one bar chart per column (those
// zero in every phase left out), each stacked on the one before, and the
// legend in a band of its own above the bars. It returns the legend's
// entries and the bars as plotfit marks.
func breakdownPlot(phases []BreakdownPhase, title string) (*plot.Plot, []string, []plotfit.Mark, error) {
	var cols []string
	for _, ph := range phases {
		for _, c := range ph.Columns {
			if c.US != 0 && !slices.Contains(cols, c.Name) {
				cols = append(cols, c.Name)
			}
		}
	}
	if len(cols) == 0 {
		return nil, nil, nil, fmt.Errorf("replay: breakdown plot: every column is zero")
	}
	value := func(ph BreakdownPhase, col string) float64 {
		for _, c := range ph.Columns {
			if c.Name == col {
				return c.US
			}
		}
		return 0
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "time on the critical path (us)"
	p.Add(plotter.NewGrid())
	w := vg.Points(breakdownBar)
	var (
		prev   *plotter.BarChart
		legend []string
		marks  []plotfit.Mark
		names  []string
		top    float64
	)
	base := make([]float64, len(phases))
	for i, col := range cols {
		vs := make(plotter.Values, len(phases))
		for j, ph := range phases {
			vs[j] = value(ph, col)
		}
		b, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("replay: breakdown plot: %w", err)
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		if prev != nil {
			b.StackOn(prev)
		}
		prev = b
		p.Add(b)
		label := columnLabel(col)
		p.Legend.Add(label, b)
		legend = append(legend, label)
		for j, v := range vs {
			marks = append(marks, plotfit.Mark{Kind: plotfit.Bar, X: float64(j), Y: base[j] + v, Y2: base[j], Half: w / 2})
			base[j] += v
			top = max(top, base[j])
		}
	}
	for _, ph := range phases {
		names = append(names, ph.Phase)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(phases))-0.4
	p.Legend.Top = true
	p.Legend.Padding = vg.Points(2)
	p.Legend.ThumbnailWidth = vg.Points(14)
	p.Y.Min = 0
	data := breakdownSize[1] - vg.Points(90) // less the title and the x axis, generously
	p.Y.Max = plotfit.Headroom(0, top, plotfit.LegendHeight(p, len(legend)), data)
	return p, legend, marks, nil
}
