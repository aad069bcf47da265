package obslog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// record is the JSON form of an obs.Event.
type record struct {
	At    int64  `json:"at"`
	Kind  string `json:"kind"`
	Op    uint64 `json:"op,omitempty"`
	Who   string `json:"who,omitempty"`
	Where string `json:"where,omitempty"`
	Note  string `json:"note,omitempty"`
	QP    uint32 `json:"qp,omitempty"`
	PSN   uint32 `json:"psn,omitempty"`
	Code  uint32 `json:"code,omitempty"`
	Index uint64 `json:"index,omitempty"`
	Addr  uint64 `json:"addr,omitempty"`
	Bytes uint64 `json:"bytes,omitempty"`
	Value uint64 `json:"value,omitempty"`
	Old   uint64 `json:"old,omitempty"`
	Then  int64  `json:"then,omitempty"`
}

func toRecord(e obs.Event) record {
	return record{At: int64(e.At), Kind: e.Kind.String(), Op: uint64(e.Op), Who: e.Who, Where: e.Where, Note: e.Note,
		QP: e.QP, PSN: e.PSN, Code: e.Code, Index: e.Index, Addr: e.Addr, Bytes: e.Bytes, Value: e.Value, Old: e.Old,
		Then: int64(e.Then)}
}

// Writer encodes events as JSON Lines to an io.Writer. It is an
// obs.Observer; the first write error stops it and is kept (Err).
type Writer struct {
	w   io.Writer
	buf bytes.Buffer
	err error
	n   int
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Observe implements obs.Observer.
func (w *Writer) Observe(e obs.Event) {
	if w.err != nil {
		return
	}
	w.buf.Reset()
	if w.err = json.NewEncoder(&w.buf).Encode(toRecord(e)); w.err != nil {
		return
	}
	_, w.err = w.w.Write(w.buf.Bytes())
	w.n++
}

// Err returns the first error met, if any.
func (w *Writer) Err() error { return w.err }

// Count returns the events written.
func (w *Writer) Count() int { return w.n }

// Write encodes events to w.
func Write(w io.Writer, events []obs.Event) error {
	bw := bufio.NewWriter(w)
	x := NewWriter(bw)
	for _, e := range events {
		x.Observe(e)
	}
	if x.err != nil {
		return x.err
	}
	return bw.Flush()
}

// Error is a problem with one line of an event file.
type Error struct {
	Line  int    // 1-based
	Field string // the offending field, or "" for the line as a whole
	Err   error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: field %q: %v", e.Line, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// maxLine bounds one line (an event is a few hundred bytes).
const maxLine = 1 << 20

// Read decodes every event of r. Blank lines are skipped; a line that is
// not one JSON object with known fields, a known kind and non-negative
// times is an *Error naming its line.
func Read(r io.Reader) ([]obs.Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var out []obs.Event
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		e, err := decode(b, line)
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("obslog: %w", err)
	}
	return out, nil
}

func decode(b []byte, line int) (obs.Event, error) {
	var rec record
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&rec); err != nil {
		return obs.Event{}, &Error{Line: line, Err: err}
	}
	if d.More() {
		return obs.Event{}, &Error{Line: line, Err: fmt.Errorf("more than one JSON value")}
	}
	k, ok := obs.ParseKind(rec.Kind)
	if !ok || k == obs.None {
		return obs.Event{}, &Error{Line: line, Field: "kind", Err: fmt.Errorf("unknown kind %q", rec.Kind)}
	}
	if rec.At < 0 {
		return obs.Event{}, &Error{Line: line, Field: "at", Err: fmt.Errorf("negative time %d", rec.At)}
	}
	if rec.Then < 0 {
		return obs.Event{}, &Error{Line: line, Field: "then", Err: fmt.Errorf("negative time %d", rec.Then)}
	}
	return obs.Event{At: sim.Time(rec.At), Kind: k, Op: obs.OpID(rec.Op), Who: rec.Who, Where: rec.Where, Note: rec.Note,
		QP: rec.QP, PSN: rec.PSN, Code: rec.Code, Index: rec.Index, Addr: rec.Addr, Bytes: rec.Bytes, Value: rec.Value,
		Old: rec.Old, Then: sim.Time(rec.Then)}, nil
}
