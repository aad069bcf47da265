package importer

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/traces"
)

// Options describes what the tensors do not: the model and the EP layout.
type Options struct {
	// Model is the header's model block. TopK and MoELayers may be zero:
	// top_k comes from the tensors, and the layer range is extended to
	// cover the data (HasLayers false: the data's range only).
	Model     traces.HeaderModel
	HasLayers bool
	// FirstLayer is the layer of a stacked tensor's first entry and of a
	// 2-D tensor without a layer in its name.
	FirstLayer   int
	EP           int
	RanksPerNode int
	Precision    traces.Precision
	Phase        string
	// EPLB places each layer's experts and RedundantExperts replicas with
	// traces.BalanceLayer (by the imported load); the trace gets explicit
	// placement records. Without it the placement is contiguous.
	EPLB             bool
	RedundantExperts int
}

// block is the routing of one tensor slice or CSV group: the token rows of
// one (iter, layer) and either one rank or all of them (rank -1).
type block struct {
	file, name  string // where it came from, for errors
	iter, layer int
	rank        int // -1: global batch, split over the ranks
	topk        [][]int32
	weights     [][]float64
	// pos names element (row, col) of the block's indices (or weights)
	// for errors: a CSV line, or a tensor element.
	pos func(row, col int, weight bool) (line int, field string)
}

var (
	reLayer = regexp.MustCompile(`(?i)layers?[._-]?(\d+)`)
	reIter  = regexp.MustCompile(`(?i)iter(?:ation)?s?[._-]?(\d+)`)
	reRank  = regexp.MustCompile(`(?i)rank[._-]?(\d+)`)
)

// lastNum returns the number of the last match of re in s, or -1.
func lastNum(re *regexp.Regexp, s string) int {
	m := re.FindAllStringSubmatch(s, -1)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil || n > math.MaxInt32 {
		return -1
	}
	return n
}

// indexSuffixes name index tensors; weightSuffixes their weights.
var (
	indexSuffixes  = []string{"topk_idx", "topk_ids"}
	weightSuffixes = []string{"topk_weights", "topk_weight"}
)

func indexStem(name string) (string, bool) {
	for _, s := range indexSuffixes {
		if stem, ok := strings.CutSuffix(name, s); ok {
			return stem, true
		}
	}
	return "", false
}

// Load reads routing from files (.npy, .npz, .safetensors or .csv, by
// extension) and builds a trace with route records. Errors are
// *traces.Error values naming the file, tensor or line, and element.
func Load(paths []string, opt Options) (*traces.Trace, error) {
	if opt.EP <= 0 {
		return nil, fmt.Errorf("importer: EP %d must be positive", opt.EP)
	}
	if opt.RanksPerNode <= 0 {
		opt.RanksPerNode = min(8, opt.EP)
	}
	if opt.Model.NumExperts <= 0 {
		return nil, fmt.Errorf("importer: num_experts %d must be positive", opt.Model.NumExperts)
	}
	var blocks []*block
	npy := map[string][]*Tensor{} // .npy files by directory: one namespace
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		ext := strings.ToLower(filepath.Ext(p))
		var ts []*Tensor
		switch ext {
		case ".npy":
			stem := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
			t, err := decodeNPY(stem, b)
			if err != nil {
				return nil, &traces.Error{File: p, Msg: err.Error()}
			}
			npy[filepath.Dir(p)] = append(npy[filepath.Dir(p)], t)
			continue
		case ".npz":
			ts, err = decodeNPZ(b)
		case ".safetensors":
			ts, err = decodeSafetensors(b)
		case ".csv":
			bs, err := decodeCSV(p, b, opt.Model.NumExperts)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, bs...)
			continue
		default:
			return nil, &traces.Error{File: p, Msg: fmt.Sprintf("unknown file type %q (want .npy, .npz, .safetensors or .csv)", ext)}
		}
		if err != nil {
			return nil, &traces.Error{File: p, Msg: err.Error()}
		}
		prefix := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)) + "/"
		bs, err := tensorBlocks(p, "", prefix, ts, opt)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, bs...)
	}
	dirs := make([]string, 0, len(npy))
	for d := range npy {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		bs, err := tensorBlocks("", d, "", npy[d], opt)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, bs...)
	}
	if len(blocks) == 0 {
		return nil, &traces.Error{File: strings.Join(paths, ", "), Msg: "no routing found: want tensors named ...topk_idx or ...topk_ids, or CSV columns topk_idx_*"}
	}
	return build(blocks, opt)
}

// tensorBlocks turns the index tensors of one namespace into blocks. file
// is the archive (empty for .npy files, named by their file in dir);
// prefix (the archive's base name) takes part in iter/layer/rank parsing.
func tensorBlocks(file, dir, prefix string, ts []*Tensor, opt Options) ([]*block, error) {
	byName := make(map[string]*Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	var out []*block
	for _, t := range ts {
		stem, ok := indexStem(t.Name)
		if !ok {
			continue
		}
		where := file
		if where == "" {
			where = filepath.Join(dir, t.Name+".npy")
		}
		errf := func(field, format string, a ...any) error {
			return &traces.Error{File: where, Field: field, Msg: fmt.Sprintf(format, a...)}
		}
		if t.Float() {
			return nil, errf(t.Name, "dtype %s: expert indices must be integers", t.Dtype)
		}
		var w *Tensor
		for _, s := range weightSuffixes {
			if w = byName[stem+s]; w != nil {
				break
			}
		}
		if w != nil {
			if !w.Float() {
				return nil, errf(w.Name, "dtype %s: weights must be floating point", w.Dtype)
			}
			if !slices.Equal(w.Shape, t.Shape) {
				return nil, errf(w.Name, "shape %v differs from %s's %v", w.Shape, t.Name, t.Shape)
			}
		}
		full := prefix + t.Name
		iter, rank := max(lastNum(reIter, full), 0), lastNum(reRank, full)
		layer := lastNum(reLayer, full)
		var layers, tokens, k int
		switch len(t.Shape) {
		case 2:
			layers, tokens, k = 1, t.Shape[0], t.Shape[1]
		case 3:
			layers, tokens, k = t.Shape[0], t.Shape[1], t.Shape[2]
		default:
			return nil, errf(t.Name, "shape %v: want [tokens, top_k] or [layers, tokens, top_k]", t.Shape)
		}
		if k == 0 {
			return nil, errf(t.Name, "shape %v: top_k is 0", t.Shape)
		}
		if layer < 0 {
			layer = opt.FirstLayer
		}
		for l := range layers {
			b := &block{file: where, name: t.Name, iter: iter, layer: layer + l, rank: rank,
				topk: make([][]int32, tokens)}
			base := l * tokens * k
			b.pos = tensorPos(t, w, l)
			for r := range tokens {
				row := make([]int32, k)
				for j := range k {
					v := t.Ints[base+r*k+j]
					if v < -1 || v >= int64(opt.Model.NumExperts) {
						_, f := b.pos(r, j, false)
						return nil, errf(f, "expert %d out of range [0,%d) (-1 masks)", v, opt.Model.NumExperts)
					}
					row[j] = int32(v)
				}
				b.topk[r] = row
			}
			if w != nil {
				b.weights = make([][]float64, tokens)
				for r := range tokens {
					b.weights[r] = slices.Clone(w.Floats[base+r*k : base+(r+1)*k])
				}
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// tensorPos names elements of layer l of index tensor t (weights w).
func tensorPos(t, w *Tensor, l int) func(row, col int, weight bool) (int, string) {
	return func(row, col int, weight bool) (int, string) {
		name := t.Name
		if weight && w != nil {
			name = w.Name
		}
		if len(t.Shape) == 3 {
			return 0, fmt.Sprintf("%s[%d][%d][%d]", name, l, row, col)
		}
		return 0, fmt.Sprintf("%s[%d][%d]", name, row, col)
	}
}

type stepKey struct{ iter, layer int }

// build checks the blocks against each other and the options, splits
// global batches over the ranks and builds the trace.
func build(blocks []*block, opt Options) (*traces.Trace, error) {
	k := len(blocks[0].topk0())
	kFrom := blocks[0]
	for _, b := range blocks {
		if len(b.topk) > 0 && k == 0 {
			k, kFrom = len(b.topk[0]), b
		}
	}
	where := func(b *block) string {
		if b.name != "" {
			return fmt.Sprintf("%s (tensor %s)", b.file, b.name)
		}
		return b.file
	}
	steps := map[stepKey][]*block{}
	lo, hi := math.MaxInt, math.MinInt
	for _, b := range blocks {
		if len(b.topk) > 0 && len(b.topk[0]) != k {
			return nil, &traces.Error{File: b.file, Field: b.name, Msg: fmt.Sprintf("top_k %d differs from %d in %s", len(b.topk[0]), k, where(kFrom))}
		}
		if b.rank >= opt.EP {
			return nil, &traces.Error{File: b.file, Field: b.name, Msg: fmt.Sprintf("rank %d out of range [0,%d) (--ep)", b.rank, opt.EP)}
		}
		if err := checkRows(b); err != nil {
			return nil, err
		}
		key := stepKey{b.iter, b.layer}
		steps[key] = append(steps[key], b)
		lo, hi = min(lo, b.layer), max(hi, b.layer)
	}
	if k == 0 {
		return nil, &traces.Error{File: blocks[0].file, Msg: "every routing tensor has zero tokens: top_k unknown"}
	}
	m := opt.Model
	m.TopK = k
	if opt.HasLayers {
		m.MoELayers = [2]int{min(m.MoELayers[0], lo), max(m.MoELayers[1], hi)}
	} else {
		m.MoELayers = [2]int{lo, hi}
	}
	keys := make([]stepKey, 0, len(steps))
	for key := range steps {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b stepKey) int {
		return cmp.Or(cmp.Compare(a.iter, b.iter), cmp.Compare(a.layer, b.layer))
	})
	var routes []*traces.Route
	maxTokens := 0
	for _, key := range keys {
		bs := steps[key]
		perRank := make([]*block, opt.EP)
		var global *block
		for _, b := range bs {
			other := global
			if b.rank >= 0 {
				other = perRank[b.rank]
			} else if len(bs) > 1 {
				for _, o := range bs {
					if o != b {
						other = o
						break
					}
				}
			}
			if other != nil {
				return nil, &traces.Error{File: b.file, Field: b.name, Msg: fmt.Sprintf(
					"iter %d layer %d%s is also given by %s", key.iter, key.layer, rankText(b.rank), where(other))}
			}
			if b.rank >= 0 {
				perRank[b.rank] = b
			} else {
				global = b
			}
		}
		if global != nil {
			n := len(global.topk)
			for r := range opt.EP {
				s, e := splitRange(n, opt.EP, r)
				rt := &traces.Route{Iter: key.iter, Layer: key.layer, Rank: r, Tokens: e - s, TopK: global.topk[s:e]}
				if global.weights != nil {
					rt.Weights = global.weights[s:e]
				}
				routes = append(routes, rt)
				maxTokens = max(maxTokens, e-s)
			}
			continue
		}
		for r, b := range perRank {
			if b == nil {
				return nil, &traces.Error{File: bs[0].file, Field: bs[0].name, Msg: fmt.Sprintf(
					"iter %d layer %d: no tensor for rank %d (per-rank tensors must cover ranks 0..%d)", key.iter, key.layer, r, opt.EP-1)}
			}
			routes = append(routes, &traces.Route{Iter: key.iter, Layer: key.layer, Rank: r, Tokens: len(b.topk), TopK: b.topk, Weights: b.weights})
			maxTokens = max(maxTokens, len(b.topk))
		}
	}
	if opt.Phase == "" {
		opt.Phase = "decode"
	}
	par := traces.Parallel{EPRanks: opt.EP, RanksPerNode: opt.RanksPerNode, Placement: traces.PlacementContiguous}
	var places []*traces.Placement
	if opt.EPLB {
		par.Placement, par.RedundantExperts = traces.PlacementExplicit, opt.RedundantExperts
		byLayer := map[int][]*traces.Route{}
		var layers []int
		for _, r := range routes {
			if byLayer[r.Layer] == nil {
				layers = append(layers, r.Layer)
			}
			byLayer[r.Layer] = append(byLayer[r.Layer], r)
		}
		slices.Sort(layers)
		for _, l := range layers {
			p, err := traces.BalanceLayer(l, byLayer[l], m.NumExperts, opt.RedundantExperts, opt.EP)
			if err != nil {
				return nil, err
			}
			places = append(places, p)
		}
	} else if opt.RedundantExperts != 0 {
		return nil, fmt.Errorf("importer: %d redundant experts need EPLB placement", opt.RedundantExperts)
	}
	h := traces.Header{
		Format: traces.Format, Version: traces.Version, Model: m,
		Parallel: par,
		Dtype:    traces.DtypeFor(opt.Precision), Phase: opt.Phase, MaxTokensPerRank: maxTokens,
		Source: traces.Source{Tool: "ginsim trace import"},
	}
	t, err := traces.NewTrace(h)
	if err != nil {
		return nil, err
	}
	for _, p := range places {
		if err := t.Add(p); err != nil {
			return nil, fmt.Errorf("importer: layer %d placement: %w", p.Layer, err)
		}
	}
	for _, r := range routes {
		if err := t.Add(r); err != nil {
			return nil, fmt.Errorf("importer: iter %d layer %d rank %d: %w", r.Iter, r.Layer, r.Rank, err)
		}
	}
	return t, nil
}

func (b *block) topk0() []int32 {
	if len(b.topk) == 0 {
		return nil
	}
	return b.topk[0]
}

func rankText(r int) string {
	if r < 0 {
		return ""
	}
	return fmt.Sprintf(" rank %d", r)
}

// checkRows rejects an expert chosen twice by one token and non-finite
// weights, naming the element.
func checkRows(b *block) error {
	for r, row := range b.topk {
		for j, e := range row {
			if e >= 0 && slices.Contains(row[:j], e) {
				line, f := b.pos(r, j, false)
				return &traces.Error{File: b.file, Line: line, Field: f, Msg: fmt.Sprintf("expert %d selected twice by one token", e)}
			}
		}
		if b.weights != nil {
			for j, w := range b.weights[r] {
				if math.IsNaN(w) || math.IsInf(w, 0) {
					line, f := b.pos(r, j, true)
					return &traces.Error{File: b.file, Line: line, Field: f, Msg: fmt.Sprintf("weight %v is not finite", w)}
				}
			}
		}
	}
	return nil
}

// splitRange returns the rows [s, e) of rank r when n rows are split over
// ep ranks in order, the first n mod ep ranks getting one more.
func splitRange(n, ep, r int) (int, int) {
	q, rem := n/ep, n%ep
	s := r*q + min(r, rem)
	e := s + q
	if r < rem {
		e++
	}
	return s, e
}
