package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/ginsim/ginsim/traces/workload"
)

// MinResourceUtil is the utilisation below which a phase's resource is
// left out of the report's per-phase list (the binding resource is chosen
// among all of them).
const MinResourceUtil = 0.01

// MaxPhaseResources caps the resources a phase lists: the busiest first.
// A 16-GPU step has about 200 resources above MinResourceUtil, which
// would make the JSON 25 times larger for little: the binding one and its
// runners-up are what a reader looks for.
const MaxPhaseResources = 16

// PhaseReport is one phase of a step: the workload's report, the busiest
// machine resources over the phase (at most MaxPhaseResources, each at
// least MinResourceUtil busy) and the one that bound it.
type PhaseReport struct {
	workload.PhaseReport
	// Bound is the phase's most utilised resource and the runner-up of
	// another kind.
	Bound machine.Binding `json:"bound"`
	// Resources are the busiest resources from the phase's start to its
	// last receiver, most utilised first (ties by name and direction).
	Resources []machine.Resource `json:"resources"`
}

// phaseOf reports a phase with its critical path and its resources, all
// of them (unfiltered).
func phaseOf(pr workload.PhaseReport, cr critical, all []machine.Resource) PhaseReport {
	pr.Breakdown, pr.Critical = cr.b, cr.c
	p := PhaseReport{PhaseReport: pr, Bound: machine.Bind(all), Resources: []machine.Resource{}}
	for _, r := range all {
		if r.Util >= MinResourceUtil {
			p.Resources = append(p.Resources, r)
		}
	}
	// all is sorted by kind and name; a stable sort keeps that among equals.
	slices.SortStableFunc(p.Resources, func(a, b machine.Resource) int { return cmp.Compare(b.Util, a.Util) })
	if len(p.Resources) > MaxPhaseResources {
		p.Resources = p.Resources[:MaxPhaseResources]
	}
	return p
}

// PhaseBindings pairs the binding resources of the two phases over every
// step.
type PhaseBindings struct {
	Dispatch machine.Binding `json:"dispatch"`
	Combine  machine.Binding `json:"combine"`
}

// snapshotter takes snapshots of a step's machine, with the proxy threads
// of every communicator the step created (Proxy backend only).
type snapshotter struct {
	m     *machine.Machine
	proxy []*proxy.Backend
}

// take snapshots the machine now. Proxy threads of different
// communicators share a name; the second and later ones are numbered
// ("cpu3/proxy#1") in creation order, so that Since pairs them right.
func (s *snapshotter) take() machine.Snapshot {
	var threads []*proxy.Server
	for _, b := range s.proxy {
		threads = append(threads, b.Servers()...)
	}
	snap := s.m.Snapshot(threads)
	numberThreads(&snap)
	return snap
}

// numberThreads numbers the second and later like-named CPU threads of
// snap ("cpu3/proxy#1").
func numberThreads(snap *machine.Snapshot) {
	seen := map[string]int{}
	for i, r := range snap.Resources {
		if r.Kind != machine.KindCPU {
			continue
		}
		if c := seen[r.Name]; c > 0 {
			snap.Resources[i].Name += "#" + strconv.Itoa(c)
		}
		seen[r.Name]++
	}
}

// span is one phase's resources over one step.
type span struct {
	res []machine.Resource
	dur sim.Duration
}

// bindOver returns the binding resource over several steps' spans: each
// resource's busy time summed over the steps, over their summed durations.
func bindOver(spans []span) machine.Binding {
	type key struct {
		name string
		kind machine.Kind
		dir  string
	}
	idx := map[key]int{}
	var sum []machine.Resource
	var total sim.Duration
	for _, s := range spans {
		total += s.dur
		for _, r := range s.res {
			k := key{r.Name, r.Kind, r.Dir}
			i, ok := idx[k]
			if !ok {
				i = len(sum)
				idx[k] = i
				sum = append(sum, machine.Resource{Name: r.Name, Kind: r.Kind, Dir: r.Dir, Rate: r.Rate})
			}
			sum[i].Bytes += r.Bytes
			sum[i].Busy += r.Busy
			sum[i].Transfers += r.Transfers
			sum[i].Wait += r.Wait
			sum[i].WaitMax = max(sum[i].WaitMax, r.WaitMax)
		}
	}
	for i := range sum {
		if total > 0 {
			sum[i].Util = float64(sum[i].Busy) / float64(total)
		}
		if sum[i].Transfers > 0 {
			sum[i].WaitMean = sum[i].Wait / sim.Duration(sum[i].Transfers)
		}
	}
	return machine.Bind(sum)
}

// writeBound writes one line per phase: what bound it over every step.
func (r *Report) writeBound(w io.Writer) {
	fmt.Fprintf(w, "\nbinding resource (busiest over the phase, all steps):\n")
	fmt.Fprintf(w, "  dispatch: bound by %v\n", r.Bound.Dispatch)
	fmt.Fprintf(w, "  combine:  bound by %v\n", r.Bound.Combine)
}

// utilSampler snapshots a step's machine for the timeline's counter
// tracks: a machine.Sampler, which samples between windows (no event, so
// the report's event count is the model's), at the end of the first
// window to reach each sample's time, with the Proxy backends'
// like-named threads told apart.
type utilSampler struct {
	ms    *machine.Sampler
	snaps []machine.Snapshot
}

func newUtilSampler(snap *snapshotter, every sim.Duration) *utilSampler {
	var threads []*proxy.Server
	for _, b := range snap.proxy {
		threads = append(threads, b.Servers()...)
	}
	return &utilSampler{ms: snap.m.Sample(every, threads)}
}

// stop takes a last sample now and schedules no more.
func (u *utilSampler) stop() {
	u.ms.Stop()
	u.snaps = u.ms.Snapshots()
	for i := range u.snaps {
		numberThreads(&u.snaps[i])
	}
}

// utilTrack is one resource's utilisation over each sampling interval of
// a step, for a counter track.
type utilTrack struct {
	name string
	pts  []timeline.Point
}

// tracks returns, in snapshot order, the utilisation of every resource at
// least MinResourceUtil busy over some interval: Util over [At[i],
// At[i+1]) drawn at At[i], the last value repeated at the last sample.
func (u *utilSampler) tracks() []utilTrack {
	if len(u.snaps) < 2 {
		return nil
	}
	name := func(r machine.Resource) string {
		return strings.Join(slices.DeleteFunc([]string{string(r.Kind), r.Name, r.Dir, "util%"},
			func(s string) bool { return s == "" }), " ")
	}
	first := u.snaps[0].Resources
	out := make([]utilTrack, len(first))
	busy := make([]bool, len(first))
	idx := make(map[string]int, len(first))
	for i, r := range first {
		out[i].name = name(r)
		idx[out[i].name] = i
	}
	for k := 1; k < len(u.snaps); k++ {
		for _, r := range u.snaps[k].Since(u.snaps[k-1]) {
			i, ok := idx[name(r)]
			if !ok {
				continue // a thread that started after the first sample
			}
			out[i].pts = append(out[i].pts, timeline.Point{At: u.snaps[k-1].At, Value: round3(100 * r.Util)})
			busy[i] = busy[i] || r.Util >= MinResourceUtil
		}
	}
	end := u.snaps[len(u.snaps)-1].At
	var kept []utilTrack
	for i, t := range out {
		if busy[i] {
			t.pts = append(t.pts, timeline.Point{At: end, Value: t.pts[len(t.pts)-1].Value})
			kept = append(kept, t)
		}
	}
	return kept
}
