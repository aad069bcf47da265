package importer

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/traces"
)

// decodeCSV reads routing from CSV: a header line naming the columns
// (optional iter, layer and rank; index columns topk_idx*/topk_ids*;
// weight columns topk_weight*), then one line per token in token order.
// Lines of one (iter, layer, rank) form one block; without a rank column
// one block per (iter, layer) holds the global batch.
func decodeCSV(file string, b []byte, experts int) ([]*block, error) {
	r := csv.NewReader(bytes.NewReader(b))
	r.ReuseRecord = false
	r.Comment = '#'
	head, err := r.Read()
	if err != nil {
		return nil, csvErr(file, err, "")
	}
	col := map[string]int{"iter": -1, "layer": -1, "rank": -1}
	var idx, wts []int
	for i, h := range head {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "iter" || h == "layer" || h == "rank":
			if col[h] >= 0 {
				return nil, &traces.Error{File: file, Line: 1, Field: h, Msg: "column appears twice"}
			}
			col[h] = i
		case strings.HasPrefix(h, "topk_idx") || strings.HasPrefix(h, "topk_ids"):
			idx = append(idx, i)
		case strings.HasPrefix(h, "topk_weight"):
			wts = append(wts, i)
		default:
			return nil, &traces.Error{File: file, Line: 1, Field: head[i], Msg: "unknown column (want iter, layer, rank, topk_idx_*, topk_weights_*)"}
		}
	}
	if len(idx) == 0 {
		return nil, &traces.Error{File: file, Line: 1, Msg: "no topk_idx_* columns in the header line"}
	}
	if len(wts) != 0 && len(wts) != len(idx) {
		return nil, &traces.Error{File: file, Line: 1, Field: head[wts[0]], Msg: fmt.Sprintf("%d weight columns for %d index columns", len(wts), len(idx))}
	}
	type key struct{ iter, layer, rank int }
	var out []*block
	cur := map[key]*block{}
	lines := map[*block][]int{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvErr(file, err, "")
		}
		line, _ := r.FieldPos(0)
		intAt := func(c int, lo, hi int64) (int64, error) {
			v, err := strconv.ParseInt(strings.TrimSpace(rec[c]), 10, 64)
			if err != nil {
				return 0, &traces.Error{File: file, Line: line, Field: head[c], Msg: fmt.Sprintf("%q is not an integer", rec[c])}
			}
			if v < lo || v > hi {
				return 0, &traces.Error{File: file, Line: line, Field: head[c], Msg: fmt.Sprintf("%d out of range [%d,%d]", v, lo, hi)}
			}
			return v, nil
		}
		k := key{rank: -1}
		for _, f := range []struct {
			name string
			p    *int
		}{{"iter", &k.iter}, {"layer", &k.layer}, {"rank", &k.rank}} {
			name, p := f.name, f.p
			if c := col[name]; c >= 0 {
				v, err := intAt(c, 0, math.MaxInt32)
				if err != nil {
					return nil, err
				}
				*p = int(v)
			}
		}
		row := make([]int32, len(idx))
		for j, c := range idx {
			v, err := intAt(c, math.MinInt64, math.MaxInt64)
			if err != nil {
				return nil, err
			}
			if v < -1 || v >= int64(experts) {
				return nil, &traces.Error{File: file, Line: line, Field: head[c], Msg: fmt.Sprintf("expert %d out of range [0,%d) (-1 masks)", v, experts)}
			}
			row[j] = int32(v)
		}
		blk := cur[k]
		if blk == nil {
			blk = &block{file: file, iter: k.iter, layer: k.layer, rank: k.rank}
			cur[k] = blk
			out = append(out, blk)
			blk.pos = func(r, c int, weight bool) (int, string) {
				if weight {
					return lines[blk][r], head[wts[c]]
				}
				return lines[blk][r], head[idx[c]]
			}
		}
		blk.topk = append(blk.topk, row)
		lines[blk] = append(lines[blk], line)
		if len(wts) > 0 {
			w := make([]float64, len(wts))
			for j, c := range wts {
				v, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 64)
				if err != nil {
					return nil, &traces.Error{File: file, Line: line, Field: head[c], Msg: fmt.Sprintf("%q is not a number", rec[c])}
				}
				w[j] = v
			}
			blk.weights = append(blk.weights, w)
		}
	}
	if len(out) == 0 {
		return nil, &traces.Error{File: file, Msg: "no data lines after the header"}
	}
	return out, nil
}

func csvErr(file string, err error, field string) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &traces.Error{File: file, Line: pe.Line, Column: pe.Column, Field: field, Msg: pe.Err.Error()}
	}
	if errors.Is(err, io.EOF) {
		return &traces.Error{File: file, Msg: "empty CSV: want a header line"}
	}
	return &traces.Error{File: file, Msg: err.Error()}
}
