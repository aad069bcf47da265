package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/importer"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/spf13/cobra"
)

func init() { Register("", newTraceCmd) }

func newTraceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "trace",
		Short: "Generate and inspect MoE routing traces (moe-trace JSON Lines)",
		Long: `A trace records which experts every token of every source rank selects, per
iteration and MoE layer, plus the model shape and the expert-parallel layout.
'ginsim replay' executes it as DeepEP or NCCL traffic on a modelled cluster.
'trace import' builds one from topk_idx tensors dumped from your own model.
The format, field by field: docs/trace-format.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	c.AddCommand(newTraceGenCmd(), newTraceImportCmd(), newTraceInspectCmd())
	return c
}

func newTraceGenCmd() *cobra.Command {
	var (
		model, routing, out, precision string
		cfg                            traces.GenConfig
		inspectOnly                    bool
		countsFor                      string
	)
	c := &cobra.Command{
		Use:   "gen --model NAME --ep N --num-tokens N -o FILE",
		Short: "Generate a synthetic routing trace",
		Long: `Generate a routing trace with one of the distributions the MoE libraries
benchmark with:
  uniform      random top-k per token (DeepEP's low-latency test)
  grouped      DeepSeek group-limited routing (groups = nodes, top min(nodes,4));
               grouped:model uses the model's n_group/topk_group, grouped:G:M sets them
  hot:R        one hot rank receives R times the traffic of the others (hot:R@rank)
  hot-experts:N:R
               N hot experts (chosen at random per layer) each receive about R
               times the traffic of any other expert
  zipf:S       power-law expert popularity with exponent S
  balanced     exactly equal load per expert
--placement eplb with --redundant-experts N places each layer's experts and N
replicas of the busiest ones as DeepSeek's EPLB would, given this trace's load
(the best case for a static placement); every token keeps its experts, and each
source rank spreads an expert's tokens round-robin over the replicas.
The output is gzip-compressed when FILE ends in .gz; "-o -" writes to stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := traces.ModelByName(model)
			if err != nil {
				return &UsageError{Err: fmt.Errorf("--model: %w", err)}
			}
			if inspectOnly && countsFor == "" {
				countsFor = countsInspect
			}
			if err := checkGenFlags(&cfg, countsFor); err != nil {
				return err
			}
			if _, err := traces.ParseRouting(routing); err != nil {
				return &UsageError{Err: fmt.Errorf("--routing: %w", err)}
			}
			p, err := traces.ParsePrecision(precision)
			if err != nil {
				return &UsageError{Err: fmt.Errorf("--precision: %w", err)}
			}
			if out == "" {
				return Usagef("-o FILE is required")
			}
			cfg.Model, cfg.Routing, cfg.Precision = m, routing, p
			t, err := traces.Generate(cfg)
			if err != nil {
				return &UsageError{Err: err}
			}
			return atomicfile.Write(out, func(w io.Writer) error {
				return t.Write(w, strings.HasSuffix(out, ".gz"))
			})
		},
	}
	f := c.Flags()
	f.StringVar(&model, "model", "", "model preset: "+modelNames())
	f.IntVar(&cfg.EP, "ep", 0, "expert-parallel ranks")
	f.IntVar(&cfg.TokensPerRank, "num-tokens", 0, "tokens per source rank and step (DeepEP's --num-tokens; alias --tokens)")
	f.IntVar(&cfg.Hidden, "hidden", 0, "hidden size (default: the model's; DeepEP's --hidden)")
	f.IntVar(&cfg.Experts, "num-experts", 0, "routed experts (default: the model's; DeepEP's LL test uses 288 for DeepSeek-V3; alias --experts)")
	f.IntVar(&cfg.TopK, "num-topk", 0, "experts per token (default: the model's; alias --topk)")
	f.StringVar(&routing, "routing", "uniform", "uniform | grouped[:model|:G:M] | hot:R[@rank] | hot-experts:N:R | zipf:S | balanced")
	f.IntVar(&cfg.Layers, "layers", 1, "MoE layers")
	f.IntVar(&cfg.Iterations, "iters", 1, "iterations")
	f.IntVar(&cfg.RanksPerNode, "ranks-per-node", 8, "GPUs per node")
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	f.Float64Var(&cfg.MaskFraction, "mask", 0, "fraction of selections masked to -1")
	f.BoolVar(&cfg.Weights, "weights", false, "emit top-k weights")
	f.BoolVar(&cfg.Counts, "counts", false, "emit per-expert counts records instead of exact routes (with --for: only replay --backend nccl and trace inspect read them)")
	f.StringVar(&countsFor, "for", "", "with --counts, what will read the trace: nccl (replay --backend nccl) or inspect (trace inspect); ll, ncclep, ht and v2 are refused, as they need route records")
	f.BoolVar(&inspectOnly, "inspect-only", false, "--for inspect")
	_ = f.MarkHidden("inspect-only")
	f.StringVar(&precision, "precision", "fp8", "dispatch dtype: fp8 or bf16")
	f.IntVar(&cfg.RedundantExperts, "redundant-experts", 0, "extra expert replica slots (needs --placement eplb)")
	f.StringVar(&cfg.Placement, "placement", traces.PlacementContiguous, "expert placement: contiguous, or eplb (per layer, replicate and pack experts by this trace's load; writes placement records)")
	f.StringVarP(&out, "output", "o", "", "output file (.gz compresses; - for stdout)")
	for _, req := range []string{"model", "ep"} {
		_ = c.MarkFlagRequired(req)
	}
	addAliases(c, "num-tokens", "tokens")
	addAliases(c, "num-experts", "experts")
	addAliases(c, "num-topk", "topk")
	return c
}

// addAliases registers hidden synonyms of flag name on c: they set the same
// value. A required flag must be checked by value, not with
// MarkFlagRequired, since cobra would not count its aliases.
func addAliases(c *cobra.Command, name string, aliases ...string) {
	orig := c.Flags().Lookup(name)
	if orig == nil {
		panic("ginsim: alias of unknown flag --" + name)
	}
	for _, a := range aliases {
		f := *orig
		f.Name, f.Shorthand, f.Hidden = a, "", true
		f.Usage = "alias of --" + name
		c.Flags().AddFlag(&f)
	}
}

// countsInspect is the --for of a trace meant for 'ginsim trace inspect'.
const countsInspect = "inspect"

// checkCountsFor says whether a trace of counts records suits its reader
// (--for): replay --backend nccl (the all-to-all-v, whose sizes are the
// per-(source, expert) counts) and trace inspect read counts; the GIN
// kernels (ll, ncclep, ht, v2) send per token in token order, chunk tokens
// per node or dedup them per rank, so they need route records.
func checkCountsFor(counts bool, reader string) error {
	readers := replay.BackendNCCL + " (replay --backend nccl) or " + countsInspect + " (trace inspect)"
	switch {
	case reader == countsInspect, reader == replay.BackendNCCL:
		return nil
	case reader == "":
		if counts {
			return Usagef("--counts: say what reads the trace with --for: %s; ll, ncclep, ht and v2 need route records (see docs/trace-format.md)", readers)
		}
		return nil
	case slicesContains(replay.Modes, reader):
		if counts {
			return Usagef("--counts --for %s: replay --mode %s needs each token's experts (route records), which counts records do not keep; "+
				"drop --counts, or use --for %s", reader, reader, readers)
		}
		return nil
	}
	return Usagef("--for %q: want %s, %s or a replay mode (%v)", reader, replay.BackendNCCL, countsInspect, replay.Modes)
}

// checkGenFlags rejects, as usage errors, values that GenConfig would read
// as "default" or that make a trace nothing can replay.
func checkGenFlags(cfg *traces.GenConfig, countsFor string) error {
	switch {
	case cfg.EP < 1:
		return Usagef("--ep %d: want at least 1 rank", cfg.EP)
	case cfg.TokensPerRank < 1:
		return Usagef("--num-tokens %d: want at least 1 token per rank (replay needs tokens to send)", cfg.TokensPerRank)
	case cfg.Hidden < 0:
		return Usagef("--hidden %d must not be negative (0: the model's)", cfg.Hidden)
	case cfg.Layers < 1:
		return Usagef("--layers %d: want at least 1", cfg.Layers)
	case cfg.Iterations < 1:
		return Usagef("--iters %d: want at least 1", cfg.Iterations)
	case cfg.RanksPerNode < 1:
		return Usagef("--ranks-per-node %d: want at least 1", cfg.RanksPerNode)
	case cfg.Experts < 0:
		return Usagef("--num-experts %d must not be negative (0: the model's)", cfg.Experts)
	case cfg.TopK < 0:
		return Usagef("--num-topk %d must not be negative (0: the model's)", cfg.TopK)
	case cfg.Placement != traces.PlacementContiguous && cfg.Placement != traces.PlacementEPLB:
		return Usagef("--placement %q: want %s or %s", cfg.Placement, traces.PlacementContiguous, traces.PlacementEPLB)
	case cfg.RedundantExperts < 0:
		return Usagef("--redundant-experts %d must not be negative", cfg.RedundantExperts)
	case cfg.RedundantExperts > 0 && cfg.Placement != traces.PlacementEPLB:
		return Usagef("--redundant-experts %d: add --placement eplb, which decides what to replicate and where", cfg.RedundantExperts)
	}
	return checkCountsFor(cfg.Counts, countsFor)
}

func modelNames() string {
	var names []string
	for _, m := range traces.Models() {
		names = append(names, strings.ToLower(m.Name))
	}
	return strings.Join(names, ", ")
}

func newTraceInspectCmd() *cobra.Command {
	var (
		asJSON, perRank bool
		topExperts      int
	)
	c := &cobra.Command{
		Use:   "inspect FILE|EXAMPLE",
		Short: "Print routing statistics of a trace: load per rank and expert, fan-out per node, bytes per rank",
		Long: `Print routing statistics of a trace file or of an embedded example (` +
			strings.Join(traces.Examples(), ", ") + `): tokens and selections per step,
destination-rank load (selections received: min/mean, nearest-rank p50/p90/p99,
max, imbalance = max/mean), mean distinct destination nodes and ranks per token,
and DeepEP LL/HT bytes sent per source rank (mean).
--per-rank adds every rank's receive side (selections, distinct tokens, LL
dispatch bytes in, LL combine bytes out); --top-experts N the N busiest expert
slots per step. --json has all of it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTrace(args[0])
			if err != nil {
				return err
			}
			st := traces.Inspect(t)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			if topExperts < 0 {
				return Usagef("--top-experts %d must not be negative", topExperts)
			}
			w := cmd.OutOrStdout()
			if err := st.WriteTable(w); err != nil {
				return err
			}
			if perRank {
				fmt.Fprintln(w, "\nreceive side per rank:")
				if err := st.WriteRanks(w); err != nil {
					return err
				}
			}
			if topExperts > 0 {
				fmt.Fprintf(w, "\nbusiest %d expert slots (x mean: selections over the mean per slot):\n", topExperts)
				return st.WriteTopExperts(w, topExperts)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	c.Flags().BoolVar(&perRank, "per-rank", false, "print every rank's receive side")
	c.Flags().IntVar(&topExperts, "top-experts", 0, "print the N busiest expert slots per step")
	return c
}

// openTrace opens a trace file, or an embedded example by name.
func openTrace(name string) (*traces.Trace, error) {
	for _, ex := range traces.Examples() {
		if name == ex || name+".jsonl.gz" == ex {
			return traces.OpenExample(ex)
		}
	}
	return traces.Read(name)
}

func newTraceImportCmd() *cobra.Command {
	var (
		model, precision, out, phase string
		placement                    string
		hidden, experts, firstLayer  int
		opt                          importer.Options
	)
	c := &cobra.Command{
		Use:   "import FILE... --model NAME --ep N -o OUT",
		Short: "Build a trace from topk_idx tensors dumped from a model (.npy, .npz, .safetensors, .csv)",
		Long: `Build a moe-trace from the routing of your own model run: per-layer topk_idx
tensors (optional topk_weights) in .npy, .npz, .safetensors or .csv files.

Index tensors are named ...topk_idx or ...topk_ids (a .npy file by its file
name), integer dtypes of any width and byte order, C or Fortran order, shape
[tokens, top_k] or [layers, tokens, top_k]; -1 masks a selection. The layer
comes from "layer<N>"/"layers.<N>" in the name (else --first-layer), the
iteration from "iter<N>", the rank from "rank<N>" (per-rank dumps); without a
rank the rows are one batch split over --ep ranks in order. Weights are the
tensor of the same name ending in topk_weights. CSV: a header line with
optional iter, layer, rank columns, then topk_idx_* (and topk_weights_*)
columns, one line per token.

The format and a PyTorch snippet that dumps topk_idx: docs/trace-format.md.`,
		Example: `  ginsim trace import routing.npz --model deepseek-v3 --ep 16 -o mine.jsonl.gz
  ginsim trace import layers.3.topk_idx.npy layers.3.topk_weights.npy --model qwen3-30b-a3b --ep 8 -o q.jsonl
  ginsim trace import dump.csv --model my-moe --hidden 4096 --num-experts 64 --ep 8 -o m.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return Usagef("-o FILE is required")
			}
			if opt.EP <= 0 {
				return Usagef("--ep %d: want at least 1", opt.EP)
			}
			if opt.RanksPerNode <= 0 {
				return Usagef("--ranks-per-node %d: want at least 1", opt.RanksPerNode)
			}
			opt.RanksPerNode = min(opt.RanksPerNode, opt.EP)
			p, err := traces.ParsePrecision(precision)
			if err != nil {
				return &UsageError{Err: fmt.Errorf("--precision: %w", err)}
			}
			opt.Precision, opt.Phase = p, phase
			if m, err := traces.ModelByName(model); err == nil {
				opt.Model, opt.HasLayers, opt.FirstLayer = traces.HeaderModelFor(m), true, m.FirstMoELayer
				opt.Model.TopK = 0
			} else if hidden == 0 || experts == 0 {
				return Usagef("--model %q is not a preset (%s): give --hidden and --num-experts", model, modelNames())
			} else {
				opt.Model = traces.HeaderModel{Name: model}
			}
			if cmd.Flags().Changed("first-layer") {
				opt.FirstLayer = firstLayer
			}
			if hidden != 0 {
				opt.Model.Hidden = hidden
			}
			if experts != 0 {
				opt.Model.NumExperts = experts
				if g := opt.Model.NGroup; g > 1 && experts%g != 0 {
					opt.Model.NGroup, opt.Model.TopKGroup = 0, 0
				}
			}
			if opt.Model.Hidden <= 0 || opt.Model.NumExperts <= 0 {
				return Usagef("--hidden %d and --num-experts %d must be positive", opt.Model.Hidden, opt.Model.NumExperts)
			}
			if opt.FirstLayer < 0 {
				return Usagef("--first-layer %d must not be negative", opt.FirstLayer)
			}
			switch {
			case placement != traces.PlacementContiguous && placement != traces.PlacementEPLB:
				return Usagef("--placement %q: want %s or %s", placement, traces.PlacementContiguous, traces.PlacementEPLB)
			case opt.RedundantExperts < 0:
				return Usagef("--redundant-experts %d must not be negative", opt.RedundantExperts)
			case opt.RedundantExperts > 0 && placement != traces.PlacementEPLB:
				return Usagef("--redundant-experts %d: add --placement eplb, which decides what to replicate and where", opt.RedundantExperts)
			}
			opt.EPLB = placement == traces.PlacementEPLB
			t, err := importer.Load(args, opt)
			if err != nil {
				return &UsageError{Err: err}
			}
			return atomicfile.Write(out, func(w io.Writer) error {
				return t.Write(w, strings.HasSuffix(out, ".gz"))
			})
		},
	}
	f := c.Flags()
	f.StringVar(&model, "model", "", "model preset ("+modelNames()+") or a name for --hidden/--num-experts")
	f.IntVar(&hidden, "hidden", 0, "hidden size (default: the preset's)")
	f.IntVar(&experts, "num-experts", 0, "routed experts (default: the preset's)")
	f.IntVar(&opt.EP, "ep", 0, "expert-parallel ranks")
	f.IntVar(&opt.RanksPerNode, "ranks-per-node", 8, "GPUs per node (capped at --ep); must match the replay cluster")
	f.IntVar(&firstLayer, "first-layer", 0, "layer of a stacked tensor's first entry (default: the preset's first MoE layer, else 0)")
	f.StringVar(&precision, "precision", "fp8", "dispatch dtype: fp8 or bf16")
	f.StringVar(&phase, "phase", "decode", "header phase: decode, prefill or training")
	f.IntVar(&opt.RedundantExperts, "redundant-experts", 0, "extra expert replica slots (needs --placement eplb)")
	f.StringVar(&placement, "placement", traces.PlacementContiguous, "expert placement: contiguous, or eplb (per layer, replicate and pack experts by the imported load)")
	f.StringVarP(&out, "output", "o", "", "output file (.gz compresses; - for stdout)")
	for _, req := range []string{"model", "ep"} {
		_ = c.MarkFlagRequired(req)
	}
	return c
}
