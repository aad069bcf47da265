package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"text/tabwriter"

	"gonum.org/v1/gonum/floats"
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

// NewSpread returns the spread of xs (at least one value), each figure
// rounded to 3 decimals as reports are.
func NewSpread(xs []float64) Spread {
	var sd float64
	if len(xs) > 1 {
		sd = stat.StdDev(xs, nil)
	}
	return Spread{Mean: round3(stat.Mean(xs, nil)), SD: round3(sd), Min: round3(floats.Min(xs)), Max: round3(floats.Max(xs))}
}

// RunSeeds replays tr with seeds opt.Seed, opt.Seed+1, ... (n of them),
// opt.Jobs runs at a time, each replaying its steps one at a time. The
// sweep does not depend on opt.Jobs. Timelines and pcaps draw one run:
// they must not be set.
func RunSeeds(tr *traces.Trace, spec machine.Spec, opt Options, n int) (*Sweep, error) {
	if n < 1 {
		return nil, fmt.Errorf("replay: %d seeds: want at least 1", n)
	}
	if opt.Timeline != nil || opt.Pcap != nil {
		return nil, fmt.Errorf("replay: a timeline or pcap draws one run, not a sweep of %d seeds", n)
	}
	runs := make([]*Report, n)
	workers := opt.Workers
	if workers == 0 { // the cores, shared among the seeds running at once
		workers = max(1, runtime.GOMAXPROCS(0)/max(1, min(opt.Jobs, n)))
	}
	err := par.ForEach(n, opt.Jobs, opt.Progress, func(i int) error {
		o := opt
		o.Seed, o.Jobs, o.Workers, o.Progress = opt.Seed+uint64(i), 1, workers, nil
		r, err := Run(tr, spec, o)
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
	sw.Spread.DispatchUS, sw.Spread.CombineUS = NewSpread(d), NewSpread(c)
	sw.Spread.DispatchGBps, sw.Spread.CombineGBps = NewSpread(dg), NewSpread(cg)
	return sw, nil
}

// WriteJSON writes the sweep as one indented JSON object.
func (sw *Sweep) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(sw, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: %w", err)
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
	s := &sw.Spread
	row := func(name string, d, dg, c, cg float64) {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", name, d, dg, c, cg)
	}
	for _, r := range sw.Runs {
		row(strconv.FormatUint(r.Seed, 10), r.DispatchUS, r.DispatchGBps, r.CombineUS, r.CombineGBps)
	}
	row("mean", s.DispatchUS.Mean, s.DispatchGBps.Mean, s.CombineUS.Mean, s.CombineGBps.Mean)
	row("sd", s.DispatchUS.SD, s.DispatchGBps.SD, s.CombineUS.SD, s.CombineGBps.SD)
	row("min", s.DispatchUS.Min, s.DispatchGBps.Min, s.CombineUS.Min, s.CombineGBps.Min)
	row("max", s.DispatchUS.Max, s.DispatchGBps.Max, s.CombineUS.Max, s.CombineGBps.Max)
	return tw.Flush()
}
