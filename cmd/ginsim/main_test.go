package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ginsim": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the golden scripts in testdata/*.txtar against the
// ginsim binary. Update them with: go test ./cmd/ginsim -run Scripts -update
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata",
		UpdateScripts: *update,
	})
}

// TestEveryCommandHasHelp checks that every command in the tree answers
// --help with its own usage and exit status 0.
func TestEveryCommandHasHelp(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		t.Run(c.CommandPath(), func(t *testing.T) {
			if c.Short == "" {
				t.Errorf("%s has no Short description", c.CommandPath())
			}
			args := append(pathArgs(c), "--help")
			var out, errOut stringWriter
			if code := run(args, &out, &errOut); code != exitOK {
				t.Fatalf("ginsim %v: exit %d, stderr %q", args, code, errOut)
			}
			if !contains(string(out), "Usage:") || !contains(string(out), c.CommandPath()) {
				t.Fatalf("ginsim %v printed no usage:\n%s", args, out)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

func TestRegisterUnknownParentPanics(t *testing.T) {
	saved := registry
	defer func() { registry = saved }()
	Register("no such parent", func() *cobra.Command { return &cobra.Command{Use: "x"} })
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("newRoot accepted a command under an unknown parent")
		}
	}()
	newRoot()
}

func TestExitStatuses(t *testing.T) {
	saved := registry
	defer func() { registry = saved }()
	Register("", func() *cobra.Command {
		return &cobra.Command{Use: "fail", Short: "fail", RunE: func(*cobra.Command, []string) error {
			return os.ErrNotExist
		}}
	})
	var out, errOut stringWriter
	if code := run([]string{"fail"}, &out, &errOut); code != exitFailure {
		t.Fatalf("run failure: exit %d, want %d", code, exitFailure)
	}
	if string(errOut) != "ginsim: file does not exist\n" {
		t.Fatalf("stderr %q", errOut)
	}
}

func pathArgs(c *cobra.Command) []string {
	var args []string
	for ; c.HasParent(); c = c.Parent() {
		args = append([]string{c.Name()}, args...)
	}
	return args
}

type stringWriter []byte

func (w *stringWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"nope"},
		{"version", "extra"},
		{"bench", "nope"},
		{"bench", "kernel", "--events=lots"},
		{"bench", "kernel", "--pending", "0"},
		{"bench", "kernel", "--events", "0"},
		{"bench", "kernel", "stray"},
		{"validate", "verbs"}, // no libibverbs half, or no RDMA device: exit 2 either way
		{"validate", "verbs", "--case", "read_lat"},
		{"bench", "atomic_lat", "--sizes", "64"},
	} {
		var out, errOut stringWriter
		code := run(args, &out, &errOut)
		if code != exitUsage {
			t.Errorf("ginsim %v: exit %d, want %d", args, code, exitUsage)
		}
		if n := len(errOut); n == 0 || errOut[n-1] != '\n' || contains(string(errOut[:n-1]), "\n") {
			t.Errorf("ginsim %v: stderr %q is not one line", args, errOut)
		}
		if len(out) != 0 {
			t.Errorf("ginsim %v: wrote %q to stdout", args, out)
		}
	}
}
