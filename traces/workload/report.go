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

// Breakdown attributes the critical path of a phase to the mechanisms it
// went through, in microseconds: from the phase start through the GIN
// operation that released the slowest receiver's last signal (its events,
// traces/critpath) to that receiver finishing. The parts add up to
// TotalUS.
type Breakdown struct {
	// GPUIssueUS: from the phase start until the operation's descriptor
	// was written and, for GDAKI, its doorbell issued (the warp's work
	// before the call, credits, the call itself).
	GPUIssueUS float64 `json:"gpu_issue_us"`
	// ProxyUS: from the GFD landing in host memory until the CPU proxy's
	// ibv_post_send returned (Proxy backend only).
	ProxyUS float64 `json:"proxy_us"`
	// PCIeUS: the sender's crossings of PCIe, each with its queueing for
	// the links' bandwidth: the GFD stores (Proxy), the doorbell MMIO, and
	// the NIC's reads of the WQE and of the first packet's payload.
	PCIeUS float64 `json:"pcie_us"`
	// NICUS: the sending NIC's own time until the first packet left:
	// doorbell handling, WQE pipeline, waiting behind other send queues
	// and for the port, the rate limiter.
	NICUS float64 `json:"nic_us"`
	// WireUS: first request packet sent until the last one reached the
	// target NIC (serialisation, links, switches and their queues).
	WireUS float64 `json:"wire_us"`
	// RemoteWriteUS: the target NIC's receive pipeline and its DMA write
	// or atomic into GPU memory.
	RemoteWriteUS float64 `json:"remote_write_us"`
	// SignalSeenUS: from the signal word changing until the receiver's
	// wait returned. With no GIN operation behind the signal (an NVLink
	// store or a local atomic) it runs from the phase start.
	SignalSeenUS float64 `json:"signal_seen_us"`
	// ReceiverUS: the receiver's work after its wait, until it finished.
	ReceiverUS float64 `json:"receiver_us"`
	// TotalUS is the phase time.
	TotalUS float64 `json:"total_us"`
	// Bound names, for the parts that cross shared resources, the
	// busiest resource the operation crossed there, with its utilisation
	// over the phase.
	Bound *PartBound `json:"bound,omitempty"`
}

// PartBound names the busiest resource of each resource-bound part of a
// breakdown (nil: the part used none).
type PartBound struct {
	PCIe        *ResourceUse `json:"pcie,omitempty"`
	NIC         *ResourceUse `json:"nic,omitempty"`
	Wire        *ResourceUse `json:"wire,omitempty"`
	RemoteWrite *ResourceUse `json:"remote_write,omitempty"`
}

// ResourceUse is one machine resource (as the phase's resources name it)
// and its utilisation over the phase.
type ResourceUse struct {
	Kind string  `json:"kind"`
	Name string  `json:"name"`
	Dir  string  `json:"dir,omitempty"`
	Util float64 `json:"util"`
}

// String is "kind name dir util%" ("gpu-pcie n0/gpu2 up 93.1%").
func (u *ResourceUse) String() string {
	s := u.Kind + " " + u.Name
	if u.Dir != "" {
		s += " " + u.Dir
	}
	return fmt.Sprintf("%s %.1f%%", s, 100*u.Util)
}

// round3 keeps nanosecond resolution in microsecond figures so that JSON
// and tables stay readable; the values are deterministic either way.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
