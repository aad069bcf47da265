package traces

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Reader decodes a trace one record at a time, validating each record
// against the header. Input may be plain or gzip-compressed JSON Lines
// (detected from the magic bytes). Blank lines are ignored. A Reader is not
// safe for concurrent use.
type Reader struct {
	name    string
	src     io.Reader
	br      *bufio.Reader
	started bool
	line    int
	buf     []byte
	chk     checker
	err     error // sticky
}

// NewReader returns a Reader for r. name (usually the file name) prefixes
// every error message.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, src: r}
}

// Header returns the header record, or nil before the first successful
// Next.
func (r *Reader) Header() *Header { return r.chk.h }

// Line returns the line number of the last record read.
func (r *Reader) Line() int { return r.line }

func (r *Reader) errf(field, format string, args ...any) error {
	return &Error{File: r.name, Line: r.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (r *Reader) start() error {
	r.started = true
	br := bufio.NewReaderSize(r.src, 1<<16)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return &Error{File: r.name, Msg: "bad gzip stream: " + err.Error(), Err: err}
		}
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	r.br = br
	return nil
}

// readLine returns the next non-blank line without its terminator.
func (r *Reader) readLine() ([]byte, error) {
	for {
		r.buf = r.buf[:0]
		for {
			chunk, err := r.br.ReadSlice('\n')
			r.buf = append(r.buf, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF && len(r.buf) > 0 {
				break
			}
			if err != nil {
				if err == io.EOF {
					return nil, io.EOF
				}
				return nil, &Error{File: r.name, Line: r.line + 1, Msg: "read: " + err.Error(), Err: err}
			}
			break
		}
		r.line++
		line := bytes.TrimSpace(r.buf)
		if len(line) > 0 {
			return line, nil
		}
	}
}

// Next returns the next record. It returns io.EOF after the last record,
// and an *Error naming file, line and field for bad input. The first record
// must be the header.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
	}
	return rec, err
}

func (r *Reader) next() (Record, error) {
	if !r.started {
		if err := r.start(); err != nil {
			return nil, err
		}
	}
	line, err := r.readLine()
	if err == io.EOF {
		if r.chk.h == nil {
			return nil, &Error{File: r.name, Line: r.line, Msg: "missing header: trace is empty"}
		}
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	kind, err := r.sniffKind(line)
	if err != nil {
		return nil, err
	}
	if r.chk.h == nil && kind != KindHeader {
		return nil, r.errf("kind", "missing header: first record has kind %q", kind)
	}
	var rec Record
	switch kind {
	case KindHeader:
		if r.chk.h != nil {
			return nil, r.errf("kind", "header must be the first and only header record (first header was before)")
		}
		var v struct {
			Kind string `json:"kind"`
			Header
		}
		if err := r.decode(line, &v); err != nil {
			return nil, err
		}
		h := v.Header
		h.fillDefaults()
		if fe := r.chk.setHeader(&h); fe != nil {
			return nil, r.errf(fe.field, "%s", fe.msg)
		}
		return &h, nil
	case KindPlacement:
		var v struct {
			Kind string `json:"kind"`
			Placement
		}
		err, rec = r.decode(line, &v), &v.Placement
	case KindRoute:
		var v struct {
			Kind string `json:"kind"`
			Route
		}
		err, rec = r.decode(line, &v), &v.Route
	case KindCounts:
		var v struct {
			Kind string `json:"kind"`
			Counts
		}
		err, rec = r.decode(line, &v), &v.Counts
	case KindMeasure:
		var v struct {
			Kind string `json:"kind"`
			Measure
		}
		err, rec = r.decode(line, &v), &v.Measure
	default:
		return nil, r.errf("kind", "unknown record kind %q (want header, placement, route, counts or measure)", kind)
	}
	if err != nil {
		return nil, err
	}
	if fe := r.chk.check(rec); fe != nil {
		return nil, r.errf(fe.field, "%s", fe.msg)
	}
	return rec, nil
}

// sniffKind returns the "kind" of a line, reading it directly when it comes
// first (canonical output) and decoding the object otherwise.
func (r *Reader) sniffKind(line []byte) (string, error) {
	const prefix = `{"kind":"`
	if bytes.HasPrefix(line, []byte(prefix)) {
		rest := line[len(prefix):]
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i]), nil
		}
	}
	var v struct {
		Kind *string `json:"kind"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return "", r.jsonError(err, line)
	}
	if v.Kind == nil {
		return "", r.errf("kind", "missing record kind")
	}
	return *v.Kind, nil
}

func (r *Reader) decode(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return r.jsonError(err, line)
	}
	off := int(dec.InputOffset())
	if rest := bytes.TrimSpace(line[off:]); len(rest) > 0 {
		col := len(line) - len(rest) + 1
		return &Error{File: r.name, Line: r.line, Column: col, Msg: "malformed JSON: data after the record object"}
	}
	return nil
}

// jsonError converts an encoding/json error into an *Error with the best
// position and field it can recover.
func (r *Reader) jsonError(err error, line []byte) error {
	e := &Error{File: r.name, Line: r.line, Err: err}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		e.Column = int(syn.Offset)
		e.Msg = "malformed JSON: " + syn.Error()
	case errors.As(err, &typ):
		e.Column = int(typ.Offset)
		e.Field = typ.Field
		for _, emb := range []string{"Header.", "Placement.", "Route.", "Counts.", "Measure."} {
			e.Field = strings.TrimPrefix(e.Field, emb)
		}
		e.Msg = fmt.Sprintf("cannot use JSON %s as %s", typ.Value, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		e.Column = len(line)
		e.Msg = "malformed JSON: unexpected end of line"
	default:
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			e.Field = strings.Trim(f, `"`)
			e.Msg = "unknown field"
		} else {
			e.Msg = "malformed JSON: " + strings.TrimPrefix(msg, "json: ")
		}
	}
	if e.Column > len(line) {
		e.Column = len(line)
	}
	return e
}

// Load reads a whole trace (plain or gzip) from r and validates it; name
// prefixes error messages.
func Load(r io.Reader, name string) (*Trace, error) {
	rd := NewReader(r, name)
	rec, err := rd.Next()
	if err != nil {
		return nil, err
	}
	t := newTrace(*rec.(*Header))
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		t.add(rec)
	}
	t.chk = rd.chk
	if l, ok := t.chk.missingPlacement(t.Layers()); !ok {
		return nil, &Error{File: name, Field: "parallel.placement", Msg: fmt.Sprintf("explicit placement, but layer %d has no placement record", l)}
	}
	return t, nil
}

// Read loads the trace file at path (plain or gzip).
func Read(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f, path)
}
