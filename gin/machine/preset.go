package machine

import (
	"slices"

	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"

	"github.com/ginsim/ginsim/sim"
)

// Profile is a named hardware profile: the configurations of every device
// model a Spec builds. Specs refer to profiles by name; the timing constants
// themselves live (documented) in the device packages' Config structs.
type Profile struct {
	// Name is the profile's name in Spec.Profile.
	Name string
	// Description says what hardware the profile stands for.
	Description string
	// GPU is the configuration of every GPU.
	GPU gpu.Config
	// NIC is the configuration of every NIC port.
	NIC nic.Config
	// PCIe is the configuration of every node's PCIe tree.
	PCIe pcie.Config
	// NVLink is the configuration of every node's NVLink domain; Build
	// overrides its PortRate and Latency with the Spec's nvlink values.
	NVLink nvlink.Config
	// Proxy is the CPU proxy backend's configuration.
	Proxy proxy.Config
	// GDAKI is the GPU-initiated backend's configuration.
	GDAKI gdaki.Config
}

// profiles returns the built-in hardware profiles.
func profiles() []Profile {
	gen5 := pcie.DefaultConfig()
	// Fitted once (README "Calibration", `ginsim calibrate`): the
	// completer latency of a NIC's read of Hopper HBM through BAR1 (WQE
	// fetch, payload read, the atomic's read) is the one unloaded latency
	// the GDAKI ping-pong target is sensitive to (about 3 us of round trip
	// per us). The fit wants 1.8 us; 1.2 us is the top of what GPUDirect
	// RDMA read measurements support (about 1 us more than a host-memory
	// read), so it stops there and the ping-pong stays 23% short.
	gen5.DevMemReadLatency = 1200 * sim.Nanosecond
	nvl4 := nvlink.DefaultConfig()
	h100 := gpu.DefaultConfig()
	cx7 := nic.DefaultConfig()
	px, gd := proxy.DefaultConfig(), gdaki.DefaultConfig()
	return []Profile{
		{Name: "h100", Description: "H100 SXM5 (132 SMs, 1.98 GHz boost), PCIe Gen5 x16 to a ConnectX-7",
			GPU: h100, NIC: cx7, PCIe: gen5, NVLink: nvl4, Proxy: px, GDAKI: gd},
		{Name: "h800", Description: "H800 SXM5 (H100 silicon with NVLink cut to 400 GB/s bidirectional), ConnectX-7",
			GPU: h100, NIC: cx7, PCIe: gen5, NVLink: nvl4, Proxy: px, GDAKI: gd},
		{Name: "h200", Description: "H200 SXM (H100 compute, 141 GB HBM3e), ConnectX-7", GPU: h100, NIC: cx7, PCIe: gen5,
			NVLink: nvl4, Proxy: px, GDAKI: gd},
	}
}

func profileByName(name string) (Profile, bool) {
	for _, p := range profiles() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// ProfileByName returns a built-in hardware profile.
func ProfileByName(name string) (Profile, bool) { return profileByName(name) }

// ProfileNames lists the built-in hardware profiles.
func ProfileNames() []string {
	var names []string
	for _, p := range profiles() {
		names = append(names, p.Name)
	}
	return names
}

// Fabric constants shared by the presets.
const (
	// ibSwitchLatency is an InfiniBand NDR switch's port-to-port latency:
	// Quantum-class switches are specified in the low hundreds of ns.
	ibSwitchLatency = Duration(200 * sim.Nanosecond)
	// cableDelay is ~5 ns/m over the ~10 m of copper or fibre between a
	// node and its leaf, and between leaf and spine.
	cableDelay = Duration(50 * sim.Nanosecond)
	// nvlinkLatency is one traversal between a GPU's SMs and a peer's L2
	// (nvlink.DefaultConfig's figure, measured on two H200s joined by 18
	// NVLink 4 links; an HGX board's NVSwitch, not measured here, adds a
	// switch hop).
	nvlinkLatency = Duration(350 * sim.Nanosecond)
)

// presets returns the built-in cluster specs.
func presets() []Spec {
	return []Spec{
		{
			Name: "h100-ib",
			Description: "GIN paper testbed (NVIDIA EOS): 8x H100 per node, NVLink 900 GB/s bidirectional, " +
				"one ConnectX-7 400 Gb/s InfiniBand NIC per GPU, rail-optimised fabric; the wire is modelled as " +
				"RoCEv2 framing of IB's transport (lossless, no DCQCN)",
			Profile: "h100", GPUsPerNode: 8, NICsPerGPU: 1, LinkRate: Rate(400 * sim.Gbps),
			// 900 GB/s bidirectional = 450 GB/s per direction (nominal).
			NVLink:   NVLinkSpec{Bandwidth: Rate(sim.GBps(450)), Latency: nvlinkLatency},
			Topology: Topology{Kind: TopoRailOptimized, SwitchLatency: ibSwitchLatency, CableDelay: cableDelay, Lossless: true},
		},
		{
			Name: "h800-cx7",
			Description: "DeepEP's testbed: 8x H800 per node, NVLink ~134 GB/s of data per direction (400 GB/s " +
				"bidirectional nominal), one ConnectX-7 400 Gb/s InfiniBand NIC per GPU, rail-optimised fabric; " +
				"the wire is modelled as RoCEv2 framing of IB's transport (lossless, no DCQCN)",
			Profile: "h800", GPUsPerNode: 8, NICsPerGPU: 1, LinkRate: Rate(400 * sim.Gbps),
			// DeepEP's README measures 153/158 GB/s intranode EP8, but
			// tests/test_intranode.py divides recv_x bytes, the 1/8 a rank
			// sends itself included, by the time: what crosses NVLink per
			// direction is 7/8 of that, ~134 GB/s of data: 168 GB/s on the
			// wire, as 128 of every 160 bytes are data (nvlink.Config).
			NVLink:   NVLinkSpec{Bandwidth: Rate(sim.GBps(168)), Latency: nvlinkLatency},
			Topology: Topology{Kind: TopoRailOptimized, SwitchLatency: ibSwitchLatency, CableDelay: cableDelay, Lossless: true},
		},
		{
			Name:        "h200-nvl",
			Description: "one node of 8x H200, NVLink 900 GB/s bidirectional, one ConnectX-7 400 Gb/s NIC per GPU",
			Profile:     "h200", Nodes: 1, GPUsPerNode: 8, NICsPerGPU: 1, LinkRate: Rate(400 * sim.Gbps),
			NVLink:   NVLinkSpec{Bandwidth: Rate(sim.GBps(450)), Latency: nvlinkLatency},
			Topology: Topology{Kind: TopoSingleSwitch, SwitchLatency: ibSwitchLatency, CableDelay: cableDelay, Lossless: true},
		},
	}
}

// Preset returns a built-in cluster spec by name.
func Preset(name string) (Spec, bool) {
	for _, p := range presets() {
		if p.Name == name {
			return p, true
		}
	}
	return Spec{}, false
}

// PresetNames lists the built-in cluster specs, sorted.
func PresetNames() []string {
	var names []string
	for _, p := range presets() {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// Presets returns every built-in cluster spec, sorted by name.
func Presets() []Spec {
	ps := presets()
	slices.SortFunc(ps, func(a, b Spec) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return ps
}

// Resolve returns a preset by name, or loads a cluster file when arg is not
// a preset name.
func Resolve(arg string) (Spec, error) {
	if s, ok := Preset(arg); ok {
		return s, nil
	}
	return LoadSpec(arg)
}
