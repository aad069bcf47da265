package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/prog"
	"github.com/ginsim/ginsim/gin/verify"
	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/internal/par"
)

func init() { Register("", newVerifyCmd) }

func newVerifyCmd() *cobra.Command {
	var (
		suite, program, backend, nccl, budget, mutant, test, schedule string
		seeds, exhaustive, maxSchedules, workers                      int
		asJSON, listMutants, anyOrder                                 bool
	)
	c := &cobra.Command{
		Use:   "verify",
		Short: "Check the GIN model against the semantics NCCL promises (conformance suite, mutants)",
		Long: `Verify runs the GIN conformance suite: one litmus program per guarantee,
usage rule and non-guarantee of the GIN semantics reference, on the GDAKI,
Proxy and LSA backends, under NCCL 2.28 and 2.30, over --seeds explored
schedules each (seeded poll phases, fabric jitter, loss, duplication and
corruption, proxy stalls, latency scaling, NVLink write jitter, and a
seeded order of the events of different components due at the same
instant).

--exhaustive[=K] replaces the seeded schedules by every order of
same-instant events that departs from the scheduling order at most K times
(default 1) on the unperturbed model, up to --max-schedules per test, and
reports how many schedules and distinct outcomes each test explored.

A guarantee passes when every outcome under every schedule is one the spec
allows; a usage rule when the violation is reported; a non-guarantee only
when some schedule produces the surprising outcome. Every failure is shrunk
to its smallest schedule and printed with the command that replays it.

--program FILE runs your own gin/prog program file instead: it fails when a
run reports an error (a usage rule broken, a deadlock) or when what its
read ops return depends on the schedule (reliance on an order GIN does not
promise); a failing program is also shrunk to FILE.min.json.

--mutant NAME switches on a deliberately broken model (--list-mutants): the
suite must then fail. Exit status: 0 all passed, 1 a test failed, 2 bad
input.`,
		Example: `  ginsim verify
  ginsim verify --backend proxy --nccl 2.30 --seeds 20 --json
  ginsim verify --program my-kernel.json --backend gdaki
  ginsim verify --list-mutants
  ginsim verify --mutant wait-strict
  ginsim verify --exhaustive=2 --test no-order-across-contexts
  ginsim verify --test put-signal-payload --backend gdaki --nccl 2.28 --schedule seed=3,faults=loss`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if listMutants {
				return printMutants(out, asJSON)
			}
			if suite != "conformance" {
				return Usagef("--suite %q: the only suite is conformance", suite)
			}
			if seeds < 1 || seeds > 10000 {
				return Usagef("--seeds %d: want 1..10000", seeds)
			}
			opt := verify.Options{Schedules: seeds, AnyOrder: anyOrder}
			if exhaustive < 0 || exhaustive > 100 {
				return Usagef("--exhaustive %d: want 1..100 deviations from the scheduling order", exhaustive)
			}
			if maxSchedules < 1 || maxSchedules > 1_000_000 {
				return Usagef("--max-schedules %d: want 1..1000000", maxSchedules)
			}
			opt.Exhaustive, opt.MaxSchedules = exhaustive, maxSchedules
			switch backend {
			case "all":
			case "gdaki", "proxy", "lsa":
				opt.Backends = []string{backend}
			default:
				return Usagef("--backend %q: want gdaki, proxy, lsa or all", backend)
			}
			switch nccl {
			case "all":
			case "2.28":
				opt.Versions = []gin.Version{gin.V2_28}
			case "2.30":
				opt.Versions = []gin.Version{gin.V2_30}
			default:
				return Usagef("--nccl %q: want 2.28, 2.30 or all", nccl)
			}
			if budget != "" {
				d, err := time.ParseDuration(budget)
				if err != nil || d <= 0 {
					return Usagef("--budget %q: want a positive duration such as 90s or 5m", budget)
				}
				deadline := time.Now().Add(d)
				opt.Stop = func() bool { return time.Now().After(deadline) }
			}
			if mutant != "" {
				m, ok := verify.MutantByName(mutant)
				if !ok {
					return Usagef("--mutant %q: not a mutant (see --list-mutants)", mutant)
				}
				opt.Mutant = &m
			}
			if test != "" {
				names := map[string]bool{}
				for _, t := range verify.Suite() {
					names[t.Name] = true
				}
				for _, n := range strings.Split(test, ",") {
					if !names[n] {
						return Usagef("--test %q: not a test of the conformance suite", n)
					}
					opt.Tests = append(opt.Tests, n)
				}
			}
			if schedule != "" {
				s, err := verify.ParseSchedule(schedule)
				if err != nil {
					return Usagef("--schedule: %v", err)
				}
				opt.Schedule = &s
			}
			if program != "" {
				f, err := readProgram(program)
				if err != nil {
					return &UsageError{Err: err}
				}
				if len(opt.Versions) == 1 && opt.Versions[0].String() != f.NCCL {
					return Usagef("--nccl %s: %s is a program for NCCL %s", nccl, program, f.NCCL)
				}
				opt.Program, opt.ProgramName = f, program
			}
			if workers < 0 {
				return Usagef("--workers: %d must not be negative", workers)
			}
			if workers != 1 {
				pool := par.NewPool(workers) // 0: every core
				defer pool.Close()
				opt.Exec = pool.Exec
			}
			rep := verify.NewRunner(opt).Run()
			if len(rep.Tests) == 0 && !rep.Stopped {
				return Usagef("no test applies to --backend %s --nccl %s", backend, nccl)
			}
			if program != "" {
				for _, r := range rep.Tests {
					if r.Shrunk != nil {
						min := strings.TrimSuffix(program, ".json") + ".min.json"
						b, err := prog.Encode(r.Shrunk)
						if err != nil {
							return err
						}
						if err := atomicfile.Write(min, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
							return err
						}
						fmt.Fprintf(cmd.ErrOrStderr(), "shrunk failing program written to %s\n", min)
						break
					}
				}
			}
			if err := printReport(out, rep, asJSON); err != nil {
				return err
			}
			switch {
			case rep.Failed > 0 && opt.Mutant != nil:
				return fmt.Errorf("mutant %s caught: %d of %d tests failed", opt.Mutant.Name, rep.Failed, len(rep.Tests))
			case rep.Failed > 0:
				return fmt.Errorf("%d of %d tests failed", rep.Failed, len(rep.Tests))
			case opt.Mutant != nil:
				return fmt.Errorf("mutant %s survived all %d tests: the suite does not check %q", opt.Mutant.Name, len(rep.Tests), opt.Mutant.Breaks)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&suite, "suite", "conformance", "test suite to run")
	f.StringVar(&program, "program", "", "check this gin/prog program file instead of the suite")
	f.StringVar(&backend, "backend", "all", "gdaki, proxy, lsa or all")
	f.StringVar(&nccl, "nccl", "all", "NCCL behaviour profile: 2.28, 2.30 or all")
	f.IntVar(&seeds, "seeds", 8, "explored schedules per test, backend and version")
	f.IntVar(&workers, "workers", 0, "runs (test, backend, version) at once on N goroutines (0: every core); the report does not depend on it")
	f.StringVar(&budget, "budget", "", "stop starting new runs after this wall-clock duration (e.g. 2m)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&listMutants, "list-mutants", false, "list the mutants and exit")
	f.StringVar(&mutant, "mutant", "", "switch on this mutant (the suite must fail)")
	f.StringVar(&test, "test", "", "run only these tests (comma-separated names)")
	f.StringVar(&schedule, "schedule", "", "run only this schedule, as printed in a replay command (seed=N[,faults=K][,stall=N][,poll=N][,ties=N|,choices=I.J...])")
	f.IntVar(&exhaustive, "exhaustive", 0, "enumerate every same-instant order with at most K deviations (--exhaustive alone: K=1)")
	f.Lookup("exhaustive").NoOptDefVal = "1"
	f.IntVar(&maxSchedules, "max-schedules", 5000, "with --exhaustive: most schedules per test, backend and version")
	f.BoolVar(&anyOrder, "any-order", false, "let tie perturbations reorder even one component's same-instant events (diagnostic: may break orders the hardware guarantees)")
	return c
}

// readProgram reads and decodes a program file, with the file name and a
// line:column for JSON syntax errors.
func readProgram(path string) (*prog.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--program: %w", err)
	}
	var any any
	if err := json.Unmarshal(data, &any); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, max(se.Offset-1, 0)) // Offset is just past the bad byte
			return nil, fmt.Errorf("%s:%d:%d: %v", path, line, col, err)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	f, err := prog.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return f, nil
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func printMutants(w io.Writer, asJSON bool) error {
	ms := verify.Mutants()
	if asJSON {
		type row struct {
			Name   string `json:"name"`
			Where  string `json:"where"`
			Breaks string `json:"breaks"`
		}
		var rows []row
		for _, m := range ms {
			rows = append(rows, row{m.Name, m.Where, m.Breaks})
		}
		e := json.NewEncoder(w)
		e.SetIndent("", " ")
		return e.Encode(map[string]any{"mutants": rows})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tWHERE\tBREAKS")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, m.Where, m.Breaks)
	}
	return tw.Flush()
}

func printReport(w io.Writer, rep *verify.Report, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", " ")
		return e.Encode(rep)
	}
	for _, r := range rep.Tests {
		fmt.Fprintln(w, r.String())
	}
	fmt.Fprintf(w, "%d passed, %d failed", rep.Passed, rep.Failed)
	if rep.Stopped {
		fmt.Fprint(w, " (budget spent: the rest did not run)")
	}
	fmt.Fprintln(w)
	return nil
}
