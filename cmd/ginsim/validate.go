package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/validate/gpumicro"
)

func init() {
	Register("", newValidateCmd)
	Register("validate", newValidateGPUCmd)
}

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Compare the model with measurements taken on real hardware",
		Long: `Validate lines up measurements taken on real hardware with the same
measurements made on the model.`,
		Args: cobra.NoArgs,
	}
}

// defaultGPUMeasurement is the committed run on two H200s joined by
// NVLink that the nvlink.Config defaults were set from; its one-GPU rows
// repeat those of the runs the gpu.Config defaults were set from.
const defaultGPUMeasurement = "h200x2-2026-12-01.jsonl"

func newValidateGPUCmd() *cobra.Command {
	var (
		cluster string
		asJSON  bool
		allRuns bool
	)
	c := &cobra.Command{
		Use:   "gpu [FILE]",
		Short: "GPU latencies (validate/gpumicro) on hardware and on the model",
		Long: `Validate gpu reads the output of validate/gpumicro/gpumicro.cu (JSON Lines,
one measurement a line), makes the same measurements on one GPU of the
cluster's hardware profile (and, for the peer_ rows, on two GPUs of one
node over NVLink) and prints both with the model's error.

Without FILE it uses the run on two H200s the model's GPU and NVLink
defaults were set from (` + defaultGPUMeasurement + `). To measure your own GPU
(the peer_ rows need a second GPU it can reach over NVLink; ncclbar.cu's
nccl_ rows time NCCL's own LSA barrier on two GPUs, NCCL 2.28 or later):

  nvcc -O2 -std=c++17 -arch=sm_90 -o gpumicro validate/gpumicro/gpumicro.cu -lpthread
  nvcc -O2 -std=c++17 -arch=sm_90 -o ncclbar validate/gpumicro/ncclbar.cu -lnccl
  ./gpumicro > my-gpu.jsonl && NCCL_NVLS_ENABLE=0 ./ncclbar >> my-gpu.jsonl
  ginsim validate gpu my-gpu.jsonl`,
		Example: "  ginsim validate gpu\n  ginsim validate gpu --runs\n  ginsim validate gpu my-gpu.jsonl --cluster h800-cx7 --json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := machine.Resolve(cluster)
			if err != nil {
				return Usagef("--cluster: %v", err)
			}
			if allRuns {
				if len(args) > 0 {
					return Usagef("--runs compares the committed runs; it takes no FILE")
				}
				names, runs, err := gpumicro.Committed()
				if err != nil {
					return err
				}
				model, err := gpumicro.Model(spec)
				if err != nil {
					return err
				}
				return writeGPUSpreads(cmd.OutOrStdout(), names, spec.Profile, gpumicro.Spreads(runs, model), asJSON)
			}
			var hw *gpumicro.Run
			if len(args) == 0 {
				if hw, _, err = gpumicro.Measured(defaultGPUMeasurement); err != nil {
					return err
				}
			} else {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				hw, err = gpumicro.Parse(f, args[0])
				if err != nil {
					var pe *gpumicro.ParseError
					if errors.As(err, &pe) {
						return Usagef("%v", err)
					}
					return err
				}
			}
			model, err := gpumicro.Model(spec)
			if err != nil {
				return err
			}
			return writeGPUValidation(cmd.OutOrStdout(), hw, spec.Profile, gpumicro.Compare(hw, model), asJSON)
		},
	}
	fl := c.Flags()
	fl.StringVar(&cluster, "cluster", "h100-ib", "cluster preset or YAML file whose hardware profile is the model side")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	fl.BoolVar(&allRuns, "runs", false, "compare the model with every committed run: each measurement's median and range over the runs that have it")
	return c
}

type gpuSpreadRow struct {
	Name     string   `json:"name"`
	Runs     int      `json:"runs"`
	MedianNS float64  `json:"median_ns"`
	MinNS    float64  `json:"min_ns"`
	MaxNS    float64  `json:"max_ns"`
	ModelNS  *float64 `json:"model_ns"`
	ErrorPct *float64 `json:"error_pct"`
	Model    string   `json:"model_op,omitempty"`
}

func writeGPUSpreads(w io.Writer, names []string, profile string, rows []gpumicro.Spread, asJSON bool) error {
	if asJSON {
		out := struct {
			Runs    []string       `json:"runs"`
			Profile string         `json:"profile"`
			Rows    []gpuSpreadRow `json:"rows"`
		}{names, profile, nil}
		for _, r := range rows {
			row := gpuSpreadRow{Name: r.Name, Runs: r.Runs, MedianNS: r.Median, MinNS: r.Min, MaxNS: r.Max, Model: r.What}
			if r.Model != 0 {
				m, e := r.Model, math.Round(r.ErrPct()*10)/10
				row.ModelNS, row.ErrorPct = &m, &e
			}
			out.Rows = append(out.Rows, row)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "%d committed runs (%s)   model: profile %s\n\n", len(names), strings.Join(names, ", "), profile)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measurement\truns\tmedian\trange\tmodel\terror vs median")
	for _, r := range rows {
		model, e := "-", "-"
		if r.Model != 0 {
			model, e = fmt.Sprintf("%.1f ns", r.Model), fmt.Sprintf("%+.1f%%", r.ErrPct())
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f ns\t%.1f-%.1f\t%s\t%s\n", r.Name, r.Runs, r.Median, r.Min, r.Max, model, e)
	}
	return tw.Flush()
}

type gpuValidationRow struct {
	Name       string   `json:"name"`
	HardwareNS *float64 `json:"hardware_ns"`
	ModelNS    *float64 `json:"model_ns"`
	ErrorPct   *float64 `json:"error_pct"`
	Model      string   `json:"model_op,omitempty"`
	Hardware   string   `json:"hardware_op,omitempty"`
}

func writeGPUValidation(w io.Writer, hw *gpumicro.Run, profile string, rows []gpumicro.Row, asJSON bool) error {
	num := func(x float64) *float64 {
		if x == 0 || math.IsNaN(x) {
			return nil
		}
		return &x
	}
	if asJSON {
		out := struct {
			GPU     gpumicro.Device    `json:"hardware"`
			Profile string             `json:"profile"`
			Rows    []gpuValidationRow `json:"rows"`
		}{hw.Device, profile, nil}
		for _, r := range rows {
			out.Rows = append(out.Rows, gpuValidationRow{r.Name, num(r.Hardware), num(r.Model), num(math.Round(r.ErrPct()*10) / 10), r.What, r.Note})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "hardware: %s (%d SMs, %.2f GHz)   model: profile %s\n\n", hw.Device.GPU, hw.Device.SMs, hw.Device.SMClockGHz, profile)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measurement\thardware\tmodel\terror\tmodel operations")
	cell := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f ns", x)
	}
	for _, r := range rows {
		e := "-"
		if !math.IsNaN(r.ErrPct()) {
			e = fmt.Sprintf("%+.1f%%", r.ErrPct())
		}
		what := r.What
		if what == "" {
			what = "(no model counterpart)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, cell(r.Hardware), cell(r.Model), e, what)
	}
	return tw.Flush()
}
