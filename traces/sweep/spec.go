package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/internal/pos"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay"
	"gopkg.in/yaml.v3"
)

// ErrInvalid is wrapped by every *SpecError.
var ErrInvalid = errors.New("sweep: invalid study")

// SpecError locates a problem in a study file: "file:line:column: field
// \"key\": message".
type SpecError struct {
	File         string
	Line, Column int
	Field        string
	Msg          string
}

// Error formats the position, field and message.
func (e *SpecError) Error() string {
	return pos.Format(e.File, e.Line, e.Column, e.Field, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *SpecError) Unwrap() error { return ErrInvalid }

// Settings are a point's replay settings: the trace (a file or built-in
// example, or generated from model, EP, tokens, routing, layers and
// trace_seed), the cluster (a preset or file) and replay's options.
type Settings struct {
	Trace     string `json:"trace,omitempty"`
	Model     string `json:"model,omitempty"`
	EP        int    `json:"ep,omitempty"`
	Tokens    int    `json:"tokens,omitempty"`
	Routing   string `json:"routing,omitempty"`
	Layers    int    `json:"layers"`
	TraceSeed uint64 `json:"trace_seed,omitempty"`
	Cluster   string `json:"cluster"`
	Mode      string `json:"mode"`
	Backend   string `json:"backend"`
	// NVLink is the intra-node path: for ll, v2-direct (v2 on one node)
	// and backend nccl the path that runs, true (the library's default)
	// unless RDMAOnly; ncclep and the rest take it as replay's --nvlink.
	NVLink bool `json:"nvlink"`
	// RDMAOnly and SMs are replay's --rdma-only and --sms (0: the
	// library's default SM count); omitted when unset, so that a point
	// that sets neither keeps its ID. The ID leaves RDMAOnly out where
	// NVLink says the path (see pointID).
	RDMAOnly  bool   `json:"rdma_only,omitempty"`
	SMs       int    `json:"sms,omitempty"`
	Seed      uint64 `json:"seed"`
	IBTimeout uint8  `json:"ib_timeout"`
}

// settingKeys are the axis keys that are replay settings; every other key
// is a cluster field path.
var settingKeys = []string{"trace", "model", "ep", "tokens", "routing", "layers", "trace_seed", "cluster", "mode",
	"backend", "nvlink", "rdma_only", "sms", "seed", "ib_timeout"}

// defaults are the settings of a point that sets nothing.
func defaults() Settings {
	return Settings{Model: "deepseek-v3", EP: 16, Tokens: 128, Routing: "uniform", Layers: 1, TraceSeed: 1,
		Cluster: "h100-ib", Mode: replay.ModeLL, Backend: replay.BackendGDAKI, Seed: 1, IBTimeout: DefaultIBTimeout}
}

// Axis is one swept key and its values in the study file.
type Axis struct {
	Key    string
	Values []*yaml.Node
}

// Study is a parsed study file.
type Study struct {
	Name        string
	Description string
	File        string // for errors and relative cluster files
	Points      []Point
	// Axes are the keys that vary, in file order (base keys excluded).
	Axes []string
}

// Point is one configuration of a study.
type Point struct {
	// Index is the point's place in the study's expansion order.
	Index int
	// ID is a hash of the full configuration: settings and cluster.
	ID       string
	Settings Settings
	Cluster  machine.Spec
	// Values are the point's value of every axis, as written.
	Values map[string]string
}

// Load reads and expands a study file.
func Load(path string) (*Study, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return Parse(b, path)
}

// assignment is one key's value in a point, with where it was written.
type assignment struct {
	key string
	val *yaml.Node
}

// Parse parses and expands a study. name locates errors and is the
// directory cluster files are relative to. Points are the list entries
// (or one empty point) crossed with the grid, first grid key outermost,
// each over the base settings.
func Parse(data []byte, name string) (*Study, error) { return parse(data, name, MaxPoints) }

// MaxPoints bounds a study's size.
const MaxPoints = 100_000

func parse(data []byte, name string, maxPoints int) (*Study, error) {
	bad := func(n *yaml.Node, field, format string, args ...any) error {
		e := &SpecError{File: name, Field: field, Msg: fmt.Sprintf(format, args...)}
		if n != nil {
			e.Line, e.Column = n.Line, n.Column
		}
		return e
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		se := &SpecError{File: name}
		se.Line, se.Msg = pos.YAML(err)
		return nil, se
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, bad(root, "", "want a mapping with name, base, grid and/or list")
	}
	st := &Study{File: name}
	var base []assignment
	var grid []Axis
	var list [][]assignment
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			return nil, bad(k, k.Value, "duplicate key")
		}
		seen[k.Value] = true
		switch k.Value {
		case "name":
			st.Name = v.Value
		case "description":
			st.Description = v.Value
		case "base":
			a, err := mapping(v, "base", bad)
			if err != nil {
				return nil, err
			}
			base = a
		case "grid":
			a, err := mapping(v, "grid", bad)
			if err != nil {
				return nil, err
			}
			for _, x := range a {
				vals := []*yaml.Node{x.val}
				if x.val.Kind == yaml.SequenceNode {
					vals = x.val.Content
				}
				if len(vals) == 0 {
					return nil, bad(x.val, "grid."+x.key, "no values")
				}
				grid = append(grid, Axis{Key: x.key, Values: vals})
			}
		case "list":
			if v.Kind != yaml.SequenceNode {
				return nil, bad(v, "list", "want a list of mappings of settings")
			}
			for j, e := range v.Content {
				a, err := mapping(e, "list["+strconv.Itoa(j)+"]", bad)
				if err != nil {
					return nil, err
				}
				list = append(list, a)
			}
		default:
			return nil, bad(k, k.Value, "unknown field (have name, description, base, grid, list)")
		}
	}
	if st.Name == "" {
		st.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	if len(list) == 0 {
		list = [][]assignment{nil}
	}
	// The varying keys, in file order: list keys, then grid keys.
	for _, l := range list {
		for _, a := range l {
			if !slices.Contains(st.Axes, a.key) {
				st.Axes = append(st.Axes, a.key)
			}
		}
	}
	for _, g := range grid {
		if slices.Contains(st.Axes, g.Key) {
			return nil, bad(g.Values[0], "grid."+g.Key, "set by both grid and list")
		}
		st.Axes = append(st.Axes, g.Key)
	}
	total := len(list)
	if total > maxPoints {
		return nil, bad(nil, "list", "more than %d points", maxPoints)
	}
	for _, g := range grid {
		total *= len(g.Values)
		if total > maxPoints {
			return nil, bad(g.Values[0], "grid."+g.Key, "more than %d points", maxPoints)
		}
	}
	clusters := map[string]machine.Spec{}
	ids := map[string]int{}
	idx := make([]int, len(grid))
	for _, l := range list {
		for {
			as := slices.Clone(base)
			as = append(as, l...)
			for gi, g := range grid {
				as = append(as, assignment{g.Key, g.Values[idx[gi]]})
			}
			p, err := resolve(as, name, clusters, bad)
			if err != nil {
				return nil, err
			}
			p.Index = len(st.Points)
			if j, dup := ids[p.ID]; dup {
				return nil, bad(nil, "", "points %d and %d are the same configuration", j, p.Index)
			}
			ids[p.ID] = p.Index
			p.Values = map[string]string{}
			for _, a := range as {
				if slices.Contains(st.Axes, a.key) {
					p.Values[a.key] = valueString(a.val)
				}
			}
			st.Points = append(st.Points, p)
			// Next grid index, last key fastest.
			k := len(grid) - 1
			for ; k >= 0; k-- {
				idx[k]++
				if idx[k] < len(grid[k].Values) {
					break
				}
				idx[k] = 0
			}
			if k < 0 {
				break
			}
		}
	}
	return st, nil
}

type badFunc func(n *yaml.Node, field, format string, args ...any) error

// mapping reads a mapping of settings.
func mapping(n *yaml.Node, what string, bad badFunc) ([]assignment, error) {
	if n.Kind != yaml.MappingNode {
		return nil, bad(n, what, "want a mapping of settings")
	}
	var out []assignment
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return nil, bad(k, what+"."+k.Value, "duplicate key")
		}
		seen[k.Value] = true
		if k.Value == "" {
			return nil, bad(k, what, "empty key")
		}
		out = append(out, assignment{k.Value, v})
	}
	return out, nil
}

func valueString(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	b, _ := yaml.Marshal(n)
	return strings.TrimSpace(string(b))
}

// resolve turns one point's assignments (later ones win) into a Point.
func resolve(as []assignment, file string, clusters map[string]machine.Spec, bad badFunc) (Point, error) {
	s := defaults()
	var fields []Field
	pos := map[string]*yaml.Node{}   // cluster field path -> value
	setAt := map[string]*yaml.Node{} // nvlink, rdma_only -> value
	var clusterNode *yaml.Node
	generated := false
	for _, a := range as {
		v := a.val
		isScalar := v.Kind == yaml.ScalarNode
		str := func() (string, error) {
			if !isScalar {
				return "", bad(v, a.key, "want a single value")
			}
			return v.Value, nil
		}
		num := func(lo, hi int) (int, error) {
			x, err := str()
			if err != nil {
				return 0, err
			}
			n, err := strconv.Atoi(x)
			if err != nil || n < lo || n > hi {
				return 0, bad(v, a.key, "%q: want a whole number in [%d, %d]", x, lo, hi)
			}
			return n, nil
		}
		var err error
		switch a.key {
		case "trace":
			s.Trace, err = str()
		case "model":
			if s.Model, err = str(); err == nil {
				if _, e := traces.ModelByName(s.Model); e != nil {
					err = bad(v, a.key, "%v", e)
				}
			}
			generated = true
		case "ep":
			s.EP, err = num(1, 4096)
			generated = true
		case "tokens":
			s.Tokens, err = num(1, 1<<20)
			generated = true
		case "routing":
			if s.Routing, err = str(); err == nil {
				if _, e := traces.ParseRouting(s.Routing); e != nil {
					err = bad(v, a.key, "%v", e)
				}
			}
			generated = true
		case "layers":
			s.Layers, err = num(1, 1000)
		case "trace_seed":
			var n int
			n, err = num(0, 1<<31)
			s.TraceSeed = uint64(n)
			generated = true
		case "seed":
			var n int
			n, err = num(0, 1<<31)
			s.Seed = uint64(n)
		case "ib_timeout":
			var n int
			n, err = num(1, 31)
			s.IBTimeout = uint8(n)
		case "cluster":
			s.Cluster, err = str()
			clusterNode = v
		case "mode":
			if s.Mode, err = str(); err == nil && !slices.Contains(replay.Modes, s.Mode) {
				err = bad(v, a.key, "%q: want one of %v", s.Mode, replay.Modes)
			}
		case "backend":
			if s.Backend, err = str(); err == nil && !slices.Contains(replay.Backends, s.Backend) {
				err = bad(v, a.key, "%q: want one of %v", s.Backend, replay.Backends)
			}
		case "nvlink", "rdma_only":
			b := &s.NVLink
			if a.key == "rdma_only" {
				b = &s.RDMAOnly
			}
			setAt[a.key] = v
			var x string
			if x, err = str(); err == nil {
				if *b, err = strconv.ParseBool(x); err != nil {
					err = bad(v, a.key, "%q: want true or false", x)
				}
			}
		case "sms":
			s.SMs, err = num(0, 1<<16)
		default:
			path := strings.TrimPrefix(a.key, "cluster.")
			fields = append(fields, Field{Path: path, Value: v})
			pos[path] = v
		}
		if err != nil {
			return Point{}, err
		}
	}
	if s.Trace != "" {
		if generated {
			return Point{}, bad(nil, "trace", "a point sets both a trace file and generator settings (model, ep, tokens, routing, trace_seed)")
		}
		s.Model, s.EP, s.Tokens, s.Routing, s.TraceSeed = "", 0, 0, "", 0
	}
	base, ok := clusters[s.Cluster]
	if !ok {
		var err error
		if p, isPreset := machine.Preset(s.Cluster); isPreset {
			base = p
		} else {
			path := s.Cluster
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(file), path)
			}
			if base, err = machine.LoadSpec(path); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return Point{}, bad(clusterNode, "cluster", "%q is neither a preset (%s) nor a file", s.Cluster, strings.Join(machine.PresetNames(), " "))
				}
				return Point{}, bad(clusterNode, "cluster", "%v", err)
			}
		}
		clusters[s.Cluster] = base
	}
	spec, err := SetFields(base, fields...)
	if err != nil {
		// Point at the axis whose path the error names (or contains).
		var at *yaml.Node
		var field string
		for p, n := range pos {
			if strings.Contains(err.Error(), `"`+p) || strings.Contains(err.Error(), `"faults.`+p) {
				if at == nil || len(p) > len(field) {
					at, field = n, p
				}
			}
		}
		if at == nil && len(fields) > 0 {
			at, field = fields[len(fields)-1].Value, fields[len(fields)-1].Path
		}
		return Point{}, bad(at, field, "%v", err)
	}
	if s.Trace == "" {
		if _, err := spec.NodesFor(s.EP); err != nil {
			return Point{}, bad(nil, "ep", "EP %d on cluster %s: %v", s.EP, spec.Name, err)
		}
	}
	nodes := 0 // a trace file's EP is read at run time
	if s.Trace == "" {
		nodes, _ = spec.NodesFor(s.EP)
	}
	turned := newDefault(s, nodes)
	switch {
	case s.RDMAOnly && s.NVLink:
		return Point{}, bad(setAt["rdma_only"], "rdma_only", "contradicts nvlink: true; give one")
	case s.RDMAOnly && !turned && s.Mode != replay.ModeNCCLEP:
		kernel := s.Mode
		if s.Mode == replay.ModeV2 {
			kernel = replay.V2Kernels(nodes)
		}
		return Point{}, bad(setAt["rdma_only"], "rdma_only", "--mode %s runs %s, which forwards over NVLink inside the node "+
			"by design: no pure-RDMA path (rdma_only applies to ll, v2-direct, v2 on one node, ncclep and backend nccl)", s.Mode, kernel)
	case turned && !s.NVLink && !s.RDMAOnly && setAt["nvlink"] != nil:
		// An old study's nvlink: false meant pure RDMA; it would now run
		// the default, NVLink.
		return Point{}, bad(setAt["nvlink"], "nvlink", "false: NVLink to the peers of the node is the library's default for "+
			"--mode %s over %s; give rdma_only: true for pure RDMA", s.Mode, s.Backend)
	case turned:
		s.NVLink = !s.RDMAOnly
	}
	p := Point{Settings: s, Cluster: spec}
	p.ID = pointID(s, spec, turned)
	return p, nil
}

// newDefault reports whether s runs a library whose default became NVLink
// to the peers of the node (DeepEP V1 LL, V2's direct kernels, the NCCL
// baseline; NCCL EP already was): its NVLink setting is then the path that
// runs, true unless rdma_only. nodes is 0 when the trace is a file (v2
// counts as direct there; its hybrid kernels ignore nvlink).
func newDefault(s Settings, nodes int) bool {
	return s.Backend == replay.BackendNCCL || s.Mode == replay.ModeLL || s.Mode == replay.ModeV2Direct ||
		(s.Mode == replay.ModeV2 && nodes <= 1)
}

// pointID hashes a point's full configuration. For the modes whose default
// turned to NVLink (newDefault) nvlink is the path that runs and rdma_only
// is left out, so that a pure-RDMA point keeps the id it had when RDMA was
// the default, and a default point takes the id of the NVLink runs.
func pointID(s Settings, spec machine.Spec, turned bool) string {
	if turned {
		s.RDMAOnly = false
	}
	y, _ := machine.MarshalSpec(spec)
	j, _ := json.Marshal(s)
	h := sha256.New()
	h.Write(j)
	h.Write([]byte{0})
	h.Write(y)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
