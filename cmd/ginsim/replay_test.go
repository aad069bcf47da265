package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JSON has one report shape with and without --seeds: --seeds N wraps
// N reports, each the very object a plain run of that seed prints, in
// "runs" (and their spread beside them).
func TestReplaySeedsJSONWrapsTheReport(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.jsonl.gz")
	var out, errOut stringWriter
	require.Zero(t, run([]string{"trace", "gen", "--model", "deepseek-v3", "--ep", "8", "--tokens", "8", "--layers", "1", "-o", tr}, &out, &errOut), string(errOut))
	replayJSON := func(args ...string) map[string]any {
		var out, errOut stringWriter
		code := run(append([]string{"replay", tr, "--json", "--quiet"}, args...), &out, &errOut)
		require.Zero(t, code, string(errOut))
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m))
		return m
	}
	plain := replayJSON("--seed", "3")
	one := replayJSON("--seed", "3", "--seeds", "1")
	assert.Equal(t, plain, one, "--seeds 1 is the plain run")
	sw := replayJSON("--seed", "3", "--seeds", "2")
	keys := make([]string, 0, len(sw))
	for k := range sw {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"runs", "spread"}, keys)
	runs := sw["runs"].([]any)
	require.Len(t, runs, 2)
	assert.Equal(t, plain, runs[0], "the first run of the sweep is the plain report of its seed")
	second := replayJSON("--seed", "4")
	assert.Equal(t, second, runs[1])
	_ = os.Remove(tr)
}
