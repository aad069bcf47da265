package replay

import (
	"fmt"
	"io"
	"strconv"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces/workload"
)

// MinResourceUtil is the utilisation below which a phase's resource is
// left out of the report's per-phase list (the binding resource is chosen
// among all of them).
const MinResourceUtil = 0.01

// PhaseReport is one phase of a step: the workload's report, the machine
// resources at least MinResourceUtil busy over the phase and the one that
// bound it.
type PhaseReport struct {
	workload.PhaseReport
	// Bound is the phase's most utilised resource and the runner-up of
	// another kind.
	Bound machine.Binding `json:"bound"`
	// Resources are the resources at least MinResourceUtil busy from the
	// phase's start to its last receiver.
	Resources []machine.Resource `json:"resources"`
}

// phaseOf reports a phase with its resources, all of them (unfiltered).
func phaseOf(pr workload.PhaseReport, all []machine.Resource) PhaseReport {
	p := PhaseReport{PhaseReport: pr, Bound: machine.Bind(all), Resources: []machine.Resource{}}
	for _, r := range all {
		if r.Util >= MinResourceUtil {
			p.Resources = append(p.Resources, r)
		}
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
	return snap
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
