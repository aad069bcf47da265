package moe

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/traces"
)

// Sweep is a replay of one trace under several seeds: what the model's
// randomness (ECMP hashes, poll phases, loss) moves, next to what the
// configuration does.
type Sweep struct {
	// Runs are the reports, in seed order.
	Runs []*Report `json:"runs"`
	// Spread summarises the runs' means over layers.
	Spread SweepSpread `json:"spread"`
}

// SweepSpread is the spread of each headline figure over the seeds.
type SweepSpread struct {
	Seeds        []uint64 `json:"seeds"`
	DispatchUS   Spread   `json:"dispatch_us"`
	CombineUS    Spread   `json:"combine_us"`
	DispatchGBps Spread   `json:"dispatch_GBps"`
	CombineGBps  Spread   `json:"combine_GBps"`
}

// Spread is the mean, sample standard deviation (0 for one run), minimum
// and maximum of a figure over runs.
type Spread struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func spreadOf(xs []float64) Spread {
	s := Spread{Mean: stat.Mean(xs, nil), Min: math.Inf(1), Max: math.Inf(-1)}
	if len(xs) > 1 {
		s.SD = stat.StdDev(xs, nil)
	}
	for _, x := range xs {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Mean, s.SD, s.Min, s.Max = round3(s.Mean), round3(s.SD), round3(s.Min), round3(s.Max)
	return s
}

// ReplaySeeds replays tr with seeds opt.Seed, opt.Seed+1, ... (n of them),
// opt.Jobs runs at a time, each replaying its steps one at a time. The
// sweep does not depend on opt.Jobs. Timelines and pcaps draw one run:
// they must not be set.
func ReplaySeeds(tr *traces.Trace, spec machine.Spec, opt Options, n int) (*Sweep, error) {
	if n < 1 {
		return nil, fmt.Errorf("moe: %d seeds: want at least 1", n)
	}
	if opt.Timeline != nil || opt.Pcap != nil {
		return nil, fmt.Errorf("moe: a timeline or pcap draws one run, not a sweep of %d seeds", n)
	}
	runs := make([]*Report, n)
	err := par.ForEach(n, opt.Jobs, opt.Progress, func(i int) error {
		o := opt
		o.Seed, o.Jobs, o.Progress = opt.Seed+uint64(i), 1, nil
		r, err := Replay(tr, spec, o)
		if err != nil {
			return fmt.Errorf("seed %d: %w", o.Seed, err)
		}
		runs[i] = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	sw := &Sweep{Runs: runs}
	var d, c, dg, cg []float64
	for _, r := range runs {
		sw.Spread.Seeds = append(sw.Spread.Seeds, r.Seed)
		d, c = append(d, r.DispatchUS), append(c, r.CombineUS)
		dg, cg = append(dg, r.DispatchGBps), append(cg, r.CombineGBps)
	}
	sw.Spread.DispatchUS, sw.Spread.CombineUS = spreadOf(d), spreadOf(c)
	sw.Spread.DispatchGBps, sw.Spread.CombineGBps = spreadOf(dg), spreadOf(cg)
	return sw, nil
}

// WriteJSON writes the sweep as one indented JSON object.
func (sw *Sweep) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(sw, "", "  ")
	if err != nil {
		return fmt.Errorf("moe: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes the first run's table, then one row per seed and the
// spread.
func (sw *Sweep) WriteTable(w io.Writer) error {
	if err := sw.Runs[0].WriteTable(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nover %d seeds (%d..%d), means over layers:\n", len(sw.Runs), sw.Spread.Seeds[0], sw.Spread.Seeds[len(sw.Runs)-1])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "seed\tdispatch us\tdispatch GB/s\tcombine us\tcombine GB/s\t")
	for _, r := range sw.Runs {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.Seed, r.DispatchUS, r.DispatchGBps, r.CombineUS, r.CombineGBps)
	}
	s := &sw.Spread
	for _, row := range []struct {
		name string
		f    func(Spread) float64
	}{{"mean", func(x Spread) float64 { return x.Mean }}, {"sd", func(x Spread) float64 { return x.SD }},
		{"min", func(x Spread) float64 { return x.Min }}, {"max", func(x Spread) float64 { return x.Max }}} {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", row.name, row.f(s.DispatchUS), row.f(s.DispatchGBps),
			row.f(s.CombineUS), row.f(s.CombineGBps))
	}
	return tw.Flush()
}
