package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad flags or arguments
)

// registration is one command constructor and the path of its parent.
type registration struct {
	parent string
	ctor   func() *cobra.Command
}

// registry holds the commands that files of this package register from
// their init functions.
var registry []registration

// Register adds a command to the CLI. parent is the space-separated path of
// the parent command below the root: "" for a top-level command such as
// replay, "bench" for a benchmark. ctor builds a fresh command each time the
// tree is built (tests build it once per run). A command file is then one
// file:
//
//	func init() { Register("bench", newBenchWriteLatCmd) }
//
// Return UsageError (or Usagef) from RunE for a bad argument found while
// running; any other error is a run failure (exit status 1).
func Register(parent string, ctor func() *cobra.Command) {
	registry = append(registry, registration{parent: parent, ctor: ctor})
}

// UsageError marks an error caused by the command line rather than by the
// run: execute prints it on one line and exits with status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// runError marks an error returned by a command's RunE, as opposed to one
// found by cobra while parsing the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }

func (e *runError) Unwrap() error { return e.err }

// newRoot builds the command tree: the root, the built-in parents (bench)
// and every registered command.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "ginsim",
		Short: "Simulate GPU-initiated networking (NCCL GIN) on a modelled GPU/NIC/fabric cluster",
		Long: `ginsim is a discrete-event simulator of GPU-initiated networking: CUDA kernels
issuing RDMA through NCCL GIN (GDAKI, proxy and LSA backends), with RDMA NIC
and switched-fabric models. Runs are deterministic for a given seed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a subcommand the root prints its help; stray arguments
		// are an unknown command.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	addProfileFlags(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })

	bench := &cobra.Command{
		Use:   "bench",
		Short: "Run micro-benchmarks of the simulator and of modelled operations",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return Usagef("unknown benchmark %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	root.AddCommand(bench)

	for _, r := range registry {
		parent := root
		if r.parent != "" {
			c, rest, err := root.Find(strings.Fields(r.parent))
			if err != nil || len(rest) > 0 || c == root {
				panic(fmt.Sprintf("ginsim: command registered under unknown parent %q", r.parent))
			}
			parent = c
		}
		parent.AddCommand(r.ctor())
	}
	wrapRunE(root)
	return root
}

// wrapRunE marks errors from every command's RunE as run errors and runs
// every command under the profiles its flags ask for.
func wrapRunE(c *cobra.Command) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := profiled(cmd, func() error { return f(cmd, args) }); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapRunE(sub)
	}
}

// execute runs root on args and maps the outcome to an exit status: errors
// from cobra's parsing and UsageErrors give 2, other errors from a command
// give 1. Either way one line "ginsim: reason" goes to stderr.
func execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
	var ue *UsageError
	var re *runError
	if errors.As(err, &ue) || !errors.As(err, &re) {
		hint := root.Name() + " --help"
		if cmd != nil {
			hint = cmd.CommandPath() + " --help"
		}
		fmt.Fprintf(stderr, "%s: %s (see '%s')\n", root.Name(), msg, hint)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", root.Name(), msg)
	return exitFailure
}
