package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/traces/sweep"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() {
	Register("", newSweepCmd)
	Register("sweep", newSweepMergeCmd)
	Register("sweep", newSweepPlotCmd)
}

type sweepFlags struct {
	example, out, shard string
	jobs                int
	quiet, print, list  bool
}

func newSweepCmd() *cobra.Command {
	var f sweepFlags
	c := &cobra.Command{
		Use:   "sweep [STUDY.yaml]",
		Short: "Run a what-if study: a grid or list of replays over settings, cluster fields and faults",
		Long: `Sweep runs every point of a study, each one replay, on all cores, and writes
one row per point to PREFIX.csv and PREFIX.jsonl (the full configuration,
the metrics, ginsim's version), each file written whole. A rerun skips the
points the output already holds, so an interrupted study resumes.

A study is YAML:

  name: gdaki-vs-proxy
  base:   {model: deepseek-v3, tokens: 32, cluster: h100-ib}   # every point
  grid:   {backend: [gdaki, proxy], ep: [8, 16, 32]}           # every combination
  list:   [{nics_per_gpu: 2, link_rate: 200Gb/s}, ...]         # points, crossed with grid

Keys are replay settings (trace, model, ep, tokens, routing, layers,
trace_seed, cluster, mode, backend, nvlink, rdma_only, sms, seed, ib_timeout) or cluster
fields by their YAML path (nics_per_gpu, link_rate, topology.kind,
faults.loss.host, faults.straggler.factor, ...; loss and corrupt set both
link classes). Built-in studies: ` + strings.Join(sweep.Examples(), ", ") + `.

--shard i/N runs the points whose index is i modulo N and writes
PREFIX.shard-i-of-N.*; inside a Slurm job array (SLURM_ARRAY_TASK_ID,
SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX,
and JOB_COMPLETIONS set in the manifest) the shard is taken from the
environment. 'ginsim sweep merge' joins the shards.`,
		Example: `  ginsim sweep --example gdaki-vs-proxy
  ginsim sweep --example dispatch-vs-loss --print > loss.yaml
  ginsim sweep loss.yaml -o results/loss --jobs 4
  ginsim sweep study.yaml --shard 0/2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runSweep(cmd, args, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.example, "example", "", "run a built-in study: "+strings.Join(sweep.Examples(), ", "))
	fl.BoolVar(&f.print, "print", false, "print the --example study's YAML instead of running it")
	fl.BoolVar(&f.list, "list", false, "list the built-in studies")
	fl.StringVarP(&f.out, "output", "o", "", "output `PREFIX`: PREFIX.csv and PREFIX.jsonl (default: the study's name)")
	fl.StringVar(&f.shard, "shard", "", "run shard `i/N` of the points (default: from Slurm's or Kubernetes' environment, else all)")
	fl.IntVar(&f.jobs, "jobs", 0, "points run at once (0: GOMAXPROCS); the rows do not depend on it")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	return c
}

// loadStudy reads STUDY.yaml or a built-in example; a bad study is a usage
// error (exit 2).
func loadStudy(args []string, example string) (*sweep.Study, error) {
	var st *sweep.Study
	var err error
	switch {
	case example != "" && len(args) > 0:
		return nil, Usagef("give a study file or --example, not both")
	case example != "":
		b, ok := sweep.Example(example)
		if !ok {
			return nil, Usagef("--example %q: want one of %v", example, sweep.Examples())
		}
		st, err = sweep.Parse(b, example+".yaml")
	case len(args) == 1:
		st, err = sweep.Load(args[0])
	default:
		return nil, Usagef("give a study file or --example (one of %v)", sweep.Examples())
	}
	var se *sweep.SpecError
	if errors.As(err, &se) || errors.Is(err, os.ErrNotExist) {
		return nil, &UsageError{Err: err}
	}
	return st, err
}

func runSweep(cmd *cobra.Command, args []string, f *sweepFlags) error {
	w := cmd.OutOrStdout()
	if f.list {
		for _, e := range sweep.Examples() {
			b, _ := sweep.Example(e)
			st, err := sweep.Parse(b, e+".yaml")
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%-18s %3d points  %s\n", e, len(st.Points), st.Description)
		}
		return nil
	}
	if f.print {
		b, ok := sweep.Example(f.example)
		if !ok {
			return Usagef("--print needs --example (one of %v)", sweep.Examples())
		}
		_, err := w.Write(b)
		return err
	}
	if f.jobs < 0 {
		return Usagef("--jobs %d must not be negative", f.jobs)
	}
	st, err := loadStudy(args, f.example)
	if err != nil {
		return err
	}
	var sh sweep.Shard
	if f.shard != "" {
		if sh, err = sweep.ParseShard(f.shard); err != nil {
			return Usagef("--shard: %v", err)
		}
	} else {
		var src string
		var ok bool
		sh, src, ok, err = sweep.ShardFromEnv(os.Getenv)
		if err != nil {
			return Usagef("shard from the environment: %v", err)
		}
		if ok {
			fmt.Fprintf(cmd.ErrOrStderr(), "sweep: shard %d/%d from the %s environment\n", sh.I, sh.N, src)
		}
	}
	prefix := f.out
	if prefix == "" {
		prefix = st.Name
	}
	prefix += sh.Suffix()
	if dir := filepath.Dir(prefix); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	jobs := f.jobs
	if jobs == 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	opt := sweep.Options{Prefix: prefix, Shard: sh, Jobs: jobs, Version: version, Checkpoint: 30 * time.Second}
	var bar *progressbar.ProgressBar
	if !f.quiet && isTTY(cmd.ErrOrStderr()) {
		opt.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
					progressbar.OptionSetDescription(st.Name), progressbar.OptionShowCount(),
					progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
			}
			_ = bar.Set(done)
		}
	}
	start := time.Now()
	res, err := sweep.Run(st, opt)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d points", st.Name, len(res.Rows))
	if sh.N > 1 {
		fmt.Fprintf(w, " (shard %d/%d of %d)", sh.I, sh.N, len(st.Points))
	}
	fmt.Fprintf(w, ", %d run, %d already in %s.jsonl; wrote %s.csv and %s.jsonl", res.Ran, res.Skipped, prefix, prefix, prefix)
	if !f.quiet {
		fmt.Fprintf(w, " in %.1f s", time.Since(start).Seconds())
	}
	fmt.Fprintln(w)
	if res.Failed > 0 {
		for _, r := range res.Rows {
			if r.Error != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "sweep: point %d failed: %s\n", r.Index, r.Error)
				break
			}
		}
		return fmt.Errorf("%d of %d points failed (their rows hold the error)", res.Failed, len(res.Rows))
	}
	return nil
}

func newSweepMergeCmd() *cobra.Command {
	var example, out string
	c := &cobra.Command{
		Use:   "merge [STUDY.yaml] SHARD.jsonl...",
		Short: "Join the outputs of a study's shards, checking every point is present exactly once",
		Long: `Merge reads the JSON Lines outputs of a study's shards and writes
PREFIX.csv and PREFIX.jsonl, the rows of every point in order: the same
files an unsharded run writes. It fails if a point is missing or present
twice, or if a row is not a point of the study as it stands.`,
		Example: `  ginsim sweep merge study.yaml study.shard-*-of-4.jsonl -o study
  ginsim sweep merge --example gdaki-vs-proxy gdaki-vs-proxy.shard-*.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var studyArgs []string
			if example == "" {
				studyArgs, args = args[:1], args[1:]
			}
			st, err := loadStudy(studyArgs, example)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return Usagef("give the shards' .jsonl outputs")
			}
			var shards [][]sweep.Row
			for _, a := range args {
				f, err := os.Open(a)
				if err != nil {
					return Usagef("%v", err)
				}
				rows, err := sweep.ReadJSONL(f, a)
				f.Close()
				if err != nil {
					return err
				}
				shards = append(shards, rows)
			}
			rows, err := sweep.Merge(st, shards, args)
			if err != nil {
				return err
			}
			if out == "" {
				out = st.Name
			}
			if err := sweep.WriteFiles(out, st.Axes, rows); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d points from %d shards; wrote %s.csv and %s.jsonl\n", st.Name, len(rows),
				len(args), out, out)
			return nil
		},
	}
	c.Flags().StringVar(&example, "example", "", "the shards ran a built-in study")
	c.Flags().StringVarP(&out, "output", "o", "", "output `PREFIX` (default: the study's name)")
	return c
}

func newSweepPlotCmd() *cobra.Command {
	var o sweep.PlotOptions
	var out string
	c := &cobra.Command{
		Use:   "plot RESULTS.csv -o FILE.png|svg --x COLUMN --y METRIC [--by COLUMN]",
		Short: "Plot a study's metric against one axis, one line per value of another",
		Long: `Plot draws METRIC against column X of a study's CSV, one line per value of
column BY (points sharing X and BY, such as seeds, are averaged; failed
points are left out). Metrics: ` + strings.Join(sweep.MetricNames(), ", ") + `.`,
		Example: `  ginsim sweep plot gdaki-vs-proxy.csv --x ep --y dispatch_us --by backend -o gdaki-vs-proxy.png
  ginsim sweep plot dispatch-vs-loss.csv --x loss --y dispatch_us --by ib_timeout --logy -o loss.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Format = strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), ".")
			if out == "" || !slices.Contains([]string{"png", "svg"}, o.Format) {
				return Usagef("-o %q: the file name must end in .png or .svg", out)
			}
			if o.X == "" || o.Y == "" {
				return Usagef("--x and --y are needed")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return Usagef("%v", err)
			}
			t, err := sweep.ReadCSV(f, args[0])
			f.Close()
			if err != nil {
				return Usagef("%v", err)
			}
			for _, c := range []string{o.X, o.Y, o.By} {
				if c != "" && t.Column(c) < 0 {
					return Usagef("column %q is not in %s (have %s)", c, args[0], strings.Join(t.Header, ", "))
				}
			}
			wt, err := sweep.Plot(t, o)
			if err != nil {
				return err
			}
			return atomicfile.Write(out, func(w io.Writer) error { _, err := wt.WriteTo(w); return err })
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.X, "x", "", "column on the horizontal axis")
	fl.StringVar(&o.Y, "y", "", "metric on the vertical axis")
	fl.StringVar(&o.By, "by", "", "column with one line per value")
	fl.BoolVar(&o.LogY, "logy", false, "log scale on the vertical axis")
	fl.StringVar(&o.Title, "title", "", "plot title (default: the columns)")
	fl.StringVarP(&out, "output", "o", "", "write the plot to `FILE`.png or .svg")
	return c
}
