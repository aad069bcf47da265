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
	} {
		var o, e stringWriter
		if code := run(tc.args, &o, &e); code != tc.want {
			t.Errorf("ginsim %v: exit %d, want %d (stderr %q)", tc.args, code, tc.want, e)
		}
	}
}
