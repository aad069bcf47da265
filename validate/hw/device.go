package hw

import (
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/ginsim/ginsim/sim"
)

// Device is one case's device run: both ranks' results and the plugin's
// traces.
type Device struct {
	Results [Ranks]*RankResult
	Traces  [Ranks]*Trace
	// Reads are the bytes each rank's read ops read (conformance cases).
	Reads [Ranks][]byte
}

// LoadDevice reads the results of case name with fabric fab from fsys
// (NAME.FAB.r0.txt, NAME.FAB.r1.txt and NAME.FAB.trace.* as run.sh writes
// them). A missing result file is an error; missing traces are not.
func LoadDevice(fsys fs.FS, name, fab string) (*Device, error) {
	d := &Device{}
	for r := range Ranks {
		p := fmt.Sprintf("%s.%s.r%d.txt", name, fab, r)
		f, err := fsys.Open(p)
		if err != nil {
			return nil, err
		}
		res, err := ParseResult(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		if res.Rank != r {
			return nil, &ParseError{File: p, Line: 1, Field: "rank", Msg: fmt.Sprintf("rank %d in rank %d's file", res.Rank, r)}
		}
		d.Results[r] = res
		if res.Reads > 0 {
			if d.Reads[r], err = loadReads(fsys, p, res.Reads); err != nil {
				return nil, err
			}
		}
	}
	traces, err := fs.Glob(fsys, name+"."+fab+".trace.*")
	if err != nil {
		return nil, err
	}
	sort.Strings(traces)
	for _, p := range traces {
		f, err := fsys.Open(p)
		if err != nil {
			return nil, err
		}
		t, err := ParseTrace(f, path.Base(p))
		f.Close()
		if err != nil {
			return nil, err
		}
		if t.Rank < Ranks {
			d.Traces[t.Rank] = t
		}
	}
	return d, nil
}

// Outcome puts d in the model's shape for c's programs: op kinds and
// order come from the file, checked against the result lines.
func (d *Device) Outcome(c Case) (*Outcome, error) {
	out := &Outcome{}
	bugs := 0
	for r := range Ranks {
		res := d.Results[r]
		ro := &out.Ranks[r]
		ro.Signals, ro.Counters, ro.Windows = res.Signals, res.Counters, res.Windows
		ro.Finished, ro.Msg = res.Done && res.Stuck == "", res.Msg
		pi := progIndex(c.File.Programs, r)
		if pi < 0 {
			continue
		}
		ops := c.File.Programs[pi].Ops
		if len(res.Ops) > len(ops) {
			return nil, fmt.Errorf("hw: %s rank %d: %d op results for a program of %d ops", c.Name, r, len(res.Ops), len(ops))
		}
		var origin int64
		if len(res.Ops) > 0 {
			origin = res.Ops[0].T0
		}
		var tp [Ranks][]TracePost
		if t := d.Traces[r]; t != nil {
			for _, p := range t.Posts {
				if p.Peer < Ranks {
					tp[p.Peer] = append(tp[p.Peer], p)
				}
			}
			bugs += t.Bugged
		}
		var next [Ranks]int
		for i, op := range ops {
			kind := execKind(op.Op)
			o := OpOutcome{Kind: op.Op, Status: "not reached", Post: -1}
			if i < len(res.Ops) {
				h := res.Ops[i]
				if h.Kind != kind {
					return nil, fmt.Errorf("hw: %s rank %d op %d: result is a %s, the program's op a %s", c.Name, r, i, h.Kind, kind)
				}
				o.Status, o.Value = h.Status, h.Value
				o.Start, o.End = sim.Duration(h.T0-origin)*sim.Nanosecond, sim.Duration(h.T1-origin)*sim.Nanosecond
				if posts(op.Op) && op.Peer < Ranks {
					if k := next[op.Peer]; k < len(tp[op.Peer]) {
						o.Post = sim.Duration(tp[op.Peer][k].At-res.ToHost(origin)) * sim.Nanosecond
					}
					next[op.Peer]++
				}
			}
			ro.Ops = append(ro.Ops, o)
		}
	}
	if bugs > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("NCCL 2.28.9 putValue bug seen %d time(s): the inline value was written "+
			"outside NCCL's inline buffer and its signal dropped (fixed in 2.29.7)", bugs))
	}
	return out, nil
}

// Diff is one disagreement between two outcomes.
type Diff struct {
	Rank int
	What string
}

func (d Diff) String() string { return fmt.Sprintf("rank %d: %s", d.Rank, d.What) }

// Compare lists where a and b (model, device) disagree: op status and read
// values, final signals, counters and window contents, completion.
func Compare(model, dev *Outcome) []Diff {
	var out []Diff
	for r := range Ranks {
		a, b := &model.Ranks[r], &dev.Ranks[r]
		if a.Finished != b.Finished {
			out = append(out, Diff{r, fmt.Sprintf("finished: model %v, device %v", a.Finished, b.Finished)})
		}
		for i := range min(len(a.Ops), len(b.Ops)) {
			x, y := a.Ops[i], b.Ops[i]
			switch {
			case x.Status != y.Status:
				out = append(out, Diff{r, fmt.Sprintf("op %d %s: model %s (%d), device %s (%d)", i, x.Kind, x.Status, x.Value, y.Status, y.Value)})
			case x.Value != y.Value:
				out = append(out, Diff{r, fmt.Sprintf("op %d %s: model read %d, device %d", i, x.Kind, x.Value, y.Value)})
			}
		}
		words := func(what string, x, y []uint64, hex bool) {
			for i := range max(len(x), len(y)) {
				var u, v uint64
				if i < len(x) {
					u = x[i]
				}
				if i < len(y) {
					v = y[i]
				}
				if u != v {
					if hex {
						out = append(out, Diff{r, fmt.Sprintf("%s %d content differs (fnv %016x vs %016x)", what, i, u, v)})
					} else {
						out = append(out, Diff{r, fmt.Sprintf("%s %d: model %d, device %d", what, i, u, v)})
					}
				}
			}
		}
		words("signal", a.Signals, b.Signals, false)
		words("counter", a.Counters, b.Counters, false)
		words("window", a.Windows, b.Windows, true)
	}
	return out
}

// Wire is the median time from a plugin post to the target's
// acknowledgement (data and signal in the target's memory) over every
// delivery of the run, with the count: the emulated network's share of a
// device time (host staging copies, the emulated link, the target's
// copy and signal kernel).
func (d *Device) Wire() (sim.Duration, int) {
	var xs []sim.Duration
	for _, t := range d.Traces {
		if t == nil {
			continue
		}
		for _, v := range t.Deliveries {
			xs = append(xs, sim.Duration(v.Done-v.Posted)*sim.Nanosecond)
		}
	}
	if len(xs) == 0 {
		return 0, 0
	}
	return median(xs), len(xs)
}

// Timing is one timing that is real on both sides, as the median over the
// ops it covers.
type Timing struct {
	Name          string
	N             int
	Model, Device sim.Duration
}

// Ratio is device over model.
func (t Timing) Ratio() float64 {
	if t.Model == 0 {
		return 0
	}
	return float64(t.Device) / float64(t.Model)
}

// Timings lines up rank 0's timings: a descriptor op's issue on the GPU
// (start to end: building and writing the GFD), its start to the proxy's
// post (NCCL's proxy thread picking it up and calling the plugin; the
// model's ibv_post_send), the same from the op's end (the host side
// alone), and, for a descriptor op followed by a
// wait_signal, start to the signal seen (the round trip through the
// network: a ping-pong's when the other side answers).
//
// With model nil the timings are the device's alone (Model 0).
func Timings(model, dev *Outcome) []Timing {
	type acc struct{ m, d []sim.Duration }
	var issue, post, pickup, rt acc
	b := dev.Ranks[0].Ops
	a := b
	if model != nil {
		a = model.Ranks[0].Ops
	}
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.Status != "ok" || y.Status != "ok" {
			continue
		}
		if posts(x.Kind) {
			issue.m, issue.d = append(issue.m, x.End-x.Start), append(issue.d, y.End-y.Start)
			if x.Post >= 0 && y.Post >= 0 {
				post.m, post.d = append(post.m, x.Post-x.Start), append(post.d, y.Post-y.Start)
				pickup.m, pickup.d = append(pickup.m, x.Post-x.End), append(pickup.d, y.Post-y.End)
			}
		}
		if x.Kind == "wait_signal" && i > 0 && posts(a[i-1].Kind) && a[i-1].Status == "ok" && b[i-1].Status == "ok" {
			rt.m, rt.d = append(rt.m, x.End-a[i-1].Start), append(rt.d, y.End-b[i-1].Start)
		}
	}
	var out []Timing
	for _, t := range []struct {
		name string
		a    acc
	}{{"GFD op issue on the GPU", issue}, {"op start -> proxy post", post}, {"GFD written -> proxy post", pickup},
		{"op start -> signal seen", rt}} {
		if len(t.a.m) > 0 {
			tm := Timing{Name: t.name, N: len(t.a.m), Device: median(t.a.d)}
			if model != nil {
				tm.Model = median(t.a.m)
			}
			out = append(out, tm)
		}
	}
	return out
}

func median(xs []sim.Duration) sim.Duration {
	s := append([]sim.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// execKind is the executor's name of a program op.
func execKind(op string) string {
	switch op {
	case "compute":
		return "sleep"
	case "barrier":
		return "barrier_rail"
	}
	return op
}

// ModelFabric is what a run on the model-timed fabric (GINHW_FABRIC=
// model:SOCKET) did, as medians over the messages whose fabric reply and
// delivery both are in the traces: from the sender's plugin call (post) to
// the model's delivery instant (Model), to the reply reaching the sender's
// plugin (Reply), and to the data and signal acknowledged in the target's
// memory (Device); Behind is the median of Device - Model, per message:
// how far the emulation trailed the model. Late counts the messages whose
// reply came after the model's instant (the target could not deliver
// then).
type ModelFabric struct {
	N                            int
	Model, Reply, Device, Behind sim.Duration
	Late                         int
}

// ModelFabric matches each fabric reply (sender's trace) with its
// delivery (target's trace) by sender, collComm and sequence. N is 0 for a
// run on another fabric.
func (d *Device) ModelFabric() ModelFabric {
	type key struct {
		from, coll int
		seq        uint64
	}
	dlv := map[key]TraceDelivery{}
	for _, t := range d.Traces {
		if t == nil {
			continue
		}
		for _, v := range t.Deliveries {
			dlv[key{v.From, v.Coll, v.Seq}] = v
		}
	}
	var out ModelFabric
	var model, reply, device, behind []sim.Duration
	for r, t := range d.Traces {
		if t == nil {
			continue
		}
		for _, m := range t.Model {
			v, ok := dlv[key{r, m.Coll, m.Seq}]
			if !ok {
				continue
			}
			ns := func(a, b int64) sim.Duration { return sim.Duration(a-b) * sim.Nanosecond }
			model = append(model, ns(m.Deliver, v.Posted))
			reply = append(reply, ns(m.Arrived, v.Posted))
			device = append(device, ns(v.Done, v.Posted))
			behind = append(behind, ns(v.Done, m.Deliver))
			if m.Arrived > m.Deliver {
				out.Late++
			}
		}
	}
	if out.N = len(model); out.N == 0 {
		return out
	}
	out.Model, out.Reply, out.Device, out.Behind = median(model), median(reply), median(device), median(behind)
	return out
}
