package sweep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ginsim/ginsim/internal/atomicfile"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay"
)

// Shard selects the points whose index is I modulo N (the zero Shard: all).
type Shard struct{ I, N int }

// ParseShard parses "i/N" with 0 <= i < N.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want i/N with 0 <= i < N", s)
	}
	return Shard{i, n}, nil
}

// ShardFromEnv picks the shard from a scheduler's environment: a Slurm
// job array (SLURM_ARRAY_TASK_ID, less SLURM_ARRAY_TASK_MIN, of
// SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX
// of JOB_COMPLETIONS, which the Job's manifest sets to its completions).
// ok is false when neither is set.
func ShardFromEnv(getenv func(string) string) (sh Shard, source string, ok bool, err error) {
	num := func(k string) (int, error) {
		v, err := strconv.Atoi(getenv(k))
		if err != nil {
			return 0, fmt.Errorf("%s=%q: want a whole number", k, getenv(k))
		}
		return v, nil
	}
	switch {
	case getenv("SLURM_ARRAY_TASK_ID") != "":
		id, err := num("SLURM_ARRAY_TASK_ID")
		if err != nil {
			return Shard{}, "", true, err
		}
		n, err := num("SLURM_ARRAY_TASK_COUNT")
		if err != nil {
			return Shard{}, "", true, err
		}
		lo := 0
		if getenv("SLURM_ARRAY_TASK_MIN") != "" {
			if lo, err = num("SLURM_ARRAY_TASK_MIN"); err != nil {
				return Shard{}, "", true, err
			}
		}
		sh, err = ParseShard(strconv.Itoa(id-lo) + "/" + strconv.Itoa(n))
		return sh, "Slurm job array", true, err
	case getenv("JOB_COMPLETION_INDEX") != "":
		id, err := num("JOB_COMPLETION_INDEX")
		if err != nil {
			return Shard{}, "", true, err
		}
		if getenv("JOB_COMPLETIONS") == "" {
			return Shard{}, "", true, errors.New("JOB_COMPLETION_INDEX is set but JOB_COMPLETIONS is not: set it in the Job's manifest to spec.completions")
		}
		n, err := num("JOB_COMPLETIONS")
		if err != nil {
			return Shard{}, "", true, err
		}
		sh, err = ParseShard(strconv.Itoa(id) + "/" + strconv.Itoa(n))
		return sh, "Kubernetes Indexed Job", true, err
	}
	return Shard{}, "", false, nil
}

// Select returns the shard's points.
func (sh Shard) Select(ps []Point) []Point {
	if sh.N <= 1 {
		return ps
	}
	var out []Point
	for _, p := range ps {
		if p.Index%sh.N == sh.I {
			out = append(out, p)
		}
	}
	return out
}

// Suffix is the shard's part of output names: ".shard-i-of-N" (or "").
func (sh Shard) Suffix() string {
	if sh.N <= 1 {
		return ""
	}
	return ".shard-" + strconv.Itoa(sh.I) + "-of-" + strconv.Itoa(sh.N)
}

// Options configure Run.
type Options struct {
	// Prefix names the outputs: Prefix.csv and Prefix.jsonl.
	Prefix string
	Shard  Shard
	// Jobs is how many points run at once (0 or 1: one).
	Jobs int
	// Version is ginsim's version, written in every row.
	Version string
	// Progress, when set, is called after each point with (done, total).
	Progress func(done, total int)
	// Checkpoint, when positive, rewrites the outputs (whole) at most this
	// often while points finish, so that an interrupted run resumes.
	Checkpoint time.Duration
}

// Result says what Run did.
type Result struct {
	Rows                 []Row
	Ran, Skipped, Failed int
}

// Run runs the study's points of opt.Shard that the output does not hold
// yet (a rerun resumes; a point is known by its configuration's id, so a
// study grown by more values reuses the rows it has), each one replay, opt.Jobs at a time, and writes
// every row of the shard to opt.Prefix.csv and .jsonl in point order. Rows
// do not depend on Jobs. A point whose replay fails gets a row with its
// error and counts in Result.Failed.
func Run(st *Study, opt Options) (*Result, error) {
	pts := opt.Shard.Select(st.Points)
	jsonl := opt.Prefix + ".jsonl"
	old, err := ReadJSONLFile(jsonl)
	if err != nil {
		return nil, fmt.Errorf("sweep: resume: %w", err)
	}
	have := map[string]Row{}
	for _, r := range old {
		have[r.ID] = r
	}
	res := &Result{}
	rows := make([]*Row, len(pts))
	var todo []int
	for i, p := range pts {
		if r, ok := have[p.ID]; ok {
			// The same configuration: its result stands, wherever the
			// study now places it.
			r.Study, r.Index, r.Axes = st.Name, p.Index, p.Values
			rows[i] = &r
			res.Skipped++
			continue
		}
		todo = append(todo, i)
	}
	trs, err := loadTraces(st, pts, todo, opt.Jobs)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	last := time.Now()
	var werr error
	progress := func(done, total int) {
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
		if opt.Checkpoint > 0 && time.Since(last) >= opt.Checkpoint && done < total {
			mu.Lock()
			werr = writeOutputs(opt.Prefix, st.Axes, rows)
			mu.Unlock()
			last = time.Now()
		}
	}
	err = par.ForEach(len(todo), opt.Jobs, progress, func(k int) error {
		i := todo[k]
		r := runPoint(st, &pts[i], trs[traceKey(&pts[i].Settings)], opt.Version)
		mu.Lock()
		rows[i] = &r
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	if err := writeOutputs(opt.Prefix, st.Axes, rows); err != nil {
		return nil, err
	}
	for _, r := range rows {
		res.Rows = append(res.Rows, *r)
		if r.Error != "" {
			res.Failed++
		}
	}
	res.Ran = len(todo)
	return res, nil
}

// writeOutputs writes the rows done so far, whole.
func writeOutputs(prefix string, axes []string, rows []*Row) error {
	var done []Row
	for _, r := range rows {
		if r != nil {
			done = append(done, *r)
		}
	}
	return WriteFiles(prefix, axes, done)
}

// WriteFiles writes rows to prefix.jsonl and prefix.csv, each whole.
func WriteFiles(prefix string, axes []string, rows []Row) error {
	if err := atomicfile.Write(prefix+".jsonl", func(w io.Writer) error { return WriteJSONL(w, rows) }); err != nil {
		return err
	}
	return atomicfile.Write(prefix+".csv", func(w io.Writer) error { return WriteCSV(w, axes, rows) })
}

// traceKey identifies the trace a point replays.
func traceKey(s *Settings) string {
	if s.Trace != "" {
		return "file:" + s.Trace
	}
	return fmt.Sprintf("gen:%s/%d/%d/%s/%d/%d", s.Model, s.EP, s.Tokens, s.Routing, s.Layers, s.TraceSeed)
}

// loadTraces reads or generates every trace the todo points need, once.
func loadTraces(st *Study, pts []Point, todo []int, jobs int) (map[string]*traces.Trace, error) {
	var keys []string
	first := map[string]*Point{}
	for _, i := range todo {
		k := traceKey(&pts[i].Settings)
		if first[k] == nil {
			first[k] = &pts[i]
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*traces.Trace, len(keys))
	err := par.ForEach(len(keys), jobs, nil, func(i int) error {
		p := first[keys[i]]
		tr, err := openTrace(st, p)
		if err != nil {
			return fmt.Errorf("sweep: point %d: %w", p.Index, err)
		}
		out[i] = tr
		return nil
	})
	if err != nil {
		return nil, err
	}
	m := map[string]*traces.Trace{}
	for i, k := range keys {
		m[k] = out[i]
	}
	return m, nil
}

func openTrace(st *Study, p *Point) (*traces.Trace, error) {
	s := &p.Settings
	if s.Trace != "" {
		path := s.Trace
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(st.File), path)
		}
		if _, err := os.Stat(path); err != nil && slices.Contains(traces.Examples(), s.Trace) {
			return traces.OpenExample(s.Trace)
		}
		return traces.Read(path)
	}
	m, err := traces.ModelByName(s.Model)
	if err != nil {
		return nil, err
	}
	return traces.Generate(traces.GenConfig{Model: m, EP: s.EP, RanksPerNode: min(p.Cluster.GPUsPerNode, s.EP),
		TokensPerRank: s.Tokens, Routing: s.Routing, Layers: s.Layers, Seed: s.TraceSeed})
}

// runPoint replays one point.
func runPoint(st *Study, p *Point, tr *traces.Trace, version string) Row {
	s := &p.Settings
	row := Row{Study: st.Name, Index: p.Index, ID: p.ID, Axes: p.Values, Settings: *s, Cluster: clusterMap(p.Cluster),
		Version: version}
	name := s.Trace
	if name == "" {
		name = "generated"
	}
	backends, err := Backends(p.Cluster, s.IBTimeout)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	// Points run in parallel (Options.Jobs), each on the sequential
	// kernel, the reference: the rows do not move with the World.
	rep, err := replay.Run(tr, p.Cluster, replay.Options{Mode: s.Mode, Backend: s.Backend, NVLink: s.NVLink, RDMAOnly: s.RDMAOnly, SMs: s.SMs, Seed: s.Seed,
		Layers: s.Layers, Jobs: 1, Sequential: true, TraceName: name, ClusterName: p.Cluster.Name, Backends: backends})
	if err != nil {
		row.Error = err.Error()
		return row
	}
	m := metricsOf(rep)
	row.Metrics = &m
	return row
}
