package hw

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/internal/pos"
)

// RankResult is one result file of the executor (one rank of one run).
type RankResult struct {
	Rank, Ranks int
	// NCCL is ncclGetVersion's code (22809 for 2.28.9); GPU the device name.
	NCCL int
	GPU  string
	// Clock pairs a %globaltimer reading with the CLOCK_REALTIME interval
	// it was taken in (ns): the tightest of the file's clock lines.
	ClockGPU, ClockLo, ClockHi int64
	Ops                        []OpResult
	Signals, Counters, Windows []uint64
	// Done is true when the executor finished; Msg is its last word.
	Done bool
	Msg  string
	// Reads is how many bytes the read ops read (in NAME.reads, 8-byte
	// aligned each, in op order).
	Reads uint64
	// Stuck names the op the kernel did not get past, if any.
	Stuck string
}

// OpResult is one op's line: status "ok", "timeout" or "not built" (the
// executor was built without the op's API), the value it read,
// its %globaltimer start and end (ns).
type OpResult struct {
	Index  int
	Kind   string
	Status string
	Value  uint64
	T0, T1 int64
}

// ToHost converts a %globaltimer stamp to CLOCK_REALTIME ns.
func (r *RankResult) ToHost(gpu int64) int64 {
	return gpu - r.ClockGPU + (r.ClockLo+r.ClockHi)/2
}

// ParseError names the file, line and field of a bad result or trace line.
type ParseError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// Error formats the position, field and message.
func (e *ParseError) Error() string { return pos.Format(e.File, e.Line, 0, e.Field, e.Msg) }

// lineReader splits a file into fields and reports errors by line.
type lineReader struct {
	sc   *bufio.Scanner
	file string
	line int
	f    []string
}

func newLineReader(r io.Reader, file string) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<16)
	return &lineReader{sc: sc, file: file}
}

func (l *lineReader) next() bool {
	for l.sc.Scan() {
		l.line++
		l.f = strings.Fields(l.sc.Text())
		if len(l.f) > 0 {
			return true
		}
	}
	return false
}

func (l *lineReader) err(field, format string, args ...any) error {
	return &ParseError{File: l.file, Line: l.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// want checks the field count and names the fields for errors.
func (l *lineReader) want(names ...string) error {
	if len(l.f)-1 < len(names) {
		return l.err("", "%s line has %d fields, want %d (%s)", l.f[0], len(l.f)-1, len(names), strings.Join(names, " "))
	}
	return nil
}

func (l *lineReader) int(i int, name string) (int64, error) {
	v, err := strconv.ParseInt(l.f[i], 10, 64)
	if err != nil {
		return 0, l.err(name, "%q is not an integer", l.f[i])
	}
	return v, nil
}

func (l *lineReader) uint(i int, name string, base int) (uint64, error) {
	v, err := strconv.ParseUint(l.f[i], base, 64)
	if err != nil {
		return 0, l.err(name, "%q is not an unsigned integer", l.f[i])
	}
	return v, nil
}

// index reads field i as an index that must equal want (lines in order).
func (l *lineReader) index(i int, name string, want int) error {
	v, err := l.int(i, name)
	if err != nil {
		return err
	}
	if v != int64(want) {
		return l.err(name, "%d out of order, want %d", v, want)
	}
	return nil
}

// EmptyError is a result file with nothing in it: the executor died
// before writing its first line (a crash inside NCCL or the plugin).
type EmptyError struct{ File string }

func (e *EmptyError) Error() string {
	return e.File + ": empty: the executor died before writing anything (see the rank's .log)"
}

// ParseResult reads one executor result file; file names it in errors.
func ParseResult(r io.Reader, file string) (*RankResult, error) {
	l := newLineReader(r, file)
	res := &RankResult{Rank: -1}
	head := false
	for l.next() {
		f := l.f
		if !head {
			if f[0] != "ginhw-result" || len(f) != 2 || f[1] != "1" {
				return nil, l.err("", "not a ginhw result file (want \"ginhw-result 1\")")
			}
			head = true
			continue
		}
		var err error
		switch f[0] {
		case "info":
			for i := 1; i+1 < len(f); i += 2 {
				switch f[i] {
				case "rank":
					res.Rank, err = atoi(l, i+1, "rank")
				case "nranks":
					res.Ranks, err = atoi(l, i+1, "nranks")
				case "nccl":
					res.NCCL, err = atoi(l, i+1, "nccl")
				case "gpu":
					res.GPU = strings.Join(f[i+1:], " ")
					i = len(f)
				}
				if err != nil {
					return nil, err
				}
			}
		case "clock":
			if err = l.want("gpu_ns", "host_lo_ns", "host_hi_ns"); err != nil {
				return nil, err
			}
			g, err := l.int(1, "gpu_ns")
			if err != nil {
				return nil, err
			}
			lo, err := l.int(2, "host_lo_ns")
			if err != nil {
				return nil, err
			}
			hi, err := l.int(3, "host_hi_ns")
			if err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, l.err("host_hi_ns", "%d before host_lo_ns %d", hi, lo)
			}
			if res.ClockHi == 0 || hi-lo < res.ClockHi-res.ClockLo { // the tightest pairing
				res.ClockGPU, res.ClockLo, res.ClockHi = g, lo, hi
			}
		case "op":
			if err = l.want("index", "kind", "status", "value", "t0", "t1"); err != nil {
				return nil, err
			}
			o := OpResult{Index: len(res.Ops), Kind: f[2]}
			if err = l.index(1, "index", o.Index); err != nil {
				return nil, err
			}
			switch f[3] {
			case "0":
				o.Status = "ok"
			case "1":
				o.Status = "timeout"
			case "2":
				o.Status = "not built"
			default:
				return nil, l.err("status", "%q, want 0 (ok), 1 (timeout) or 2 (not built)", f[3])
			}
			if o.Value, err = l.uint(4, "value", 10); err != nil {
				return nil, err
			}
			if o.T0, err = l.int(5, "t0"); err != nil {
				return nil, err
			}
			if o.T1, err = l.int(6, "t1"); err != nil {
				return nil, err
			}
			res.Ops = append(res.Ops, o)
		case "signal", "counter":
			if err = l.want("id", "value"); err != nil {
				return nil, err
			}
			dst := &res.Signals
			if f[0] == "counter" {
				dst = &res.Counters
			}
			if err = l.index(1, "id", len(*dst)); err != nil {
				return nil, err
			}
			v, err := l.uint(2, "value", 10)
			if err != nil {
				return nil, err
			}
			*dst = append(*dst, v)
		case "win":
			if err = l.want("index", "fnv64"); err != nil {
				return nil, err
			}
			if err = l.index(1, "index", len(res.Windows)); err != nil {
				return nil, err
			}
			v, err := l.uint(2, "fnv64", 16)
			if err != nil {
				return nil, err
			}
			res.Windows = append(res.Windows, v)
		case "reads":
			// The read ops' bytes are in the .reads file beside this one.
			if err = l.want("bytes"); err != nil {
				return nil, err
			}
			if res.Reads, err = l.uint(1, "bytes", 10); err != nil {
				return nil, err
			}
		case "stuck":
			res.Stuck = strings.Join(f[1:], " ")
		case "async":
		case "done":
			if err = l.want("ok|fail"); err != nil {
				return nil, err
			}
			res.Done, res.Msg = f[1] == "ok", strings.Join(f[2:], " ")
		default:
			return nil, l.err("", "unknown line %q", f[0])
		}
	}
	if err := l.sc.Err(); err != nil {
		return nil, &ParseError{File: file, Line: l.line, Msg: err.Error()}
	}
	if !head {
		return nil, &EmptyError{File: file}
	}
	if res.Rank < 0 {
		return nil, &ParseError{File: file, Line: l.line, Field: "rank", Msg: "no info line with the rank"}
	}
	return res, nil
}

func atoi(l *lineReader, i int, name string) (int, error) {
	v, err := l.int(i, name)
	return int(v), err
}

// Trace is one plugin instance's trace (GINHW_TRACE): the rank it served,
// every post (iput/iputSignal entry), every message it delivered.
type Trace struct {
	Rank       int
	Posts      []TracePost
	Deliveries []TraceDelivery
	// Model holds the fabric server's replies this rank received as a
	// sender (GINHW_FABRIC=model:SOCKET), one per message.
	Model  []TraceModel
	Bugged int // NCCL 2.28.9 putValue inline offsets seen
}

// TraceModel is one message's delivery instant as the fabric server's
// model computed it (Deliver) and when its reply reached the sender's
// plugin (Arrived), CLOCK_REALTIME ns; Peer and Seq name the message (the
// target's dlv line has the same sequence).
type TraceModel struct {
	Coll, Peer       int
	Seq              uint64
	Deliver, Arrived int64
}

// TraceDelivery is one message this rank applied: from which rank, its
// bytes, when the sender's plugin was called (Posted) and when the data and
// signal were in this rank's memory (Done), CLOCK_REALTIME ns.
type TraceDelivery struct {
	Coll, From   int
	Seq          uint64 // the message's sequence on the ring from From
	Bytes        uint64
	Posted, Done int64
}

// TracePost is one iput/iputSignal: target rank, bytes, and CLOCK_REALTIME
// ns of the call.
type TracePost struct {
	Peer  int
	Bytes uint64
	At    int64
}

// ParseTrace reads a plugin trace file.
func ParseTrace(r io.Reader, file string) (*Trace, error) {
	l := newLineReader(r, file)
	t := &Trace{Rank: -1}
	for l.next() {
		switch l.f[0] {
		case "connect":
			if err := l.want("coll", "rank", "nranks"); err != nil {
				return nil, err
			}
			v, err := atoi(l, 2, "rank")
			if err != nil {
				return nil, err
			}
			if t.Rank >= 0 && t.Rank != v {
				return nil, l.err("rank", "rank %d after rank %d", v, t.Rank)
			}
			t.Rank = v
		case "post":
			if err := l.want("coll", "peer", "req", "bytes", "signal", "signal_id", "value", "at_ns"); err != nil {
				return nil, err
			}
			p, err := atoi(l, 2, "peer")
			if err != nil {
				return nil, err
			}
			n, err := l.uint(4, "bytes", 10)
			if err != nil {
				return nil, err
			}
			at, err := l.int(8, "at_ns")
			if err != nil {
				return nil, err
			}
			t.Posts = append(t.Posts, TracePost{Peer: p, Bytes: n, At: at})
		case "nccl-bug":
			t.Bugged++
		case "dlv":
			if err := l.want("coll", "from", "req", "seq", "bytes", "flags", "signal_id", "posted_ns", "done_ns"); err != nil {
				return nil, err
			}
			coll, err := atoi(l, 1, "coll")
			if err != nil {
				return nil, err
			}
			from, err := atoi(l, 2, "from")
			if err != nil {
				return nil, err
			}
			seq, err := l.uint(4, "seq", 10)
			if err != nil {
				return nil, err
			}
			n, err := l.uint(5, "bytes", 10)
			if err != nil {
				return nil, err
			}
			posted, err := l.int(8, "posted_ns")
			if err != nil {
				return nil, err
			}
			done, err := l.int(9, "done_ns")
			if err != nil {
				return nil, err
			}
			t.Deliveries = append(t.Deliveries, TraceDelivery{Coll: coll, From: from, Seq: seq, Bytes: n, Posted: posted, Done: done})
		case "fab":
			if err := l.want("coll", "peer", "seq", "deliver_ns", "arrived_ns"); err != nil {
				return nil, err
			}
			var m TraceModel
			var err error
			if m.Coll, err = atoi(l, 1, "coll"); err != nil {
				return nil, err
			}
			if m.Peer, err = atoi(l, 2, "peer"); err != nil {
				return nil, err
			}
			if m.Seq, err = l.uint(3, "seq", 10); err != nil {
				return nil, err
			}
			if m.Deliver, err = l.int(4, "deliver_ns"); err != nil {
				return nil, err
			}
			if m.Arrived, err = l.int(5, "arrived_ns"); err != nil {
				return nil, err
			}
			t.Model = append(t.Model, m)
		case "fabric", "reg", "pub", "close", "error":
		default:
			return nil, l.err("", "unknown line %q", l.f[0])
		}
	}
	if err := l.sc.Err(); err != nil {
		return nil, &ParseError{File: file, Line: l.line, Msg: err.Error()}
	}
	if t.Rank < 0 {
		return nil, &ParseError{File: file, Line: l.line, Field: "rank", Msg: "no connect line"}
	}
	return t, nil
}
