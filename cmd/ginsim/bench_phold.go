package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/internal/scaling"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/phold"
)

func init() { Register("bench", newBenchPholdCmd) }

// pholdReport is bench phold's JSON.
type pholdReport struct {
	Config phold.Config  `json:"config"`
	Result phold.Result  `json:"result"`
	Runs   []scaling.Row `json:"runs"`
}

// defaultWorkers is 1, 2, 4, ... up to and including n.
func defaultWorkers(n int) []int {
	var w []int
	for k := 1; k < n; k *= 2 {
		w = append(w, k)
	}
	return append(w, n)
}

func newBenchPholdCmd() *cobra.Command {
	var (
		cfg                  phold.Config
		lookahead, mean, end time.Duration
		workers              []int
		asJSON               bool
		plotPath, plotFormat string
	)
	cmd := &cobra.Command{
		Use:   "phold",
		Short: "Measure the parallel kernel's speed-up on PHOLD, across worker counts",
		Long: `phold runs PHOLD, the standard benchmark of parallel discrete-event kernels, on
a sim.World of --parts partitions, once per worker count in --workers (default
1, 2, 4, ... up to the number of CPUs), and prints wall time, events per
second, speed-up and parallel efficiency against one worker. Every partition
holds --lps processes that start with --pending events each; an event burns
--work rounds of integer mixing (the model's cost per event) and schedules one
more after --lookahead plus an exponential delay of mean --mean, to another
partition with probability --remote, until --end of simulated time.

Every run must give the same digest (a hash of every process's events): the
command fails if one does not. --plot writes speed-up against workers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Lookahead = sim.Duration(lookahead.Nanoseconds()) * sim.Nanosecond
			cfg.Mean = sim.Duration(mean.Nanoseconds()) * sim.Nanosecond
			cfg.End = sim.Time(sim.Duration(end.Nanoseconds()) * sim.Nanosecond)
			if err := cfg.Validate(); err != nil {
				return Usagef("--%v", strings.TrimPrefix(err.Error(), "phold: "))
			}
			if len(workers) == 0 {
				workers = defaultWorkers(runtime.GOMAXPROCS(0))
			}
			for _, w := range workers {
				if w < 1 {
					return Usagef("--workers: %d must be at least 1", w)
				}
			}
			format := plotFormat
			if plotPath != "" && format == "" {
				format = strings.TrimPrefix(filepath.Ext(plotPath), ".")
			}
			if plotPath != "" && format != "png" && format != "svg" && format != "pdf" {
				return Usagef("--plot %s: format %q is not png, svg or pdf (set --plot-format)", plotPath, format)
			}
			rep := pholdReport{Config: cfg}
			for i, w := range workers {
				m, err := phold.New(cfg)
				if err != nil {
					return err
				}
				pool := par.NewPool(w)
				m.World().SetExec(pool.Exec)
				runtime.GC()
				start, cpu0 := time.Now(), cpuTime()
				err = m.World().Run()
				wall, cpu := time.Since(start), cpuTime()-cpu0
				pool.Close()
				if err != nil {
					return err
				}
				res := m.Result()
				if i == 0 {
					rep.Result = res
				} else if res != rep.Result {
					return fmt.Errorf("bench phold: %d workers gave %+v, %d gave %+v: the run depends on the worker count",
						workers[0], rep.Result, w, res)
				}
				rep.Runs = append(rep.Runs, scaling.Row{Workers: w, WallS: wall.Seconds(), CPUS: cpu.Seconds(), Events: res.Events})
				if !asJSON {
					fmt.Fprintf(cmd.ErrOrStderr(), "workers %d: %.2f s\n", w, wall.Seconds())
				}
			}
			scaling.Fill(rep.Runs)
			if plotPath != "" {
				title := fmt.Sprintf("PHOLD: %d partitions, lookahead %v, remote %.2f", cfg.Parts, lookahead, cfg.Remote)
				if err := atomicfile.Write(plotPath, func(w io.Writer) error { return scaling.WritePlot(w, rep.Runs, title, format) }); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				e := json.NewEncoder(out)
				e.SetIndent("", "  ")
				return e.Encode(rep)
			}
			r := rep.Result
			fmt.Fprintf(out, "PHOLD: %d partitions x %d processes x %d events, remote %.2f, lookahead %v, mean %v, work %d, end %v\n",
				cfg.Parts, cfg.LPs, cfg.Pending, cfg.Remote, lookahead, mean, cfg.Work, end)
			fmt.Fprintf(out, "%d events in %d windows (%.0f per window), simulated %v, digest %s (same for every worker count)\n",
				r.Events, r.Windows, float64(r.Events)/float64(max(r.Windows, 1)), r.End, r.Digest)
			scaling.WriteTable(out, rep.Runs)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	f.IntVar(&cfg.Parts, "parts", 32, "partitions (a replay has one per node)")
	f.IntVar(&cfg.LPs, "lps", 64, "processes per partition")
	f.IntVar(&cfg.Pending, "pending", 16, "events each process starts with")
	f.Float64Var(&cfg.Remote, "remote", 0.5, "probability that an event's successor goes to another partition")
	f.DurationVar(&lookahead, "lookahead", 250*time.Nanosecond, "least delay of every event (the cable plus switch delay in a replay)")
	f.DurationVar(&mean, "mean", 250*time.Nanosecond, "mean exponential delay on top of the lookahead")
	f.IntVar(&cfg.Work, "work", 500, "rounds of integer mixing per event (about 1 ns each)")
	f.DurationVar(&end, "end", 200*time.Microsecond, "simulated time to run")
	f.IntSliceVar(&workers, "workers", nil, "worker counts to run, in order (default 1, 2, 4, ... up to the CPUs)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&plotPath, "plot", "", "write speed-up against workers to this file")
	f.StringVar(&plotFormat, "plot-format", "", "plot format: png, svg or pdf (default: --plot's extension)")
	return cmd
}
