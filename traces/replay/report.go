package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ginsim/ginsim/traces/workload"
)

// Report is the result of one replay: per-layer dispatch and combine times
// and DeepEP-defined bandwidths, their means, and a critical-path breakdown.
// Every field is derived from simulated time, so equal inputs give equal
// reports.
type Report struct {
	Trace   string `json:"trace"`
	Cluster string `json:"cluster"`
	Mode    string `json:"mode"`
	Backend string `json:"backend"`
	NVLink  bool   `json:"nvlink"`
	// RDMAOnly is set when --rdma-only turned off the library's default
	// NVLink path (ll, v2-direct, ncclep and the nccl backend).
	RDMAOnly bool `json:"rdma_only,omitempty"`
	// SMs is the SM count given with --sms (absent: the library's own).
	SMs     int    `json:"sms,omitempty"`
	Seed    uint64 `json:"seed"`
	EP      int    `json:"ep"`
	Nodes   int    `json:"nodes"`
	Model   string `json:"model"`
	Hidden  int    `json:"hidden"`
	TopK    int    `json:"top_k"`
	Experts int    `json:"experts"`
	Tokens  int    `json:"tokens_per_rank"`

	// QPsPerRank is num_qps_per_rank of the modes that take it (ll,
	// ncclep): one GIN context per local expert, the libraries' default
	// (absent: the mode sizes its own QPs).
	QPsPerRank int `json:"qps_per_rank,omitempty"`

	// Means over layers.
	DispatchUS   float64 `json:"dispatch_us"`
	CombineUS    float64 `json:"combine_us"`
	DispatchGBps float64 `json:"dispatch_GBps"`
	CombineGBps  float64 `json:"combine_GBps"`

	// Per-layer arrays, in layer order (same order as Layers).
	DispatchUSPerLayer   []float64 `json:"dispatch_us_per_layer"`
	CombineUSPerLayer    []float64 `json:"combine_us_per_layer"`
	DispatchGBpsPerLayer []float64 `json:"dispatch_GBps_per_layer"`
	CombineGBpsPerLayer  []float64 `json:"combine_GBps_per_layer"`

	Layers []LayerReport `json:"layers"`

	// Breakdown is the mean over layers of each phase's critical path.
	Breakdown PhaseBreakdowns `json:"breakdown"`
	// Bound names each phase's binding resource over every step (each
	// resource's busy time summed over the steps, over the phases' summed
	// durations).
	Bound PhaseBindings `json:"bound"`
	// Transport sums the layers' loss and retransmission counters;
	// RecvTail is the spread of the ranks' receive-done times.
	Transport Transport  `json:"transport"`
	RecvTail  PhaseTails `json:"recv_tail"`
	// Bandwidths are the means over layers of the layers' Bandwidths.
	Bandwidths *PhaseBandwidths `json:"bandwidths,omitempty"`
	// BandwidthDefinition says how the GB/s figures are computed.
	BandwidthDefinition string `json:"bandwidth_definition"`
	// Events is the number of simulation events fired, all layers.
	Events uint64 `json:"events"`
	// Check is what the semantic checker found (Options.Check only).
	Check *CheckReport `json:"check,omitempty"`
	// Notes lists modelling simplifications that apply to this run.
	Notes []string `json:"notes,omitempty"`

	// kernelSMs is the SMs the dispatch kernel ran on (the table's header).
	kernelSMs int
}

// LayerReport is one (iteration, layer) of a replay.
type LayerReport struct {
	Iter  int `json:"iter"`
	Layer int `json:"layer"`

	Dispatch PhaseReport `json:"dispatch"`
	Combine  PhaseReport `json:"combine"`
	// Transport counts the step's losses and retransmissions.
	Transport Transport `json:"transport"`
	// Bandwidths are the step's bandwidths under every definition the
	// library's test prints (absent for a library that prints one).
	Bandwidths *PhaseBandwidths `json:"bandwidths,omitempty"`
}

// PhaseBreakdowns pairs the breakdowns of the two phases.
type PhaseBreakdowns struct {
	Dispatch workload.Breakdown `json:"dispatch"`
	Combine  workload.Breakdown `json:"combine"`
}

// round3 keeps nanosecond resolution in microsecond figures so that JSON
// and tables stay readable; the values are deterministic either way.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// addBreakdown adds w times o to b.
func addBreakdown(b *workload.Breakdown, o workload.Breakdown, w float64) {
	b.GPUIssueUS += w * o.GPUIssueUS
	b.ProxyUS += w * o.ProxyUS
	b.PCIeUS += w * o.PCIeUS
	b.NICUS += w * o.NICUS
	b.WireUS += w * o.WireUS
	b.RemoteWriteUS += w * o.RemoteWriteUS
	b.SignalSeenUS += w * o.SignalSeenUS
	b.ReceiverUS += w * o.ReceiverUS
	b.TotalUS += w * o.TotalUS
}

// roundBreakdown rounds b's parts to the nanosecond.
func roundBreakdown(b *workload.Breakdown) {
	for _, v := range []*float64{&b.GPUIssueUS, &b.ProxyUS, &b.PCIeUS, &b.NICUS, &b.WireUS, &b.RemoteWriteUS,
		&b.SignalSeenUS, &b.ReceiverUS, &b.TotalUS} {
		*v = round3(*v)
	}
}

// finish computes the means and per-layer arrays from r.Layers.
func (r *Report) finish() {
	n := float64(len(r.Layers))
	r.DispatchUS, r.CombineUS, r.DispatchGBps, r.CombineGBps = 0, 0, 0, 0
	r.Breakdown = PhaseBreakdowns{}
	r.DispatchUSPerLayer = make([]float64, 0, len(r.Layers))
	r.CombineUSPerLayer = make([]float64, 0, len(r.Layers))
	r.DispatchGBpsPerLayer = make([]float64, 0, len(r.Layers))
	r.CombineGBpsPerLayer = make([]float64, 0, len(r.Layers))
	for _, l := range r.Layers {
		r.DispatchUS += l.Dispatch.US / n
		r.CombineUS += l.Combine.US / n
		r.DispatchGBps += l.Dispatch.GBps / n
		r.CombineGBps += l.Combine.GBps / n
		addBreakdown(&r.Breakdown.Dispatch, l.Dispatch.Breakdown, 1/n)
		addBreakdown(&r.Breakdown.Combine, l.Combine.Breakdown, 1/n)
		r.DispatchUSPerLayer = append(r.DispatchUSPerLayer, l.Dispatch.US)
		r.CombineUSPerLayer = append(r.CombineUSPerLayer, l.Combine.US)
		r.DispatchGBpsPerLayer = append(r.DispatchGBpsPerLayer, l.Dispatch.GBps)
		r.CombineGBpsPerLayer = append(r.CombineGBpsPerLayer, l.Combine.GBps)
	}
	r.DispatchUS, r.CombineUS = round3(r.DispatchUS), round3(r.CombineUS)
	r.DispatchGBps, r.CombineGBps = round3(r.DispatchGBps), round3(r.CombineGBps)
	roundBreakdown(&r.Breakdown.Dispatch)
	roundBreakdown(&r.Breakdown.Combine)
	// The parts' resources are the slowest layer's.
	if l, _ := slowest(r.Layers, dispatchOf); l != nil {
		r.Breakdown.Dispatch.Bound = l.Breakdown.Bound
	}
	if l, _ := slowest(r.Layers, combineOf); l != nil {
		r.Breakdown.Combine.Bound = l.Breakdown.Bound
	}
	r.finishTransport()
	r.finishBandwidths()
}

// finishBandwidths averages the layers' named bandwidths.
func (r *Report) finishBandwidths() {
	r.Bandwidths = nil
	if len(r.Layers) == 0 || r.Layers[0].Bandwidths == nil {
		return
	}
	n := float64(len(r.Layers))
	m := &PhaseBandwidths{Dispatch: Bandwidths{}, Combine: Bandwidths{}}
	for _, l := range r.Layers {
		for k, v := range l.Bandwidths.Dispatch {
			m.Dispatch[k] += v / n
		}
		for k, v := range l.Bandwidths.Combine {
			m.Combine[k] += v / n
		}
	}
	for _, b := range []Bandwidths{m.Dispatch, m.Combine} {
		for k, v := range b {
			b[k] = round3(v)
		}
	}
	r.Bandwidths = m
}

// WriteJSON writes r as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// pathHeader says which intra-node path ran, whether it is the library's
// default, and which flag gives the other one.
func (r *Report) pathHeader() string {
	lib := map[string]string{
		ModeLL:       "DeepEP's Buffer(allow_nvlink_for_low_latency_mode=True)",
		ModeV2Direct: "DeepEP V2's LSA stores to the peers of the node",
		ModeNCCLEP:   "NCCL EP's LSA stores to the peers of the node",
	}[r.Mode]
	if r.Backend == BackendNCCL {
		lib = "NCCL's P2P transport and PXN"
	}
	switch {
	case r.Mode == ModeHT:
		return "RDMA between rails, NVLink forwarding inside the node (DeepEP HT's only path)"
	case r.Mode == ModeV2Hybrid:
		return "RDMA between rail peers, NVLink forwarding inside the node (DeepEP V2 hybrid's only path)"
	case r.RDMAOnly:
		return "RDMA only (--rdma-only, as the published pure-RDMA tables; the library's default is NVLink inside the node: " + lib + ")"
	case r.NVLink:
		return "NVLink inside the node (the library's default: " + lib + "; --rdma-only for pure RDMA, as the published tables)"
	}
	return "RDMA only"
}

// WriteTable writes a per-layer table and a summary for people.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "trace %s  model %s (H %d, top-%d, %d experts)  EP %d on %d nodes (%s)\n",
		r.Trace, r.Model, r.Hidden, r.TopK, r.Experts, r.EP, r.Nodes, r.Cluster)
	nv := r.pathHeader()
	sms := ""
	switch {
	case r.SMs > 0:
		sms = fmt.Sprintf("  %d SMs (--sms)", r.SMs)
	case r.kernelSMs > 0 && r.Mode == ModeHT:
		sms = fmt.Sprintf("  %d SMs (DeepEP's test_internode.py; the library's Buffer.num_sms is 20)", r.kernelSMs)
	case r.kernelSMs > 0:
		sms = fmt.Sprintf("  %d SMs (library default)", r.kernelSMs)
	}
	qps := ""
	if r.QPsPerRank > 0 {
		qps = fmt.Sprintf("  %d QPs/rank (num_experts / num_ranks, the library's default)", r.QPsPerRank)
	}
	fmt.Fprintf(w, "mode %s  backend %s  %s%s%s  %d tokens/rank  seed %d\n\n", r.Mode, r.Backend, nv, sms, qps, r.Tokens, r.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "iter\tlayer\tdispatch us\tdispatch GB/s\tcombine us\tcombine GB/s\tmsgs\tRDMA MB\t")
	for _, l := range r.Layers {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t\n", l.Iter, l.Layer, l.Dispatch.US, l.Dispatch.GBps,
			l.Combine.US, l.Combine.GBps, l.Dispatch.Messages+l.Combine.Messages,
			float64(l.Dispatch.RDMABytes+l.Combine.RDMABytes)/1e6)
	}
	fmt.Fprintf(tw, "mean\t\t%.1f\t%.1f\t%.1f\t%.1f\t\t\t\n", r.DispatchUS, r.DispatchGBps, r.CombineUS, r.CombineGBps)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncritical path (slowest receiver's last signal), mean us:\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tGPU issue\tproxy\tPCIe\tNIC\twire\tremote write\tsignal seen\treceiver\ttotal\t")
	for _, p := range []struct {
		name string
		b    workload.Breakdown
	}{{"dispatch", r.Breakdown.Dispatch}, {"combine", r.Breakdown.Combine}} {
		b := p.b
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", p.name, b.GPUIssueUS, b.ProxyUS,
			b.PCIeUS, b.NICUS, b.WireUS, b.RemoteWriteUS, b.SignalSeenUS, b.ReceiverUS, b.TotalUS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeCrossing(w, r.Layers)
	r.writeBound(w)
	for _, l := range r.Layers {
		if l.Dispatch.NCCL == nil {
			break
		}
		fmt.Fprintf(w, "\nnccl, iter %d layer %d:\n  dispatch: %v\n  combine:  %v\n", l.Iter, l.Layer, l.Dispatch.NCCL,
			l.Combine.NCCL)
	}
	r.writeTransport(w)
	if c := r.Check; c != nil {
		fmt.Fprintf(w, "\ncheck (gin/check): %d events, %d ops, %d landings, %d updates, %d waits/reads: %d violations\n",
			c.Events, c.Ops, c.Landings, c.Updates, c.Observed, c.Violations)
		if c.Live > 0 {
			fmt.Fprintf(w, "  %d ops still in flight when their step stopped (not judged lost)\n", c.Live)
		}
		if c.First != "" {
			fmt.Fprintf(w, "  first: %s\n", c.First)
		}
	}
	fmt.Fprintf(w, "\nbandwidth: %s\n", r.BandwidthDefinition)
	if b := r.Bandwidths; b != nil {
		for _, p := range []struct {
			name string
			bw   Bandwidths
		}{{"dispatch", b.Dispatch}, {"combine", b.Combine}} {
			fmt.Fprintf(w, "  %s:", p.name)
			for _, k := range slices.Sorted(maps.Keys(p.bw)) {
				fmt.Fprintf(w, " %s %.1f", k, p.bw[k])
			}
			fmt.Fprintln(w)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func dispatchOf(l *LayerReport) *workload.PhaseReport { return &l.Dispatch.PhaseReport }
func combineOf(l *LayerReport) *workload.PhaseReport  { return &l.Combine.PhaseReport }

// slowest returns the layer whose phase (get) took longest among those
// with a critical signal, and that phase (nil, nil: none had one).
func slowest(layers []LayerReport, get func(*LayerReport) *workload.PhaseReport) (*workload.PhaseReport, *LayerReport) {
	var slow *workload.PhaseReport
	var at *LayerReport
	for i := range layers {
		if p := get(&layers[i]); p.Critical != nil && (slow == nil || p.US > slow.US) {
			slow, at = p, &layers[i]
		}
	}
	return slow, at
}

// writeCrossing prints, for each phase, where the critical signal of its
// slowest layer went, which NIC ports it crossed and the busiest resource
// each part of its path crossed.
func writeCrossing(w io.Writer, layers []LayerReport) {
	for _, ph := range []struct {
		name string
		get  func(*LayerReport) *workload.PhaseReport
	}{{"dispatch", dispatchOf}, {"combine", combineOf}} {
		slow, at := slowest(layers, ph.get)
		if slow == nil {
			continue
		}
		c := slow.Critical
		fmt.Fprintf(w, "%s's critical signal (iter %d layer %d): rank %d -> rank %d over %s", ph.name, at.Iter, at.Layer,
			c.From, c.To, c.Via)
		if len(c.Links) == 2 {
			fmt.Fprintf(w, ", %s -> %s", c.Links[0], c.Links[1])
		}
		fmt.Fprintln(w)
		if b := slow.Breakdown.Bound; b != nil {
			var parts []string
			for _, p := range []struct {
				name string
				u    *workload.ResourceUse
			}{{"PCIe", b.PCIe}, {"NIC", b.NIC}, {"wire", b.Wire}, {"remote write", b.RemoteWrite}} {
				if p.u != nil {
					parts = append(parts, p.name+" "+p.u.String())
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, "  busiest on its path: %s\n", strings.Join(parts, "; "))
			}
		}
	}
}
