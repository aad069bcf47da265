package moe

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
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
	Seed    uint64 `json:"seed"`
	EP      int    `json:"ep"`
	Nodes   int    `json:"nodes"`
	Model   string `json:"model"`
	Hidden  int    `json:"hidden"`
	TopK    int    `json:"top_k"`
	Experts int    `json:"experts"`
	Tokens  int    `json:"tokens_per_rank"`

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
	// Transport sums the layers' loss and retransmission counters;
	// RecvTail is the spread of the ranks' receive-done times.
	Transport Transport  `json:"transport"`
	RecvTail  PhaseTails `json:"recv_tail"`
	// BandwidthDefinition says how the GB/s figures are computed.
	BandwidthDefinition string `json:"bandwidth_definition"`
	// Events is the number of simulation events fired, all layers.
	Events uint64 `json:"events"`
	// Notes lists modelling simplifications that apply to this run.
	Notes []string `json:"notes,omitempty"`
}

// LayerReport is one (iteration, layer) of a replay.
type LayerReport struct {
	Iter  int `json:"iter"`
	Layer int `json:"layer"`

	Dispatch PhaseReport `json:"dispatch"`
	Combine  PhaseReport `json:"combine"`
	// Transport counts the step's losses and retransmissions.
	Transport Transport `json:"transport"`
}

// PhaseReport is one dispatch or combine phase.
type PhaseReport struct {
	// US is the kernel-only time: first issue on any rank to the last
	// receiver done, in microseconds.
	US float64 `json:"us"`
	// GBps is BandwidthBytes / US (GB/s = 1e9 B/s), per rank as DeepEP
	// reports it: the mean over ranks of each rank's bytes / the phase time.
	GBps float64 `json:"GBps"`
	// BandwidthBytes is the DeepEP bandwidth numerator summed over ranks.
	BandwidthBytes int64 `json:"bandwidth_bytes"`
	// Messages counts the data messages (puts, records or WRITE chains).
	Messages int64 `json:"messages"`
	// Signals counts the signal / flag / counter operations.
	Signals int64 `json:"signals"`
	// RDMABytes counts the payload bytes sent by RDMA (through a NIC,
	// loopback included; not NVLink).
	RDMABytes int64 `json:"rdma_bytes"`
	// RecvDoneUS is, per rank, when its receive side finished, relative to
	// the phase start.
	RecvDoneUS []float64 `json:"recv_done_us"`
	// Breakdown is the critical path of the slowest receiver.
	Breakdown Breakdown `json:"breakdown"`
	// NCCL says how the host-initiated baseline moved the phase (backend
	// nccl only).
	NCCL *NCCLFacts `json:"nccl,omitempty"`
}

// NCCLFacts counts the connections (sender, receiver, channel) of one
// phase of the NCCL baseline by the path NCCL picked for them.
type NCCLFacts struct {
	// Sends is the all-to-all-v's connections that carry data.
	Sends int `json:"sends"`
	// P2P went GPU to GPU inside a node (NVLink, --nvlink); NET through
	// a NIC, PXN those of them sent from another local GPU's NIC.
	P2P int `json:"p2p"`
	NET int `json:"net"`
	PXN int `json:"pxn"`
	// LL used the LL protocol (8-byte flag lines, no tail).
	LL int `json:"ll"`
	// IBConns is the phase's IB connections: the NET sends' (PXN sends
	// of several local GPUs through one NIC to one rank share one with
	// SharedComms) and the counts ring's.
	IBConns int `json:"ib_connections"`
	// RingSends is the connections of the counts all-gather (dispatch
	// only), RingLL whether it ran LL.
	RingSends int  `json:"ring_sends,omitempty"`
	RingLL    bool `json:"ring_ll,omitempty"`
}

// String is the one-line summary the table prints.
func (f *NCCLFacts) String() string {
	s := fmt.Sprintf("%d sends: %d P2P, %d NET (%d through PXN) over %d IB connections; %d LL", f.Sends, f.P2P, f.NET,
		f.PXN, f.IBConns, f.LL)
	if f.RingSends > 0 {
		proto := "Simple"
		if f.RingLL {
			proto = "LL"
		}
		s += fmt.Sprintf("; counts all-gather ring of %d sends, %s", f.RingSends, proto)
	}
	return s
}

// PhaseBreakdowns pairs the breakdowns of the two phases.
type PhaseBreakdowns struct {
	Dispatch Breakdown `json:"dispatch"`
	Combine  Breakdown `json:"combine"`
}

// Breakdown attributes the critical path of a phase (the path to the slowest
// receiver's last signal) to the mechanisms it went through, in
// microseconds. The parts add up to TotalUS.
type Breakdown struct {
	// GPUIssueUS: from the phase start until the critical operation's
	// issue returned on the GPU (warp issue work, credits, operations
	// queued ahead of it on the same warp).
	GPUIssueUS float64 `json:"gpu_issue_us"`
	// ProxyQueueUS: from the descriptor landing in host memory until the
	// CPU proxy posted it (Proxy and NCCL host path only).
	ProxyQueueUS float64 `json:"proxy_queue_us"`
	// DoorbellPCIeUS: doorbell MMIO, WQE fetch and payload DMA reads
	// over PCIe until the first packet is ready to transmit.
	DoorbellPCIeUS float64 `json:"doorbell_pcie_us"`
	// NICUS: waiting in the NIC's send queue and transmit pipeline
	// (behind earlier operations and other QPs) and serialisation.
	NICUS float64 `json:"nic_us"`
	// WireSwitchUS: links, switch latency and switch output queues until
	// the last packet reached the target NIC.
	WireSwitchUS float64 `json:"wire_switch_us"`
	// RemoteWriteUS: target NIC processing and the PCIe DMA write or
	// atomic into GPU memory (or the NVLink store, for LSA).
	RemoteWriteUS float64 `json:"remote_write_us"`
	// SignalVisibilityUS: from the signal landing in GPU memory until the
	// receiving warp saw it and finished.
	SignalVisibilityUS float64 `json:"signal_visibility_us"`
	// TotalUS is the phase time.
	TotalUS float64 `json:"total_us"`
}

func (b *Breakdown) add(o Breakdown, w float64) {
	b.GPUIssueUS += w * o.GPUIssueUS
	b.ProxyQueueUS += w * o.ProxyQueueUS
	b.DoorbellPCIeUS += w * o.DoorbellPCIeUS
	b.NICUS += w * o.NICUS
	b.WireSwitchUS += w * o.WireSwitchUS
	b.RemoteWriteUS += w * o.RemoteWriteUS
	b.SignalVisibilityUS += w * o.SignalVisibilityUS
	b.TotalUS += w * o.TotalUS
}

// round3 keeps nanosecond resolution in microsecond figures so that JSON
// and tables stay readable; the values are deterministic either way.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

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
		r.Breakdown.Dispatch.add(l.Dispatch.Breakdown, 1/n)
		r.Breakdown.Combine.add(l.Combine.Breakdown, 1/n)
		r.DispatchUSPerLayer = append(r.DispatchUSPerLayer, l.Dispatch.US)
		r.CombineUSPerLayer = append(r.CombineUSPerLayer, l.Combine.US)
		r.DispatchGBpsPerLayer = append(r.DispatchGBpsPerLayer, l.Dispatch.GBps)
		r.CombineGBpsPerLayer = append(r.CombineGBpsPerLayer, l.Combine.GBps)
	}
	r.DispatchUS, r.CombineUS = round3(r.DispatchUS), round3(r.CombineUS)
	r.DispatchGBps, r.CombineGBps = round3(r.DispatchGBps), round3(r.CombineGBps)
	for _, b := range []*Breakdown{&r.Breakdown.Dispatch, &r.Breakdown.Combine} {
		*b = Breakdown{round3(b.GPUIssueUS), round3(b.ProxyQueueUS), round3(b.DoorbellPCIeUS), round3(b.NICUS),
			round3(b.WireSwitchUS), round3(b.RemoteWriteUS), round3(b.SignalVisibilityUS), round3(b.TotalUS)}
	}
	r.finishTransport()
}

// WriteJSON writes r as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("moe: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// WriteTable writes a per-layer table and a summary for people.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "trace %s  model %s (H %d, top-%d, %d experts)  EP %d on %d nodes (%s)\n",
		r.Trace, r.Model, r.Hidden, r.TopK, r.Experts, r.EP, r.Nodes, r.Cluster)
	nv := "RDMA only"
	switch {
	case r.Mode == ModeHT:
		nv = "RDMA between rails, NVLink forwarding inside the node"
	case r.NVLink:
		nv = "NVLink inside the node"
	}
	fmt.Fprintf(w, "mode %s  backend %s  %s  %d tokens/rank  seed %d\n\n", r.Mode, r.Backend, nv, r.Tokens, r.Seed)
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
	fmt.Fprintln(tw, "phase\tGPU issue\tproxy queue\tdoorbell+PCIe\tNIC\twire+switch\tremote write\tsignal seen\ttotal\t")
	for _, p := range []struct {
		name string
		b    Breakdown
	}{{"dispatch", r.Breakdown.Dispatch}, {"combine", r.Breakdown.Combine}} {
		b := p.b
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", p.name, b.GPUIssueUS, b.ProxyQueueUS,
			b.DoorbellPCIeUS, b.NICUS, b.WireSwitchUS, b.RemoteWriteUS, b.SignalVisibilityUS, b.TotalUS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range r.Layers {
		if l.Dispatch.NCCL == nil {
			break
		}
		fmt.Fprintf(w, "\nnccl, iter %d layer %d:\n  dispatch: %v\n  combine:  %v\n", l.Iter, l.Layer, l.Dispatch.NCCL,
			l.Combine.NCCL)
	}
	r.writeTransport(w)
	fmt.Fprintf(w, "\nbandwidth: %s\n", r.BandwidthDefinition)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
