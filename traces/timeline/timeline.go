package timeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/ginsim/ginsim/sim"
)

// Arg is one key/value shown in a slice's details pane. Value is a string,
// an integer type, a float64 or a bool.
type Arg struct {
	Key   string
	Value any
}

// Writer streams a Chrome trace. Call Close to finish the JSON document;
// the first write error is kept and returned by Close.
type Writer struct {
	w     *bufio.Writer
	n     int
	err   error
	close bool
}

// NewWriter starts a trace on w.
func NewWriter(w io.Writer) *Writer {
	tw := &Writer{w: bufio.NewWriter(w)}
	tw.raw(`{"displayTimeUnit":"ns","traceEvents":[`)
	return tw
}

func (w *Writer) raw(s string) {
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}

// ts formats a sim time as microseconds with six decimals (picoseconds).
func ts(t int64) string {
	neg := t < 0
	if neg {
		t = -t
	}
	s := strconv.FormatInt(t/1e6, 10) + "." + fmt.Sprintf("%06d", t%1e6)
	if neg {
		s = "-" + s
	}
	return s
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (w *Writer) begin(ph string, pid, tid int, name, cat string) {
	if w.close {
		panic("timeline: write after Close")
	}
	if w.n > 0 {
		w.raw(",\n")
	} else {
		w.raw("\n")
	}
	w.n++
	w.raw(`{"ph":"` + ph + `","pid":` + strconv.Itoa(pid) + `,"tid":` + strconv.Itoa(tid) + `,"name":` + quote(name))
	if cat != "" {
		w.raw(`,"cat":` + quote(cat))
	}
}

func (w *Writer) args(args []Arg) {
	if len(args) == 0 {
		return
	}
	w.raw(`,"args":{`)
	for i, a := range args {
		if i > 0 {
			w.raw(",")
		}
		w.raw(quote(a.Key) + ":")
		switch v := a.Value.(type) {
		case string:
			w.raw(quote(v))
		case int:
			w.raw(strconv.Itoa(v))
		case int64:
			w.raw(strconv.FormatInt(v, 10))
		case uint64:
			w.raw(strconv.FormatUint(v, 10))
		case sim.Bytes:
			w.raw(strconv.FormatInt(int64(v), 10))
		case sim.Duration:
			w.raw(quote(v.String()))
		case float64:
			w.raw(strconv.FormatFloat(v, 'g', -1, 64))
		case bool:
			w.raw(strconv.FormatBool(v))
		default:
			w.raw(quote(fmt.Sprint(v)))
		}
	}
	w.raw("}")
}

// Process names process pid (a track group, e.g. one node or one rank).
func (w *Writer) Process(pid int, name string) {
	w.begin("M", pid, 0, "process_name", "")
	w.args([]Arg{{"name", name}})
	w.raw("}")
	w.begin("M", pid, 0, "process_sort_index", "")
	w.args([]Arg{{"sort_index", pid}})
	w.raw("}")
}

// Thread names track tid of process pid (e.g. one warp group, a NIC port).
func (w *Writer) Thread(pid, tid int, name string) {
	w.begin("M", pid, tid, "thread_name", "")
	w.args([]Arg{{"name", name}})
	w.raw("}")
	w.begin("M", pid, tid, "thread_sort_index", "")
	w.args([]Arg{{"sort_index", tid}})
	w.raw("}")
}

// Slice writes a complete slice [start, start+dur) on track (pid, tid).
// Slices on one track must nest or follow one another.
func (w *Writer) Slice(pid, tid int, name, cat string, start sim.Time, dur sim.Duration, args ...Arg) {
	w.begin("X", pid, tid, name, cat)
	w.raw(`,"ts":` + ts(int64(start)) + `,"dur":` + ts(int64(dur)))
	w.args(args)
	w.raw("}")
}

// Instant writes a thread-scoped instant event.
func (w *Writer) Instant(pid, tid int, name, cat string, at sim.Time, args ...Arg) {
	w.begin("i", pid, tid, name, cat)
	w.raw(`,"ts":` + ts(int64(at)) + `,"s":"t"`)
	w.args(args)
	w.raw("}")
}

// Counter sets the counter track name of process pid to v at time at.
func (w *Writer) Counter(pid int, name string, at sim.Time, v float64) {
	w.begin("C", pid, 0, name, "")
	w.raw(`,"ts":` + ts(int64(at)))
	w.args([]Arg{{"value", v}})
	w.raw("}")
}

// Point is one value of a counter track at a time.
type Point struct {
	At    sim.Time
	Value float64
}

// CounterTrack writes a counter track of process pid: one "C" event per
// point, for example a link's utilisation sampled over a run. Points must
// be in time order (it panics otherwise: a programming error); a point
// equal in value to the one before it is left out, since a counter holds
// its value until the next event.
func (w *Writer) CounterTrack(pid int, name string, pts []Point) {
	for i, p := range pts {
		if i > 0 && p.At < pts[i-1].At {
			panic(fmt.Sprintf("timeline: counter %q: point %d at %v before %v", name, i, p.At, pts[i-1].At))
		}
		if i > 0 && i < len(pts)-1 && p.Value == pts[i-1].Value {
			continue
		}
		w.Counter(pid, name, p.At, p.Value)
	}
}

// CounterSeries writes one "C" event carrying several named series of
// process pid's counter track name at time at; Perfetto draws each arg as
// its own series (e.g. a port's "tx" and "rx" utilisation).
func (w *Writer) CounterSeries(pid int, name string, at sim.Time, series ...Arg) {
	w.begin("C", pid, 0, name, "")
	w.raw(`,"ts":` + ts(int64(at)))
	w.args(series)
	w.raw("}")
}

// Flow draws an arrow from the slice enclosing (fromPid, fromTid, from) to
// the slice enclosing (toPid, toTid, to); id must be unique per arrow.
func (w *Writer) Flow(id uint64, name string, fromPid, fromTid int, from sim.Time, toPid, toTid int, to sim.Time) {
	w.begin("s", fromPid, fromTid, name, "flow")
	w.raw(`,"id":` + strconv.FormatUint(id, 10) + `,"ts":` + ts(int64(from)) + "}")
	w.begin("f", toPid, toTid, name, "flow")
	w.raw(`,"id":` + strconv.FormatUint(id, 10) + `,"ts":` + ts(int64(to)) + `,"bp":"e"}`)
}

// Events returns the number of events written so far.
func (w *Writer) Events() int { return w.n }

// Close ends the JSON document and flushes; it returns the first error.
func (w *Writer) Close() error {
	if w.close {
		return w.err
	}
	w.close = true
	w.raw("\n]}\n")
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}
