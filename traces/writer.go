package traces

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Writer encodes records as canonical JSON Lines: fixed field order, no
// insignificant white space, one record per line, so equal traces give
// identical bytes. Records are validated like the Reader does; the first
// must be the header. A Writer is not safe for concurrent use.
type Writer struct {
	bw  *bufio.Writer
	gz  *gzip.Writer
	buf []byte
	chk checker
	n   int
	err error
}

// NewWriter returns a Writer to w, gzip-compressing the output if compress
// is set. Call Close to flush.
func NewWriter(w io.Writer, compress bool) *Writer {
	wr := &Writer{}
	if compress {
		wr.gz = gzip.NewWriter(w) // zero header: no name, no mtime
		w = wr.gz
	}
	wr.bw = bufio.NewWriterSize(w, 1<<16)
	return wr
}

// Write validates and writes one record.
func (w *Writer) Write(rec Record) error {
	if w.err != nil {
		return w.err
	}
	w.n++
	if h, ok := rec.(*Header); ok && w.chk.h == nil {
		hc := *h
		if fe := w.chk.setHeader(&hc); fe != nil {
			w.err = &Error{File: "writer", Line: w.n, Field: fe.field, Msg: fe.msg}
			return w.err
		}
	} else if w.chk.h == nil {
		w.err = &Error{File: "writer", Line: w.n, Field: "kind", Msg: fmt.Sprintf("missing header: first record has kind %q", rec.Kind())}
		return w.err
	} else if fe := w.chk.check(rec); fe != nil {
		return &Error{File: "writer", Line: w.n, Field: fe.field, Msg: fe.msg}
	}
	var err error
	w.buf, err = appendRecord(w.buf[:0], rec)
	if err != nil {
		w.err = err
		return err
	}
	w.buf = append(w.buf, '\n')
	if _, err := w.bw.Write(w.buf); err != nil {
		w.err = err
	}
	return w.err
}

// Close flushes buffered data and finishes the gzip stream. It does not
// close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	err := w.bw.Flush()
	if w.gz != nil {
		err = errors.Join(err, w.gz.Close())
	}
	w.err = errors.New("traces: writer closed")
	return err
}

func appendInts[T int | int32](b []byte, v []T) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

func appendKey(b []byte, key string, n int) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, int64(n), 10)
}

func appendStep(b []byte, kind string, iter, layer, rank, tokens int) []byte {
	b = append(b, `{"kind":"`...)
	b = append(b, kind...)
	b = append(b, '"')
	b = appendKey(b, "iter", iter)
	b = appendKey(b, "layer", layer)
	b = appendKey(b, "rank", rank)
	return appendKey(b, "tokens", tokens)
}

// appendRecord appends the canonical encoding of rec (without newline).
func appendRecord(b []byte, rec Record) ([]byte, error) {
	switch r := rec.(type) {
	case *Route:
		b = appendStep(b, KindRoute, r.Iter, r.Layer, r.Rank, r.Tokens)
		b = append(b, `,"topk":[`...)
		for i, row := range r.TopK {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInts(b, row)
		}
		b = append(b, ']')
		if r.Weights != nil {
			b = append(b, `,"weights":[`...)
			for i, row := range r.Weights {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				for j, x := range row {
					if j > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendFloat(b, x, 'g', -1, 64)
				}
				b = append(b, ']')
			}
			b = append(b, ']')
		}
		return append(b, '}'), nil
	case *Counts:
		b = appendStep(b, KindCounts, r.Iter, r.Layer, r.Rank, r.Tokens)
		b = append(b, `,"expert_tokens":`...)
		b = appendInts(b, r.ExpertTokens)
		b = append(b, `,"rank_tokens":`...)
		b = appendInts(b, r.RankTokens)
		b = append(b, `,"node_tokens":`...)
		b = appendInts(b, r.NodeTokens)
		return append(b, '}'), nil
	case *Header:
		return appendJSON(b, struct {
			Kind string `json:"kind"`
			*Header
		}{KindHeader, r})
	case *Placement:
		return appendJSON(b, struct {
			Kind string `json:"kind"`
			*Placement
		}{KindPlacement, r})
	case *Measure:
		return appendJSON(b, struct {
			Kind string `json:"kind"`
			*Measure
		}{KindMeasure, r})
	}
	return b, fmt.Errorf("traces: cannot encode record type %T", rec)
}

func appendJSON(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return b, fmt.Errorf("traces: encode: %w", err)
	}
	return append(b, j...), nil
}

// Write writes t in canonical order: header, placements by layer, then for
// each (iter, layer, rank) its route and counts records, then measures in
// insertion order. Output is byte-identical for equal traces.
func (t *Trace) Write(w io.Writer, compress bool) error {
	wr := NewWriter(w, compress)
	if err := wr.Write(&t.hdr); err != nil {
		return err
	}
	for _, p := range t.placements {
		if err := wr.Write(p); err != nil {
			return err
		}
	}
	i, j := 0, 0
	for i < len(t.routes) || j < len(t.counts) {
		var rec Record
		switch {
		case j == len(t.counts):
			rec, i = t.routes[i], i+1
		case i == len(t.routes):
			rec, j = t.counts[j], j+1
		default:
			r, c := t.routes[i], t.counts[j]
			if keyCmp(stepKey{r.Iter, r.Layer, r.Rank}, stepKey{c.Iter, c.Layer, c.Rank}) <= 0 {
				rec, i = r, i+1
			} else {
				rec, j = c, j+1
			}
		}
		if err := wr.Write(rec); err != nil {
			return err
		}
	}
	for _, m := range t.measures {
		if err := wr.Write(m); err != nil {
			return err
		}
	}
	return wr.Close()
}

// WriteFile writes t to path, gzip-compressed when path ends in ".gz".
func (t *Trace) WriteFile(path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return t.Write(f, strings.HasSuffix(path, ".gz"))
}
