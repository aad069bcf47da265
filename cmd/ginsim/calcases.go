package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/pos"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay"
	"gopkg.in/yaml.v3"
)

// A cases file (calibrate --cases-file) adds a user's own published or
// measured rows to calibrate: each case replays one trace on one cluster
// and compares the report's means with the given figures.
//
//	cases:
//	  - name: my-ll-ep16
//	    what: DeepEP LL over GIN, EP16, our testbed   # optional
//	    cluster: h100-ib            # preset or cluster YAML (relative to this file)
//	    trace: ll16.jsonl.gz        # file (relative to this file) or built-in example
//	    # or instead of trace: gen: {model: deepseek-v3, ep: 16, tokens: 128, routing: uniform}
//	    mode: ll                    # replay --mode (default ll)
//	    backend: gdaki              # replay --backend (default gdaki)
//	    rdma_only: true             # pure RDMA, as the published tables (default: the library's NVLink path)
//	    layers: 1                   # steps to replay (default 1)
//	    rows:
//	      - {metric: dispatch_us, published: 171.0, source: "our run, 2026-11"}
//	      - {metric: combine_GBps, published: 44.1}
type casesFile struct {
	Cases []fileCase `yaml:"cases"`
}

type fileCase struct {
	Name    string   `yaml:"name"`
	What    string   `yaml:"what"`
	Cluster string   `yaml:"cluster"`
	Trace   string   `yaml:"trace"`
	Gen     *fileGen `yaml:"gen"`
	Mode    string   `yaml:"mode"`
	Backend string   `yaml:"backend"`
	// NVLink is the library's default (kept for old files); RDMAOnly
	// is replay's --rdma-only.
	NVLink   bool      `yaml:"nvlink"`
	RDMAOnly bool      `yaml:"rdma_only"`
	Layers   int       `yaml:"layers"`
	Rows     []fileRow `yaml:"rows"`
}

type fileGen struct {
	Model        string `yaml:"model"`
	EP           int    `yaml:"ep"`
	RanksPerNode int    `yaml:"ranks_per_node"`
	Tokens       int    `yaml:"tokens"`
	Experts      int    `yaml:"experts"`
	TopK         int    `yaml:"top_k"`
	Routing      string `yaml:"routing"`
	Seed         uint64 `yaml:"seed"`
	Phase        string `yaml:"phase"`
}

type fileRow struct {
	Metric    string  `yaml:"metric"`
	Published float64 `yaml:"published"`
	Source    string  `yaml:"source"`
}

// caseMetrics maps a row's metric to its unit and the report's mean.
var caseMetrics = map[string]struct {
	unit string
	get  func(*replay.Report) float64
}{
	"dispatch_us":   {"us", func(r *replay.Report) float64 { return r.DispatchUS }},
	"combine_us":    {"us", func(r *replay.Report) float64 { return r.CombineUS }},
	"dispatch_GBps": {"GB/s", func(r *replay.Report) float64 { return r.DispatchGBps }},
	"combine_GBps":  {"GB/s", func(r *replay.Report) float64 { return r.CombineGBps }},
}

// yamlUnknownKey is yaml.v3's unknown-field message, which names our Go type.
var yamlUnknownKey = regexp.MustCompile(`field (\S+) not found in type \S+`)

// loadCases reads a cases file into calibration cases. Every error names
// the file, the line and the field, and is a usage error (exit 2).
func loadCases(path string, builtin []string) ([]calCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Usagef("--cases-file: %v", err)
	}
	bad := func(line int, field, format string, args ...any) error {
		pos := path
		if line > 0 {
			pos += ":" + strconv.Itoa(line)
		}
		if field != "" {
			pos += fmt.Sprintf(": field %q", field)
		}
		return Usagef("%s: %s", pos, fmt.Sprintf(format, args...))
	}
	var cf casesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		line, msg := pos.YAML(err)
		return nil, bad(line, "", "%s", yamlUnknownKey.ReplaceAllString(msg, "unknown field \"$1\""))
	}
	// A second pass over the nodes gives each case's and row's line.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, bad(0, "", "%v", err)
	}
	casesNode := mapValue(docRoot(&root), "cases")
	if len(cf.Cases) == 0 || casesNode == nil {
		return nil, bad(0, "cases", "no cases")
	}
	dir := filepath.Dir(path)
	seen := map[string]bool{}
	var out []calCase
	for i, c := range cf.Cases {
		n := casesNode.Content[i]
		f := func(k string) string { return fmt.Sprintf("cases[%d].%s", i, k) }
		at := func(k string) int {
			if v := mapValue(n, k); v != nil {
				return v.Line
			}
			return n.Line
		}
		switch {
		case c.Name == "":
			return nil, bad(n.Line, f("name"), "missing")
		case seen[c.Name] || slices.Contains(builtin, c.Name):
			return nil, bad(at("name"), f("name"), "case %q is defined twice", c.Name)
		case (c.Trace == "") == (c.Gen == nil):
			return nil, bad(n.Line, f("trace"), "give exactly one of trace and gen")
		case len(c.Rows) == 0:
			return nil, bad(n.Line, f("rows"), "no rows to compare")
		}
		seen[c.Name] = true
		if c.Mode == "" {
			c.Mode = replay.ModeLL
		}
		if c.Backend == "" {
			c.Backend = replay.BackendGDAKI
		}
		if c.Cluster == "" {
			c.Cluster = "h100-ib"
		}
		if c.Layers == 0 {
			c.Layers = 1
		}
		if !slices.Contains(replay.Modes, c.Mode) {
			return nil, bad(at("mode"), f("mode"), "%q: want one of %v", c.Mode, replay.Modes)
		}
		if !slices.Contains(replay.Backends, c.Backend) {
			return nil, bad(at("backend"), f("backend"), "%q: want one of %v", c.Backend, replay.Backends)
		}
		if c.Layers < 0 {
			return nil, bad(at("layers"), f("layers"), "%d must not be negative", c.Layers)
		}
		if c.RDMAOnly && c.NVLink {
			return nil, bad(at("rdma_only"), f("rdma_only"), "contradicts nvlink: true; give one")
		}
		if c.RDMAOnly && (c.Mode == replay.ModeHT || c.Mode == replay.ModeV2Hybrid) && c.Backend != replay.BackendNCCL {
			return nil, bad(at("rdma_only"), f("rdma_only"), "--mode %s forwards over NVLink inside the node by design; "+
				"rdma_only applies to ll, v2-direct, v2 on one node, ncclep and backend nccl", c.Mode)
		}
		spec, ok := machine.Preset(c.Cluster)
		if !ok {
			p := c.Cluster
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			if spec, err = machine.LoadSpec(p); err != nil {
				return nil, bad(at("cluster"), f("cluster"), "%v", err)
			}
		}
		tr, err := caseTrace(c, dir)
		if err != nil {
			k := "trace"
			if c.Gen != nil {
				k = "gen"
			}
			return nil, bad(at(k), f(k), "%v", err)
		}
		rowsNode := mapValue(n, "rows")
		for j, r := range c.Rows {
			line := rowsNode.Content[j].Line
			if _, ok := caseMetrics[r.Metric]; !ok {
				return nil, bad(line, fmt.Sprintf("cases[%d].rows[%d].metric", i, j), "%q: want one of dispatch_us, combine_us, dispatch_GBps, combine_GBps", r.Metric)
			}
			if !(r.Published > 0) {
				return nil, bad(line, fmt.Sprintf("cases[%d].rows[%d].published", i, j), "want a positive figure, have %v", r.Published)
			}
		}
		out = append(out, fileCalCase(c, spec, tr))
	}
	return out, nil
}

// caseTrace opens or generates a case's trace.
func caseTrace(c fileCase, dir string) (*traces.Trace, error) {
	if g := c.Gen; g != nil {
		m, err := traces.ModelByName(g.Model)
		if err != nil {
			return nil, err
		}
		if g.EP < 1 || g.Tokens < 1 {
			return nil, fmt.Errorf("ep (%d) and tokens (%d) must be at least 1", g.EP, g.Tokens)
		}
		return traces.Generate(traces.GenConfig{Model: m, EP: g.EP, RanksPerNode: g.RanksPerNode, TokensPerRank: g.Tokens,
			Experts: g.Experts, TopK: g.TopK, Routing: g.Routing, Seed: g.Seed, Phase: g.Phase})
	}
	p := c.Trace
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if _, err := os.Stat(p); err != nil && slices.Contains(traces.Examples(), c.Trace) {
		return traces.OpenExample(c.Trace)
	}
	return traces.Read(p)
}

// fileCalCase turns a validated file case into a calibration case.
func fileCalCase(c fileCase, spec machine.Spec, tr *traces.Trace) calCase {
	what := c.What
	if what == "" {
		what = fmt.Sprintf("%s over %s, %s (cases file)", c.Mode, c.Backend, c.Cluster)
	}
	return calCase{c.Name, what, func(seed uint64) ([]calRow, error) {
		rep, err := replay.Run(tr, spec, replay.Options{Mode: c.Mode, Backend: c.Backend, NVLink: c.NVLink, RDMAOnly: c.RDMAOnly, Seed: seed,
			Layers: c.Layers, Backends: ginBackends, Sequential: true})
		if err != nil {
			return nil, err
		}
		rows := make([]calRow, len(c.Rows))
		for j, r := range c.Rows {
			m := caseMetrics[r.Metric]
			v := m.get(rep)
			rows[j] = calRow{Case: c.Name, Metric: r.Metric, Unit: m.unit, Model: round2(v), Published: r.Published,
				ErrorPct: round2(100 * (v - r.Published) / r.Published), Source: r.Source}
		}
		return rows, nil
	}}
}

// docRoot returns the mapping under a document node.
func docRoot(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return n
}

// mapValue returns the value node of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
