package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/validate/hw"
)

func init() { Register("validate", newValidateGinCmd) }

func newValidateGinCmd() *cobra.Command {
	var (
		program, backend, results, lower, cluster string
		asJSON                                    bool
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
  ginsim validate gin --program validate/hw/testdata/programs --backend hw --results results`,
		Example: "  ginsim validate gin --program validate/hw/testdata/programs\n" +
			"  ginsim validate gin --program validate/hw/testdata/programs --backend hw --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if program == "" {
				return Usagef("--program: a gin/prog file or a directory of them is required")
			}
			if backend != "sim" && backend != "hw" {
				return Usagef("--backend: %q, want sim or hw", backend)
			}
			spec, err := machine.Resolve(cluster)
			if err != nil {
				return Usagef("--cluster: %v", err)
			}
			cases, err := hw.Load(program)
			if err != nil {
				return Usagef("--program: %v", err)
			}
			if lower != "" {
				return writeLowered(cmd.OutOrStdout(), lower, cases, hw.FabricOf(spec))
			}
			return runValidateGin(cmd.OutOrStdout(), cases, spec, backend, results, asJSON)
		},
	}
	fl := c.Flags()
	fl.StringVar(&program, "program", "", "gin/prog program file, or a directory of *.json program files")
	fl.StringVar(&backend, "backend", "sim", "sim (the model only) or hw (the model beside the device's results)")
	fl.StringVar(&results, "results", "", "directory of the device's result files (--backend hw; default: the committed run)")
	fl.StringVar(&lower, "lower", "", "write the executor's op lists and fabrics.txt into this directory and stop")
	fl.StringVar(&cluster, "cluster", "h100-ib", "cluster preset or YAML file: the model's hardware and the emulated link")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

func writeLowered(w io.Writer, dir string, cases []hw.Case, fab hw.Fabric) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var skipped []string
	for _, c := range cases {
		ops, _, err := hw.Lower(c.File)
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
	fabrics := "zero " + hw.Zero.Env() + "\n" + fab.Name + " " + fab.Env() + "\n"
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

func runValidateGin(w io.Writer, cases []hw.Case, spec machine.Spec, backend, results string, asJSON bool) error {
	return fmt.Errorf("validate gin: not implemented yet")
}
