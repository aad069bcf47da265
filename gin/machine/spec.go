package machine

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/sim"
)

// Topology kinds of Topology.Kind.
const (
	// TopoSingleSwitch attaches every NIC port to one non-blocking switch.
	TopoSingleSwitch = "single-switch"
	// TopoRailOptimized gives every rail (GPU local index) its own leaf
	// switch holding that rail's NIC of every node; leaves join through
	// spine switches, so same-rail traffic crosses one switch and
	// cross-rail traffic three (DGX SuperPOD style).
	TopoRailOptimized = "rail-optimized"
	// TopoLeafSpine puts each node's NICs on the node's leaf switch and
	// joins the leaves through spines.
	TopoLeafSpine = "leaf-spine"
	// TopoFatTree is a three-tier k-ary fat tree (edge, aggregation and
	// core switches; k³/4 NIC ports at most), ECMP over every uplink.
	TopoFatTree = "fat-tree"
)

// TopologyKinds lists the accepted topology kinds.
func TopologyKinds() []string {
	return []string{TopoSingleSwitch, TopoRailOptimized, TopoLeafSpine, TopoFatTree}
}

// Spec describes a cluster: its shape, link rates, topology and the name of
// the hardware profile that supplies every device's timing constants.
type Spec struct {
	// Name identifies the cluster in reports.
	Name string `yaml:"name"`
	// Description is free text.
	Description string `yaml:"description,omitempty"`
	// Profile names the hardware profile (see Profiles): GPU, NIC, PCIe,
	// NVLink and CPU-proxy configurations.
	Profile string `yaml:"profile"`
	// Nodes is the node count; 0 lets the workload choose
	// ceil(EP ranks / gpus_per_node).
	Nodes int `yaml:"nodes,omitempty"`
	// GPUsPerNode is the number of GPUs (EP ranks) per node.
	GPUsPerNode int `yaml:"gpus_per_node"`
	// NICsPerGPU is the number of NIC ports attached to each GPU's PCIe
	// switch.
	NICsPerGPU int `yaml:"nics_per_gpu"`
	// LinkRate is the rate of every NIC port and of the fabric links.
	LinkRate Rate `yaml:"link_rate"`
	// NVLink describes the node's GPU interconnect.
	NVLink NVLinkSpec `yaml:"nvlink"`
	// Topology describes the switched fabric between NIC ports.
	Topology Topology `yaml:"topology"`
	// Faults are what-if impairments (faults.go); zero: none.
	Faults Faults `yaml:"faults,omitempty"`

	// Hardware beyond the profile (hardware.go). The PCIe layout: GPUs
	// per PCIe switch (0: 2) and x16 downstream ports per switch (0: 8),
	// which bound the NICs a GPU can have. Then every device
	// configuration's fields over the profile's, by name.
	GPUsPerPCIeSwitch int    `yaml:"gpus_per_pcie_switch,omitempty"`
	PCIeSwitchPorts   int    `yaml:"pcie_switch_ports,omitempty"`
	GPU               Params `yaml:"gpu,omitempty"`
	NIC               Params `yaml:"nic,omitempty"`
	PCIe              Params `yaml:"pcie,omitempty"`
	Proxy             Params `yaml:"proxy,omitempty"`
	GDAKI             Params `yaml:"gdaki,omitempty"`
}

// NVLinkSpec is the scale-up domain of one node.
type NVLinkSpec struct {
	// Bandwidth is one GPU's NVLink rate per direction (half the
	// bidirectional figure vendors quote), as achieved by copy kernels.
	Bandwidth Rate `yaml:"bandwidth"`
	// Latency is the one-way latency of a store crossing the NVSwitch.
	Latency Duration `yaml:"latency"`
	// Params sets nvlink.Config's other fields (hardware.go).
	Params Params `yaml:",inline"`
}

// Topology is the fabric description.
type Topology struct {
	// Kind is one of TopologyKinds.
	Kind string `yaml:"kind"`
	// Spines is the spine switch count for rail-optimized and leaf-spine
	// topologies (0: one spine with a non-blocking number of uplinks per leaf;
	// otherwise it must divide each leaf's uplink count).
	Spines int `yaml:"spines,omitempty"`
	// SwitchLatency is a switch's port-to-port (cut-through) latency.
	SwitchLatency Duration `yaml:"switch_latency"`
	// CableDelay is the propagation delay of every link.
	CableDelay Duration `yaml:"cable_delay"`
	// Lossless gives switch ports unbounded buffers, standing for
	// InfiniBand's credit-based link-level flow control: congestion
	// queues instead of dropping, and the NICs run no DCQCN (IB's own
	// congestion control is not modelled). false keeps fabric/topo's
	// finite buffers, which tail-drop, with DCQCN on (lossy RoCE).
	Lossless bool `yaml:"lossless"`

	// The fabric's finer shape and switch buffers (hardware.go); zero
	// takes fabric/topo's default. Oversubscription is a leaf's
	// host-facing to spine-facing bandwidth ratio (default 1); K is a
	// fat tree's radix (default: the smallest even k holding the NIC
	// ports); PortBuffer is each switch egress queue (default 2MiB;
	// unbounded when lossless); ECN marks from ECNKmin (128KiB) to ECNKmax
	// (1MiB) of backlog, with probability up to ECNPmax (0.2).
	Oversubscription int     `yaml:"oversubscription,omitempty"`
	K                int     `yaml:"k,omitempty"`
	PortBuffer       Size    `yaml:"port_buffer,omitempty"`
	ECNKmin          Size    `yaml:"ecn_kmin,omitempty"`
	ECNKmax          Size    `yaml:"ecn_kmax,omitempty"`
	ECNPmax          float64 `yaml:"ecn_pmax,omitempty"`
}

// FieldError is a validation error on one field of a Spec. Field is the YAML
// path, such as "topology.kind".
type FieldError struct {
	Field string
	Msg   string
}

// Error formats the field and message.
func (e *FieldError) Error() string { return fmt.Sprintf("machine: field %q: %s", e.Field, e.Msg) }

// Limits on a Spec, beyond which a run would not fit a workstation or the
// model's assumptions.
const (
	MaxNodes       = 4096
	MaxGPUsPerNode = 72 // NVL72 is the largest NVLink domain modelled
	MaxNICsPerGPU  = 8
)

// Validate checks s and returns the first problem as a *FieldError.
func (s *Spec) Validate() error {
	fe := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if s.Name == "" {
		return fe("name", "must not be empty")
	}
	if _, ok := profileByName(s.Profile); !ok {
		return fe("profile", "unknown profile %q (have %v)", s.Profile, ProfileNames())
	}
	if s.Nodes < 0 || s.Nodes > MaxNodes {
		return fe("nodes", "%d out of range [0, %d]", s.Nodes, MaxNodes)
	}
	if s.GPUsPerNode < 1 || s.GPUsPerNode > MaxGPUsPerNode {
		return fe("gpus_per_node", "%d out of range [1, %d]", s.GPUsPerNode, MaxGPUsPerNode)
	}
	if s.NICsPerGPU < 1 || s.NICsPerGPU > MaxNICsPerGPU {
		return fe("nics_per_gpu", "%d out of range [1, %d]", s.NICsPerGPU, MaxNICsPerGPU)
	}
	if s.LinkRate <= 0 || int64(s.LinkRate)%int64(sim.Gbps) != 0 {
		return fe("link_rate", "%v must be a positive whole number of Gb/s", s.LinkRate)
	}
	if s.NVLink.Bandwidth <= 0 {
		return fe("nvlink.bandwidth", "must be positive")
	}
	if s.NVLink.Latency < 0 {
		return fe("nvlink.latency", "must not be negative")
	}
	switch s.Topology.Kind {
	case TopoSingleSwitch, TopoRailOptimized, TopoLeafSpine, TopoFatTree:
	default:
		return fe("topology.kind", "unknown kind %q (have %v)", s.Topology.Kind, TopologyKinds())
	}
	if s.Topology.Spines < 0 || s.Topology.Spines > 1024 {
		return fe("topology.spines", "%d out of range [0, 1024]", s.Topology.Spines)
	}
	if s.Topology.Kind == TopoSingleSwitch && s.Topology.Spines != 0 {
		return fe("topology.spines", "a single-switch topology has no spines")
	}
	if s.Topology.SwitchLatency < 0 {
		return fe("topology.switch_latency", "must not be negative")
	}
	if s.Topology.CableDelay < 0 {
		return fe("topology.cable_delay", "must not be negative")
	}
	return s.validateHardware()
}

// NodesFor returns the node count for an EP size: s.Nodes when set (which
// must hold the ranks), else ceil(ep / gpus_per_node).
func (s *Spec) NodesFor(ep int) (int, error) {
	if ep < 1 {
		return 0, fmt.Errorf("machine: EP size %d must be positive", ep)
	}
	need := (ep + s.GPUsPerNode - 1) / s.GPUsPerNode
	if s.Nodes == 0 {
		if need > MaxNodes {
			return 0, fmt.Errorf("machine: EP %d needs %d nodes, more than %d", ep, need, MaxNodes)
		}
		return need, nil
	}
	if s.Nodes < need {
		return 0, &FieldError{Field: "nodes", Msg: "cluster " + strconv.Quote(s.Name) + " has " +
			strconv.Itoa(s.Nodes) + " nodes; EP " + strconv.Itoa(ep) + " needs " + strconv.Itoa(need)}
	}
	return s.Nodes, nil
}
