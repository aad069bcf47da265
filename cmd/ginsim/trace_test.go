package main

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestImportScripts runs testdata/import/*.txtar with $FIXTURES set to the
// importer's NumPy-written fixtures (traces/importer/testdata).
func TestImportScripts(t *testing.T) {
	fixtures, err := filepath.Abs("../../traces/importer/testdata")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/import",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("FIXTURES", fixtures)
			return nil
		},
	})
}

// TestTraceExitStatuses checks exit 2 for bad input to trace gen and trace
// import, and 0 for good input.
func TestTraceExitStatuses(t *testing.T) {
	dir := t.TempDir()
	fx := "../../traces/importer/testdata/"
	out := filepath.Join(dir, "t.jsonl")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"trace", "import", fx + "routing.npz", "--model", "deepseek-v3", "--ep", "16", "-o", out}, exitOK},
		{[]string{"trace", "import", fx + "bad_range_topk_idx.npy", "--model", "deepseek-v3", "--num-experts", "16", "--ep", "2", "-o", out}, exitUsage},
		{[]string{"trace", "import", fx + "nope.npy", "--model", "deepseek-v3", "--ep", "16", "-o", out}, exitUsage},
		{[]string{"trace", "import", fx + "routing.npz", "--model", "mine", "--ep", "2", "-o", out}, exitUsage},
		{[]string{"trace", "import", fx + "routing.npz", "--model", "deepseek-v3", "--ep", "0", "-o", out}, exitUsage},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "16", "--tokens", "0", "-o", out}, exitUsage},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "0", "--tokens", "8", "-o", out}, exitUsage},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "16", "--tokens", "8", "--layers", "0", "-o", out}, exitUsage},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "16", "--tokens", "8", "--counts", "-o", out}, exitUsage},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "16", "--tokens", "8", "--counts", "--inspect-only", "-o", out}, exitOK},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "16", "--tokens", "8", "--counts", "--for", "nccl", "-o", out}, exitOK},
		{[]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "16", "--tokens", "8", "--counts", "--for", "v2", "-o", out}, exitUsage},
		{[]string{"replay", out, "--mode", "v2"}, exitUsage},
	} {
		var o, e stringWriter
		if code := run(tc.args, &o, &e); code != tc.want {
			t.Errorf("ginsim %v: exit %d, want %d (stderr %q)", tc.args, code, tc.want, e)
		}
	}
}

// TestFlagAliases checks that the old flag names set the same value as the
// new ones and are hidden from help.
func TestFlagAliases(t *testing.T) {
	root := newRoot()
	for _, tc := range []struct {
		path         []string
		name, alias  string
		value, other string
	}{
		{[]string{"trace", "gen"}, "num-tokens", "tokens", "7", "9"},
		{[]string{"trace", "gen"}, "num-experts", "experts", "64", "32"},
		{[]string{"trace", "gen"}, "num-topk", "topk", "4", "2"},
		{[]string{"bench", "put"}, "cluster", "profile", "h800-cx7", "h100-ib"},
	} {
		c, _, err := root.Find(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		f, a := c.Flags().Lookup(tc.name), c.Flags().Lookup(tc.alias)
		if f == nil || a == nil {
			t.Fatalf("%v: --%s or --%s missing", tc.path, tc.name, tc.alias)
		}
		if f.Hidden || !a.Hidden {
			t.Errorf("%v: --%s hidden %v, --%s hidden %v", tc.path, tc.name, f.Hidden, tc.alias, a.Hidden)
		}
		if err := c.Flags().Set(tc.alias, tc.value); err != nil {
			t.Fatal(err)
		}
		if f.Value.String() != tc.value {
			t.Errorf("%v: --%s %s left --%s at %s", tc.path, tc.alias, tc.value, tc.name, f.Value)
		}
		if err := c.Flags().Set(tc.name, tc.other); err != nil {
			t.Fatal(err)
		}
		if a.Value.String() != tc.other {
			t.Errorf("%v: --%s %s left --%s at %s", tc.path, tc.name, tc.other, tc.alias, a.Value)
		}
	}
}
