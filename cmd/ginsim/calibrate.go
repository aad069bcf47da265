package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/spf13/cobra"
)

func init() { Register("", newCalibrateCmd) }

// calRow is one calibration target: what the model gives against the
// published figure.
type calRow struct {
	Case      string  `json:"case"`
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit"`
	Model     float64 `json:"model"`
	Published float64 `json:"published"`
	// ErrorPct is (model - published) / published in percent.
	ErrorPct float64 `json:"error_pct"`
	Source   string  `json:"source"`
	// With --seeds N > 1, Model is the mean over the N seeds and ModelSD
	// its sample standard deviation.
	Seeds   int     `json:"seeds,omitempty"`
	ModelSD float64 `json:"model_sd,omitempty"`
}

// runCase runs c with seeds seed, ..., seed+n-1, jobs at a time, and
// returns its rows: with n > 1, the mean over seeds, its SD and the error
// of the mean.
func runCase(c calCase, seed uint64, n, jobs int) ([]calRow, error) {
	runs := make([][]calRow, n)
	err := par.ForEach(n, jobs, nil, func(i int) error {
		r, err := c.run(seed + uint64(i))
		runs[i] = r
		return err
	})
	if err != nil || n == 1 {
		return runs[0], err
	}
	out := slices.Clone(runs[0])
	for k := range out {
		xs := make([]float64, n)
		for i := range runs {
			xs[i] = runs[i][k].Model
		}
		sp := replay.NewSpread(xs)
		out[k].Model, out[k].ModelSD, out[k].Seeds = round2(sp.Mean), round2(sp.SD), n
		out[k].ErrorPct = round2(100 * (sp.Mean - out[k].Published) / out[k].Published)
	}
	return out, nil
}

// calCase runs one calibration case and returns its rows.
type calCase struct {
	name, what string
	run        func(seed uint64) ([]calRow, error)
}

func calibrationCases() []calCase {
	row := func(c, metric, unit string, model, pub float64, src string) calRow {
		return calRow{Case: c, Metric: metric, Unit: unit, Model: round2(model), Published: pub,
			ErrorPct: round2(100 * (model - pub) / pub), Source: src}
	}
	return []calCase{
		{"pingpong", "GIN put+signal ping-pong, 8 B, GDAKI, 2 nodes of h100-ib (nccl-tests ginPutSignalLatency pingpong)",
			func(seed uint64) ([]calRow, error) {
				rows, err := bench.Run(bench.Options{Env: bench.EnvConfig{Profile: "h100-ib", Backend: "gdaki", Seed: seed},
					Op: "put_signal", Pattern: "pingpong", Sizes: []uint64{8}, Iters: 100, Warmup: 10})
				if err != nil {
					return nil, err
				}
				return []calRow{row("pingpong", "round trip", "us", 2*rows[0].LatencyUs, 16.7,
					"GIN paper (arXiv 2511.15076), abstract")}, nil
			}},
		{"ll-ep8", "DeepEP LL over GIN GDAKI, DeepSeek-V3, EP8, 128 tokens, 288 experts, h100-ib",
			func(seed uint64) ([]calRow, error) {
				tr, err := traces.OpenExample("deepseek-v3-ll-ep8-288e.jsonl.gz")
				if err != nil {
					return nil, err
				}
				rep, err := calReplay(tr, "h100-ib", replay.ModeLL, seed)
				if err != nil {
					return nil, err
				}
				src := "DeepEP PR #521 README-NCCL.md (GIN paper's DeepEP rows)"
				return []calRow{row("ll-ep8", "dispatch", "us", rep.DispatchUS, 160.8, src),
					row("ll-ep8", "combine", "us", rep.CombineUS, 302.8, src)}, nil
			}},
		{"ll-h800", "DeepEP LL, pure RDMA (published over NVSHMEM, run over GIN GDAKI), DeepSeek-V3, EP8, 128 tokens, 288 experts, h800-cx7",
			func(seed uint64) ([]calRow, error) {
				tr, err := traces.OpenExample("deepseek-v3-ll-ep8-288e.jsonl.gz")
				if err != nil {
					return nil, err
				}
				rep, err := calReplay(tr, "h800-cx7", replay.ModeLL, seed)
				if err != nil {
					return nil, err
				}
				src := "DeepEP README, low-latency kernels, EP8"
				return []calRow{row("ll-h800", "dispatch", "us", rep.DispatchUS, 163, src),
					row("ll-h800", "combine", "us", rep.CombineUS, 318, src),
					row("ll-h800", "dispatch", "GB/s", rep.DispatchGBps, 46, src),
					row("ll-h800", "combine", "GB/s", rep.CombineGBps, 46, src)}, nil
			}},
		htCase("ht-ep16", "h100-ib", "DeepEP HT over GIN GDAKI, DeepSeek-V3, EP16, 4096 tokens, 256 experts, node-grouped routing, h100-ib",
			76.9, 66.2, "DeepEP PR #521 README-NCCL.md (GIN paper's DeepEP rows)", row),
		htCase("ht-h800", "h800-cx7", "DeepEP HT (published over NVSHMEM, run over GIN GDAKI), same shape, h800-cx7",
			43, 43, "DeepEP README, internode normal kernels, EP16", row),
	}
}

// htCase is a DeepEP HT EP16 calibration case on preset.
func htCase(name, preset, what string, disp, comb float64, src string,
	row func(c, metric, unit string, model, pub float64, src string) calRow) calCase {
	return calCase{name, what, func(seed uint64) ([]calRow, error) {
		m, err := traces.ModelByName("deepseek-v3")
		if err != nil {
			return nil, err
		}
		tr, err := traces.Generate(traces.GenConfig{Model: m, EP: 16, RanksPerNode: 8, TokensPerRank: 4096,
			Experts: 256, Routing: "grouped", Seed: 1, Phase: "prefill"})
		if err != nil {
			return nil, err
		}
		rep, err := calReplay(tr, preset, replay.ModeHT, seed)
		if err != nil {
			return nil, err
		}
		return []calRow{row(name, "dispatch", "GB/s", rep.DispatchGBps, disp, src),
			row(name, "combine", "GB/s", rep.CombineGBps, comb, src)}, nil
	}}
}

func calReplay(tr *traces.Trace, preset, mode string, seed uint64) (*replay.Report, error) {
	spec, ok := machine.Preset(preset)
	if !ok {
		return nil, fmt.Errorf("no %s preset", preset)
	}
	// The published LL figures are pure-RDMA runs (test_low_latency.py
	// --disable-nvlink on one node): LL runs RDMA only, not its library's
	// default NVLink path. HT has one path.
	return replay.Run(tr, spec, replay.Options{Mode: mode, Backend: replay.BackendGDAKI, RDMAOnly: mode == replay.ModeLL,
		Seed: seed, Layers: 1, Backends: ginBackends, Sequential: true})
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func newCalibrateCmd() *cobra.Command {
	var (
		only    []string
		file    string
		asJSON  bool
		seed    uint64
		seeds   int
		verbose bool
	)
	cases := calibrationCases()
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	c := &cobra.Command{
		Use:   "calibrate",
		Short: "Run the calibration rows and compare the model with the published figures",
		Long: `Calibrate runs the cases the model's free timing parameters were fitted
against, on the built-in profiles, and prints model, published figure and error:

` + func() string {
			var b strings.Builder
			for _, c := range cases {
				fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.what)
			}
			return b.String()
		}() + `
The fitted parameters and the reasons for their values are listed in
README.md ("Calibration"); the held-out published rows are not fitted.`,
		Example: "  ginsim calibrate\n  ginsim calibrate --cases pingpong,ll-ep8 --json\n  ginsim calibrate --seeds 5",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seeds < 1 {
				return Usagef("--seeds %d: want at least 1", seeds)
			}
			run, known := cases, names
			if file != "" {
				fc, err := loadCases(file, names)
				if err != nil {
					return err
				}
				run = slices.Concat(cases, fc)
				if len(only) == 0 { // the file's rows alone unless --cases names built-in ones too
					for _, c := range fc {
						only = append(only, c.name)
					}
				}
				known = nil
				for _, c := range run {
					known = append(known, c.name)
				}
			}
			for _, n := range only {
				if !slices.Contains(known, n) {
					return Usagef("--cases: unknown case %q (have %s)", n, strings.Join(known, ", "))
				}
			}
			var rows []calRow
			for _, c := range run {
				if len(only) > 0 && !slices.Contains(only, c.name) {
					continue
				}
				if verbose {
					fmt.Fprintf(cmd.ErrOrStderr(), "calibrate: running %s\n", c.name)
				}
				r, err := runCase(c, seed, seeds, runtime.GOMAXPROCS(0))
				if err != nil {
					return fmt.Errorf("calibrate %s: %w", c.name, err)
				}
				rows = append(rows, r...)
			}
			return writeCalibration(cmd.OutOrStdout(), rows, asJSON)
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&only, "cases", nil, "run only these cases ("+strings.Join(names, ",")+")")
	fl.StringVar(&file, "cases-file", "", "YAML `FILE` of your own cases: published or measured rows to compare the model with (see README)")
	fl.BoolVar(&asJSON, "json", false, "print JSON rows")
	fl.Uint64Var(&seed, "seed", 1, "simulation seed")
	fl.IntVar(&seeds, "seeds", 1, "run each case with N seeds (--seed, --seed+1, ...) and report the mean, its SD and the error of the mean")
	fl.BoolVarP(&verbose, "verbose", "v", false, "say which case runs (on standard error)")
	return c
}

func writeCalibration(w io.Writer, rows []calRow, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	sd := len(rows) > 0 && rows[0].Seeds > 1
	if sd {
		fmt.Fprintf(tw, "case\tmetric\tmodel (mean of %d seeds)\tsd\tpublished\terror\t\n", rows[0].Seeds)
	} else {
		fmt.Fprintln(tw, "case\tmetric\tmodel\tpublished\terror\t")
	}
	for _, r := range rows {
		if sd {
			fmt.Fprintf(tw, "%s\t%s\t%.1f %s\t%.1f\t%.1f %s\t%+.1f%%\t\n", r.Case, r.Metric, r.Model, r.Unit, r.ModelSD,
				r.Published, r.Unit, r.ErrorPct)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f %s\t%.1f %s\t%+.1f%%\t\n", r.Case, r.Metric, r.Model, r.Unit, r.Published, r.Unit, r.ErrorPct)
	}
	return tw.Flush()
}
