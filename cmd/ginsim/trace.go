package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/traces"
	"github.com/spf13/cobra"
)

func init() { Register("", newTraceCmd) }

func newTraceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "trace",
		Short: "Generate and inspect MoE routing traces (moe-trace JSON Lines)",
		Long: `A trace records which experts every token of every source rank selects, per
iteration and MoE layer, plus the model shape and the expert-parallel layout.
'ginsim replay' executes it as DeepEP or NCCL traffic on a modelled cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	c.AddCommand(newTraceGenCmd(), newTraceInspectCmd())
	return c
}

func newTraceGenCmd() *cobra.Command {
	var (
		model, routing, out, precision string
		cfg                            traces.GenConfig
	)
	c := &cobra.Command{
		Use:   "gen --model NAME --ep N --tokens N -o FILE",
		Short: "Generate a synthetic routing trace",
		Long: `Generate a routing trace with one of the distributions the MoE libraries
benchmark with:
  uniform      random top-k per token (DeepEP's low-latency test)
  grouped      DeepSeek group-limited routing (groups = nodes, top min(nodes,4));
               grouped:model uses the model's n_group/topk_group, grouped:G:M sets them
  hot:R        one hot rank receives R times the traffic of the others (hot:R@rank)
  zipf:S       power-law expert popularity with exponent S
  balanced     exactly equal load per expert
The output is gzip-compressed when FILE ends in .gz; "-o -" writes to stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := traces.ModelByName(model)
			if err != nil {
				return &UsageError{Err: fmt.Errorf("--model: %w", err)}
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
	f.IntVar(&cfg.TokensPerRank, "tokens", 0, "tokens per source rank and step")
	f.IntVar(&cfg.Experts, "experts", 0, "routed experts (default: the model's; DeepEP's LL test uses 288 for DeepSeek-V3)")
	f.IntVar(&cfg.TopK, "topk", 0, "experts per token (default: the model's)")
	f.StringVar(&routing, "routing", "uniform", "uniform | grouped[:model|:G:M] | hot:R[@rank] | zipf:S | balanced")
	f.IntVar(&cfg.Layers, "layers", 1, "MoE layers")
	f.IntVar(&cfg.Iterations, "iters", 1, "iterations")
	f.IntVar(&cfg.RanksPerNode, "ranks-per-node", 8, "GPUs per node")
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	f.Float64Var(&cfg.MaskFraction, "mask", 0, "fraction of selections masked to -1")
	f.BoolVar(&cfg.Weights, "weights", false, "emit top-k weights")
	f.BoolVar(&cfg.Counts, "counts", false, "emit per-expert counts records instead of exact routes")
	f.StringVar(&precision, "precision", "fp8", "dispatch dtype: fp8 or bf16")
	f.StringVarP(&out, "output", "o", "", "output file (.gz compresses; - for stdout)")
	for _, req := range []string{"model", "ep", "tokens"} {
		_ = c.MarkFlagRequired(req)
	}
	return c
}

func modelNames() string {
	var names []string
	for _, m := range traces.Models() {
		names = append(names, strings.ToLower(m.Name))
	}
	return strings.Join(names, ", ")
}

func newTraceInspectCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "inspect FILE|EXAMPLE",
		Short: "Print routing statistics of a trace: load per rank, fan-out per node, bytes per rank",
		Long: `Print routing statistics of a trace file or of an embedded example (` +
			strings.Join(traces.Examples(), ", ") + `): tokens and selections per step,
destination-rank load (min/mean/max, imbalance), mean distinct destination
nodes and ranks per token, and DeepEP LL/HT bytes per rank.`,
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
			return st.WriteTable(cmd.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
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
