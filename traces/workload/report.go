package workload

import (
	"fmt"
	"math"
)

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
	// Critical says where the slowest receiver's last signal came from
	// and which links it crossed (nil when the phase followed none).
	Critical *Crossing `json:"critical,omitempty"`
	// NCCL says how the host-initiated baseline moved the phase (backend
	// nccl only).
	NCCL *NCCLFacts `json:"nccl,omitempty"`
}

// Crossing is where a phase's critical signal went: sender and receiver
// rank, "rdma" or "nvlink", and over RDMA the NIC ports it left and
// reached, named as a cluster file's faults section names links.
type Crossing struct {
	From  int      `json:"from_rank"`
	To    int      `json:"to_rank"`
	Via   string   `json:"via"`
	Links []string `json:"links,omitempty"`
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

// round3 keeps nanosecond resolution in microsecond figures so that JSON
// and tables stay readable; the values are deterministic either way.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
