package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A study of 4 small points (EP8, 4 tokens per rank).
const runStudy = `name: run
base: {model: deepseek-v3, ep: 8, tokens: 4}
grid:
  backend: [gdaki, proxy]
  nics_per_gpu: [1, 2]
`

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// Rows do not depend on the worker count; a rerun runs nothing and leaves
// the files as they were; a run missing rows runs only those.
func TestRunJobsAndResume(t *testing.T) {
	st, err := Parse([]byte(runStudy), "run.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one"), filepath.Join(dir, "two")
	r1, err := Run(st, Options{Prefix: one, Jobs: 1, Version: "test"})
	require.NoError(t, err)
	assert.Equal(t, 4, r1.Ran)
	assert.Zero(t, r1.Failed)
	_, err = Run(st, Options{Prefix: two, Jobs: 2, Version: "test"})
	require.NoError(t, err)
	assert.Equal(t, read(t, one+".jsonl"), read(t, two+".jsonl"))
	assert.Equal(t, read(t, one+".csv"), read(t, two+".csv"))
	csv := read(t, one+".csv")
	assert.True(t, strings.HasPrefix(csv, "study,index,id,nics_per_gpu,trace,model,ep,"), csv)
	assert.Equal(t, 5, strings.Count(csv, "\n"))

	r, err := Run(st, Options{Prefix: two, Jobs: 2, Version: "test"})
	require.NoError(t, err)
	assert.Equal(t, 0, r.Ran)
	assert.Equal(t, 4, r.Skipped)
	assert.Equal(t, read(t, one+".jsonl"), read(t, two+".jsonl"))

	// Drop rows 1 and 3: the rerun runs those two.
	lines := strings.SplitAfter(read(t, two+".jsonl"), "\n")
	require.NoError(t, os.WriteFile(two+".jsonl", []byte(lines[0]+lines[2]), 0o644))
	r, err = Run(st, Options{Prefix: two, Jobs: 2, Version: "test"})
	require.NoError(t, err)
	assert.Equal(t, 2, r.Ran)
	assert.Equal(t, read(t, one+".jsonl"), read(t, two+".jsonl"))
	assert.Equal(t, read(t, one+".csv"), read(t, two+".csv"))

	// A study grown by one more value reuses every row it has.
	grown, err := Parse([]byte(strings.Replace(runStudy, "[1, 2]", "[1, 3, 2]", 1)), "run.yaml")
	require.NoError(t, err)
	r, err = Run(grown, Options{Prefix: two, Jobs: 2, Version: "test"})
	require.NoError(t, err)
	assert.Equal(t, 2, r.Ran)
	assert.Equal(t, 4, r.Skipped)
	assert.Equal(t, "3", r.Rows[1].Axes["nics_per_gpu"])
	assert.Equal(t, 2, r.Rows[2].Index)
	assert.Equal(t, "2", r.Rows[2].Axes["nics_per_gpu"])

	// Rows read back are the rows written.
	rows, err := ReadJSONLFile(one + ".jsonl")
	require.NoError(t, err)
	require.Len(t, rows, 4)
	assert.Equal(t, r1.Rows, rows)
	assert.Positive(t, rows[3].Metrics.DispatchUS)
	assert.Equal(t, "proxy", rows[3].Settings.Backend)
	assert.Equal(t, "2", rows[3].Axes["nics_per_gpu"])
}

// Shards partition the points; merged, they give the unsharded rows, and
// Merge rejects a missing shard, a repeated one and a foreign row.
// rdma_only and sms reach replay: NCCL EP on one node sends over NVLink
// by default and through the NICs, slower, with rdma_only; an SM count
// above the device's is replay's error, in the row.
func TestRunPassesRDMAOnlyAndSMs(t *testing.T) {
	st, err := Parse([]byte("base: {model: deepseek-v3, ep: 8, tokens: 4, mode: ncclep}\nlist:\n  - {rdma_only: false}\n"+
		"  - {rdma_only: true}\n  - {sms: 1000}\n"), "r.yaml")
	require.NoError(t, err)
	prefix := filepath.Join(t.TempDir(), "r")
	_, err = Run(st, Options{Prefix: prefix, Jobs: 1, Version: "test"})
	require.NoError(t, err)
	rows, err := ReadJSONL(strings.NewReader(read(t, prefix+".jsonl")), "r.jsonl")
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.NotNil(t, rows[0].Metrics)
	require.NotNil(t, rows[1].Metrics)
	assert.Greater(t, rows[1].Metrics.DispatchUS, rows[0].Metrics.DispatchUS, "every put through a NIC")
	assert.True(t, rows[1].Settings.RDMAOnly)
	assert.Contains(t, rows[2].Error, "max_num_sms 1000")
	csv := read(t, prefix+".csv")
	assert.Contains(t, csv, ",nvlink,rdma_only,sms,seed,")
}

func TestShardsMerge(t *testing.T) {
	st, err := Parse([]byte(runStudy), "run.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	all, err := Run(st, Options{Prefix: filepath.Join(dir, "all"), Jobs: 2, Version: "test"})
	require.NoError(t, err)
	var shards [][]Row
	for i := range 3 {
		sh := Shard{I: i, N: 3}
		r, err := Run(st, Options{Prefix: filepath.Join(dir, "s"+sh.Suffix()), Shard: sh, Jobs: 1, Version: "test"})
		require.NoError(t, err)
		shards = append(shards, r.Rows)
	}
	assert.Len(t, shards[0], 2)
	assert.Len(t, shards[2], 1)
	names := []string{"s0", "s1", "s2"}
	rows, err := Merge(st, shards, names)
	require.NoError(t, err)
	assert.Equal(t, all.Rows, rows)

	_, err = Merge(st, shards[:2], names[:2])
	assert.ErrorContains(t, err, "1 of 4 points missing (2)")
	_, err = Merge(st, append(shards, shards[1]), append(names, "again"))
	assert.ErrorContains(t, err, "point 1 (id "+st.Points[1].ID+") is in both s1 and again")
	other, err := Parse([]byte(strings.Replace(runStudy, "tokens: 4", "tokens: 5", 1)), "run.yaml")
	require.NoError(t, err)
	_, err = Merge(other, shards, names)
	assert.ErrorContains(t, err, "is not a point of study run as it stands")
}

func TestShardFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		env  func(string) string
		want Shard
		ok   bool
		err  string
	}{
		{env(), Shard{}, false, ""},
		{env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_COUNT", "4"), Shard{3, 4}, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "2"), Shard{3, 4}, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_COUNT", "4"), Shard{}, true, "0 <= i < N"},
		{env("SLURM_ARRAY_TASK_ID", "1"), Shard{}, true, "SLURM_ARRAY_TASK_COUNT"},
		{env("JOB_COMPLETION_INDEX", "1", "JOB_COMPLETIONS", "2"), Shard{1, 2}, true, ""},
		{env("JOB_COMPLETION_INDEX", "1"), Shard{}, true, "JOB_COMPLETIONS is not"},
	} {
		sh, _, ok, err := ShardFromEnv(c.env)
		assert.Equal(t, c.ok, ok)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, c.want, sh)
	}
	for _, bad := range []string{"2/2", "-1/2", "1", "a/b", "0/0"} {
		_, err := ParseShard(bad)
		assert.Error(t, err, bad)
	}
}
