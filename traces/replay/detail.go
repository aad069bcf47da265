package replay

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces/timeline"
)

// detail builds a step's per-warp and per-QP timeline tracks
// (Options.TimelineDetail) from the step's obs events:
//
//   - a warp (a device group: a coop, or one thread of a coop's parallel
//     section) is the agent of gin front-end and backend events. Its track
//     has one "active" slice from its first to its last observed instant
//     and, inside it, its blocking waits: signal, VA signal and counter
//     waits, flushes, flushAsync waits and barriers (from the call,
//     obs.SignalSeen's and Completed's Then, to the return), GDAKI CQ polls
//     (obs.Poll to Consumed of that CQE) and proxy credit waits (obs.
//     CreditWait to the GFD's Posted). A group launched waiting (gpu.GPU.
//     LaunchWaiting) shows its wait from its launch. Words a kernel polls
//     without a GIN call (HT's handlers) show no wait.
//   - a QP's track has a "busy" slice while the NIC holds WQEs of it that
//     it has fetched and not yet retired (obs.Fetched to Acked), and a
//     counter track of that number. A step ends when its last receiver is
//     done, which may be before its last ACKs arrive.
//
// It reads the run and never changes it.
type detail struct {
	owner map[string]int // GPU and NIC names -> rank
	warps map[string]*warpTrack
	qps   map[string]*qpTrack
}

type warpTrack struct {
	rank        int
	first, last sim.Time
	touched     bool
	ops         int
	waits       []detailSlice
	polls       map[pollKey]pollStart
	credits     map[pollKey]sim.Time
}

type pollKey struct {
	where string
	index uint64
}

type pollStart struct {
	at  sim.Time
	why string
}

type qpTrack struct {
	rank     int
	out      int
	maxOut   int
	wqes     int
	busyFrom sim.Time
	busy     []detailSlice
	pts      []timeline.Point
}

// detailSlice is one slice of a detail track.
type detailSlice struct {
	name       string
	start, end sim.Time
	args       []timeline.Arg
}

// detailTrack is one track of a step's detail, ready to draw.
type detailTrack struct {
	rank   int
	name   string // "warp dispatch/w2", "qp nic0/qp12"
	slices []detailSlice
	// counter, when set, names the track's counter (pts its points).
	counter string
	pts     []timeline.Point
}

func newDetail(m *machine.Machine, ep int) *detail {
	d := &detail{owner: map[string]int{}, warps: map[string]*warpTrack{}, qps: map[string]*qpTrack{}}
	for r, rk := range m.Ranks[:ep] {
		d.owner[rk.GPU.Name()] = r
		for _, n := range rk.NICs {
			d.owner[n.Name()] = r
		}
	}
	return d
}

// warp returns the track of agent who, nil when who is not a device
// group of the step's ranks (a proxy thread, a CPU agent).
func (d *detail) warp(who string) *warpTrack {
	if w, ok := d.warps[who]; ok {
		return w
	}
	g, _, ok := strings.Cut(who, "/")
	r, own := d.owner[g]
	if !ok || !own {
		return nil
	}
	w := &warpTrack{rank: r, polls: map[pollKey]pollStart{}, credits: map[pollKey]sim.Time{}}
	d.warps[who] = w
	return w
}

// qp returns the track of QP who ("<nic>/qpN"), nil when its NIC is not
// one of the step's ranks'.
func (d *detail) qp(who string) *qpTrack {
	if q, ok := d.qps[who]; ok {
		return q
	}
	i := strings.LastIndex(who, "/")
	if i < 0 {
		return nil
	}
	r, ok := d.owner[who[:i]]
	if !ok {
		return nil
	}
	q := &qpTrack{rank: r}
	d.qps[who] = q
	return q
}

func (w *warpTrack) touch(t sim.Time) {
	if !w.touched || t < w.first {
		w.first = t
	}
	if !w.touched || t > w.last {
		w.last = t
	}
	w.touched = true
}

// waitNames names the waits of SignalSeen and Completed events by Note.
var waitNames = map[string]string{
	"signal": "wait signal", "va signal": "wait VA signal", "counter": "wait counter",
	"flush": "flush", "wait": "wait flushAsync", "barrier": "barrier",
}

// Observe implements obs.Observer.
func (d *detail) Observe(e obs.Event) {
	switch e.Kind {
	case obs.Issued, obs.LSAStored, obs.Read:
		if w := d.warp(e.Who); w != nil {
			w.touch(e.At)
			if e.Kind != obs.Read {
				w.ops++
			}
		}
	case obs.SignalSeen, obs.Completed:
		w := d.warp(e.Who)
		if w == nil {
			return
		}
		w.touch(e.Then)
		w.touch(e.At)
		name, ok := waitNames[e.Note]
		if !ok {
			name = "wait " + e.Note
		}
		w.waits = append(w.waits, detailSlice{name: name, start: e.Then, end: e.At,
			args: []timeline.Arg{{Key: "ctx", Value: int(e.QP)}, {Key: "op", Value: uint64(e.Op)}}})
	case obs.Poll:
		if w := d.warp(e.Who); w != nil {
			w.touch(e.At)
			w.polls[pollKey{e.Where, e.Index}] = pollStart{e.At, e.Note}
		}
	case obs.Consumed:
		w := d.warp(e.Who)
		if w == nil {
			return
		}
		w.touch(e.At)
		k := pollKey{e.Where, e.Index}
		if p, ok := w.polls[k]; ok {
			delete(w.polls, k)
			w.waits = append(w.waits, detailSlice{name: "poll CQE (" + p.why + ")", start: p.at, end: e.At,
				args: []timeline.Arg{{Key: "channel", Value: e.Where}, {Key: "cqe", Value: e.Index}}})
		}
	case obs.CreditWait:
		if w := d.warp(e.Who); w != nil {
			w.touch(e.At)
			w.credits[pollKey{e.Where, e.Index}] = e.At
		}
	case obs.Posted:
		w := d.warp(e.Who)
		if w == nil {
			return
		}
		w.touch(e.At)
		k := pollKey{e.Where, e.Index}
		if at, ok := w.credits[k]; ok {
			delete(w.credits, k)
			w.waits = append(w.waits, detailSlice{name: "proxy credit", start: at, end: e.At,
				args: []timeline.Arg{{Key: "channel", Value: e.Where}, {Key: "gfd", Value: e.Index}}})
		}
	case obs.Fetched:
		q := d.qp(e.Who)
		if q == nil {
			return
		}
		if q.out == 0 {
			q.busyFrom, q.wqes, q.maxOut = e.At, 0, 0
		}
		q.out++
		q.wqes++
		q.maxOut = max(q.maxOut, q.out)
		q.pts = append(q.pts, timeline.Point{At: e.At, Value: float64(q.out)})
	case obs.Acked:
		q := d.qp(e.Who)
		if q == nil || q.out == 0 {
			return
		}
		q.out--
		q.pts = append(q.pts, timeline.Point{At: e.At, Value: float64(q.out)})
		if q.out == 0 {
			q.busy = append(q.busy, detailSlice{name: "busy", start: q.busyFrom, end: e.At,
				args: []timeline.Arg{{Key: "wqes", Value: q.wqes}, {Key: "max_outstanding", Value: q.maxOut}}})
		}
	}
}

// tracks returns the step's tracks: per rank, its warps in order of first
// activity, then its QPs in order of first busy instant (names break
// ties). The step stops when its last receiver is done, end: a QP still
// holding WQEs then is drawn busy until end (arg "open").
func (d *detail) tracks(end sim.Time) []detailTrack {
	var ws, qs []detailTrack
	for who, w := range d.warps {
		if !w.touched {
			continue
		}
		_, name, _ := strings.Cut(who, "/")
		sl := []detailSlice{{name: "active", start: w.first, end: w.last,
			args: []timeline.Arg{{Key: "ops", Value: w.ops}, {Key: "waits", Value: len(w.waits)}}}}
		ws = append(ws, detailTrack{rank: w.rank, name: "warp " + name, slices: nest(append(sl, w.waits...))})
	}
	for who, q := range d.qps {
		if q.out > 0 {
			q.busy = append(q.busy, detailSlice{name: "busy", start: q.busyFrom, end: max(end, q.busyFrom),
				args: []timeline.Arg{{Key: "wqes", Value: q.wqes}, {Key: "max_outstanding", Value: q.maxOut}, {Key: "open", Value: true}}})
			q.out = 0
		}
		if len(q.busy) == 0 {
			continue
		}
		i := strings.LastIndex(who, "/")
		j := strings.LastIndex(who[:i], "/")
		name := "qp " + who[j+1:]
		slices.SortStableFunc(q.pts, func(a, b timeline.Point) int { return cmp.Compare(a.At, b.At) })
		// One point per instant: the count after that instant's events.
		pts := q.pts[:0]
		for _, p := range q.pts {
			if n := len(pts); n > 0 && pts[n-1].At == p.At {
				pts[n-1] = p
				continue
			}
			pts = append(pts, p)
		}
		q.pts = pts
		qs = append(qs, detailTrack{rank: q.rank, name: name, slices: q.busy, counter: name + " outstanding WQEs", pts: q.pts})
	}
	order := func(a, b detailTrack) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.slices[0].start, b.slices[0].start), strings.Compare(a.name, b.name))
	}
	slices.SortFunc(ws, order)
	slices.SortFunc(qs, order)
	out := append(ws, qs...)
	slices.SortStableFunc(out, func(a, b detailTrack) int { return cmp.Compare(a.rank, b.rank) })
	return out
}

// nest orders a track's slices by start (longer first) and clips each
// one that starts inside an earlier one and ends after it, so that the
// slices of one track nest as the trace format wants.
func nest(sl []detailSlice) []detailSlice {
	slices.SortStableFunc(sl, func(a, b detailSlice) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	var stack []sim.Time
	for i := range sl {
		for len(stack) > 0 && stack[len(stack)-1] <= sl[i].start {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && sl[i].end > stack[len(stack)-1] {
			sl[i].end = stack[len(stack)-1]
		}
		stack = append(stack, sl[i].end)
	}
	return sl
}

// detailLayout gives each (rank, track name) of the detail its thread id,
// in order of first appearance over the steps; ids start after the
// phases and critical-path threads.
type detailLayout struct {
	tids map[detailKey]int
	next map[int]int
}

type detailKey struct {
	rank int
	name string
}

func newDetailLayout() *detailLayout {
	return &detailLayout{tids: map[detailKey]int{}, next: map[int]int{}}
}

// tid returns the thread of a track, naming it on first use.
func (l *detailLayout) tid(tw *timeline.Writer, rank int, name string) int {
	k := detailKey{rank, name}
	if t, ok := l.tids[k]; ok {
		return t
	}
	t := l.next[rank] + 2
	l.next[rank]++
	l.tids[k] = t
	tw.Thread(rank, t, name)
	return t
}

// writeDetail draws a step's detail tracks, base later than its clock.
func writeDetail(tw *timeline.Writer, lay *detailLayout, tracks []detailTrack, stepName string, base sim.Time) {
	for _, tr := range tracks {
		tid := lay.tid(tw, tr.rank, tr.name)
		for _, s := range tr.slices {
			tw.Slice(tr.rank, tid, s.name, stepName, base+s.start, s.end.Sub(s.start), s.args...)
		}
		if tr.counter != "" {
			pts := make([]timeline.Point, len(tr.pts))
			for i, p := range tr.pts {
				pts[i] = timeline.Point{At: base + p.At, Value: p.Value}
			}
			tw.CounterTrack(tr.rank, tr.counter, pts)
		}
	}
}
