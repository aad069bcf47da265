package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"text/tabwriter"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/validate/hw"
)

func init() { Register("validate", newValidateGinCmd) }

func newValidateGinCmd() *cobra.Command {
	var (
		programs                                          []string
		backend, results, lower, cluster, fabric, execBin string
		suite                                             string
		asJSON                                            bool
	)
	c := &cobra.Command{
		Use:   "gin --program FILE|DIR",
		Short: "GIN programs on real NCCL (through ginsim's plugin) and on the model",
		Long: `Validate gin runs gin/prog program files on the model's proxy backend and
lines them up with the same programs run on real NCCL 2.28.9 through
ginsim's GIN plugin (validate/hw/native): outcome agreement per program
(every op's status and value, final signals, counters and window
checksums) and the timings that are real on both.

--backend sim runs the model only. --backend hw also reads the device's
result files from --results DIR (CASE.FABRIC.rRANK.txt, as
validate/hw/native/run.sh writes them; default: the committed run).
--lower DIR writes the executor's op list of every program (CASE.ops) and
fabrics.txt (zero delay, and --cluster's link) for run.sh:

  ginsim validate gin --program validate/hw/testdata/programs --lower cases
  bash validate/hw/native/run.sh cases      # on the GPU machine
  ginsim validate gin --program validate/hw/testdata/programs --backend hw --results results

--suite conformance takes gin/verify's conformance tests instead of
program files: every test for the proxy backend under NCCL 2.28 that the
device harness can run (the others are listed with the reason), in
verify's window layout. --lower writes them for run.sh; --backend hw
judges the device's results (default: the committed run
` + "`" + `2026-12-02-h200-conformance` + "`" + `, or --results DIR) and the model's
(schedule 0) by each test's own rules:

  ginsim validate gin --suite conformance --lower cases
  ginsim validate gin --suite conformance --backend hw

On the GPU machine itself, --exec BIN runs each program there and then (BIN
is native/build.sh's output), two processes of GPU 0:

  bash validate/hw/native/build.sh bin
  ginsim validate gin --program validate/hw/testdata/programs --exec bin --results results`,
		Example: "  ginsim validate gin --program validate/hw/testdata/programs\n" +
			"  ginsim validate gin --program validate/hw/testdata/programs --backend hw --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if suite != "" {
				if suite != "conformance" {
					return Usagef("--suite: %q, want conformance", suite)
				}
				if len(programs) > 0 || execBin != "" {
					return Usagef("--suite: not with --program or --exec")
				}
				return runConformance(cmd.OutOrStdout(), backend, results, lower, fabric, asJSON)
			}
			if len(programs) == 0 {
				return Usagef("--program: a gin/prog file or a directory of them is required (or --suite conformance)")
			}
			if execBin != "" {
				backend = "hw"
			}
			if backend != "sim" && backend != "hw" {
				return Usagef("--backend: %q, want sim or hw", backend)
			}
			spec, err := machine.Resolve(cluster)
			if err != nil {
				return Usagef("--cluster: %v", err)
			}
			var cases []hw.Case
			names := map[string]string{}
			for _, p := range programs {
				cs, err := hw.Load(p)
				if err != nil {
					return Usagef("--program: %v", err)
				}
				for _, c := range cs {
					if prev, ok := names[c.Name]; ok {
						return Usagef("--program: %s and %s have one name, %s", prev, c.Path, c.Name)
					}
					names[c.Name] = c.Path
				}
				cases = append(cases, cs...)
			}
			if lower != "" {
				return writeLowered(cmd.OutOrStdout(), lower, cases, hw.FabricOf(spec))
			}
			var load deviceLoader
			source := results
			switch {
			case backend != "hw":
			case execBin != "":
				if _, err := os.Stat(filepath.Join(execBin, "ginexec")); err != nil {
					return Usagef("--exec: %v (build it there with validate/hw/native/build.sh %s)", err, execBin)
				}
				fab := hw.Zero
				switch fabric {
				case "zero":
				case spec.Name:
					fab = hw.FabricOf(spec)
				default:
					return Usagef("--fabric: %q; with --exec, zero or the cluster's name (%s)", fabric, spec.Name)
				}
				if results == "" {
					if results, err = os.MkdirTemp("", "ginsim-hw-"); err != nil {
						return err
					}
				}
				source = "this machine (results in " + results + ")"
				cfg := hw.ExecConfig{Bin: execBin, Dir: results, Fabric: fab}
				load = func(c hw.Case) (*hw.Device, error) { return hw.Exec(cfg, c) }
			case results == "":
				source = "committed run " + hw.DefaultRun
				fsys, err := hw.Measured(hw.DefaultRun)
				if err != nil {
					return err
				}
				load = func(c hw.Case) (*hw.Device, error) { return hw.LoadDevice(fsys, c.Name, fabric) }
			default:
				if st, err := os.Stat(results); err != nil || !st.IsDir() {
					return Usagef("--results: %s is not a directory", results)
				}
				fsys := os.DirFS(results)
				load = func(c hw.Case) (*hw.Device, error) { return hw.LoadDevice(fsys, c.Name, fabric) }
			}
			return runValidateGin(cmd.OutOrStdout(), cases, cluster, backend, source, fabric, load, asJSON)
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&programs, "program", nil, "gin/prog program file, or a directory of *.json program files (repeatable)")
	fl.StringVar(&suite, "suite", "", "conformance: gin/verify's tests that the device can run, judged by the tests' own rules")
	fl.StringVar(&backend, "backend", "sim", "sim (the model only) or hw (the model beside the device's results)")
	fl.StringVar(&results, "results", "", "directory of the device's result files (--backend hw; default: the committed run)")
	fl.StringVar(&lower, "lower", "", "write the executor's op lists and fabrics.txt into this directory and stop")
	fl.StringVar(&cluster, "cluster", "h100-ib", "cluster preset or YAML file: the model's hardware and the emulated link")
	fl.StringVar(&execBin, "exec", "", "on the GPU machine: run the programs now with native/build.sh's output in this directory (implies --backend hw; results go to --results or a temporary directory)")
	fl.StringVar(&fabric, "fabric", "zero", "which device run to compare: the emulated fabric's name in the result files")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

func writeLowered(w io.Writer, dir string, cases []hw.Case, fab hw.Fabric) error {
	return writeLoweredIn(w, dir, cases, []hw.Fabric{hw.Zero, fab}, hw.Layout{})
}

// writeLoweredIn writes each case's op list for layout l and fabrics.txt
// with one line per fabric.
func writeLoweredIn(w io.Writer, dir string, cases []hw.Case, fabs []hw.Fabric, l hw.Layout) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var skipped []string
	for _, c := range cases {
		ops, _, err := hw.LowerIn(c.File, l)
		var ue *hw.UnsupportedError
		if errors.As(err, &ue) {
			skipped = append(skipped, fmt.Sprintf("%s: %v", c.Path, err))
			continue
		}
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, c.Name+".ops"), func(f io.Writer) error {
			_, err := f.Write(ops)
			return err
		}); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s.ops\n", c.Name)
	}
	var fabrics string
	for _, fab := range fabs {
		fabrics += fab.Name + " " + fab.Env() + "\n"
	}
	if err := atomicfile.Write(filepath.Join(dir, "fabrics.txt"), func(f io.Writer) error {
		_, err := io.WriteString(f, fabrics)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "fabrics.txt: %s", strings.ReplaceAll(fabrics, "\n", "; "))
	fmt.Fprintln(w)
	for _, s := range skipped {
		fmt.Fprintf(w, "not run on the device: %s\n", s)
	}
	return nil
}

type ginCaseJSON struct {
	Program  string       `json:"program"`
	Status   string       `json:"status"` // agree, differ, model only, not run on the device
	Reason   string       `json:"reason,omitempty"`
	Diffs    []string     `json:"differences,omitempty"`
	Notes    []string     `json:"notes,omitempty"`
	Timings  []ginTimingJ `json:"timings,omitempty"`
	Finished []bool       `json:"model_finished,omitempty"`
}

// validateGinCase runs one program file on the model and, with backend
// hw, lines it up with its device result in fsys.
func validateGinCase(c hw.Case, cluster, backend string, load deviceLoader, source, fabric string) (ginCaseJSON, error) {
	row := ginCaseJSON{Program: c.Name}
	if _, err := hw.SetupOf(c.File); err != nil {
		var ue *hw.UnsupportedError
		if !errors.As(err, &ue) {
			return row, err
		}
		row.Status, row.Reason = "not run on the device", ue.Error()
		return row, nil
	}
	v := gin.V2_28 // the device runs NCCL 2.28.9
	if backend == "sim" && c.File.NCCL == "2.30" {
		v = gin.V2_30
	}
	model, err := hw.Model(c, cluster, v)
	switch {
	case err != nil:
		return row, fmt.Errorf("%s: %w", c.Path, err)
	case model.Err != "":
		row.Status, row.Reason, model = "model rejects it", model.Err, nil
	case backend == "sim":
		row.Status = "model only"
		for r := range hw.Ranks {
			row.Finished = append(row.Finished, model.Ranks[r].Finished)
		}
	}
	if backend == "sim" {
		return row, nil
	}
	dev, err := load(c)
	if errors.Is(err, fs.ErrNotExist) {
		row.Status, row.Reason = "no device result", fmt.Sprintf("no %s.%s.r*.txt in %s", c.Name, fabric, source)
		return row, nil
	}
	var ee *hw.EmptyError
	if errors.As(err, &ee) {
		row.Status, row.Reason = "device run failed", ee.Error()
		return row, nil
	}
	var pe *hw.ParseError
	if errors.As(err, &pe) {
		return row, Usagef("--results: %v", err)
	}
	if err != nil {
		return row, err
	}
	out, err := dev.Outcome(c)
	if err != nil {
		return row, Usagef("--results: %v", err)
	}
	row.Notes = out.Notes
	for r := range hw.Ranks {
		if !out.Ranks[r].Finished {
			row.Notes = append(row.Notes, fmt.Sprintf("rank %d did not finish on the device: %s", r, out.Ranks[r].Msg))
		}
	}
	if model != nil {
		row.Status = "agree"
		for _, d := range hw.Compare(model, out) {
			row.Status = "differ"
			row.Diffs = append(row.Diffs, d.String())
		}
	} else {
		row.Notes = append(row.Notes, "device outcome only")
	}
	for _, t := range hw.Timings(model, out) {
		row.Timings = append(row.Timings, ginTimingJ{t.Name, t.N, t.Model.Ns(), t.Device.Ns(), math.Round(t.Ratio()*100) / 100})
	}
	if wire, n := dev.Wire(); n > 0 {
		row.Timings = append(row.Timings, ginTimingJ{Name: "plugin post -> delivered (emulated wire)", N: n, DeviceNS: wire.Ns()})
	}
	return row, nil
}

type ginTimingJ struct {
	Name     string  `json:"name"`
	N        int     `json:"ops"`
	ModelNS  float64 `json:"model_ns,omitempty"`
	DeviceNS float64 `json:"device_ns"`
	Ratio    float64 `json:"device_over_model,omitempty"`
}

// deviceLoader gives a case's device run (fs.ErrNotExist: none).
type deviceLoader func(c hw.Case) (*hw.Device, error)

func runValidateGin(w io.Writer, cases []hw.Case, cluster, backend, source, fabric string, load deviceLoader, asJSON bool) error {
	var rows []ginCaseJSON
	for _, c := range cases {
		row, err := validateGinCase(c, cluster, backend, load, source, fabric)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Backend string        `json:"backend"`
			Cluster string        `json:"cluster"`
			Results string        `json:"results,omitempty"`
			Fabric  string        `json:"fabric,omitempty"`
			Cases   []ginCaseJSON `json:"programs"`
		}{backend, cluster, source, fabric, rows})
	}
	if backend == "hw" {
		fmt.Fprintf(w, "model: proxy backend, cluster %s, NCCL 2.28   device: %s, emulated fabric %q\n\n", cluster, source, fabric)
	} else {
		fmt.Fprintf(w, "model: proxy backend, cluster %s\n\n", cluster)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\toutcome\tdetail")
	for _, r := range rows {
		detail := r.Reason
		if r.Status == "model only" {
			detail = fmt.Sprintf("finished per rank: %v", r.Finished)
		}
		if len(r.Diffs) > 0 {
			detail = strings.Join(r.Diffs, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Program, r.Status, detail)
		for _, n := range r.Notes {
			fmt.Fprintf(tw, "\t\tnote: %s\n", n)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if backend != "hw" {
		return nil
	}
	fmt.Fprintln(w, "\ntimings, rank 0, medians")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\ttiming\tops\tmodel\tdevice\tdevice/model")
	for _, r := range rows {
		for _, t := range r.Timings {
			ratio := "-"
			if t.ModelNS > 0 {
				ratio = fmt.Sprintf("%.2f", t.Ratio)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Program, t.Name, t.N, ns(t.ModelNS), ns(t.DeviceNS), ratio)
		}
	}
	return tw.Flush()
}

func ns(x float64) string {
	if x == 0 {
		return "-"
	}
	if x >= 10000 {
		return fmt.Sprintf("%.1f us", x/1000)
	}
	return fmt.Sprintf("%.0f ns", x)
}
