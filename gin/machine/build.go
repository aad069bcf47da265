package machine

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Machine is a built cluster on one simulation: every device model, wired.
// Slices are indexed by world rank (GPUs, Ranks) or by NIC endpoint (NICs,
// rank-major: rank r's j-th NIC is NICs[r*NICsPerGPU+j]).
type Machine struct {
	// Sim is the simulation; on a World (BuildWorld), partition 0.
	Sim *sim.Sim
	// World is the World of BuildWorld's machine, nil on a lone Sim.
	World   *sim.World
	Spec    Spec
	Profile Profile
	Nodes   int
	Mem     *mem.System
	Net     *fabric.Network
	Topo    *topo.Cluster
	PCIe    []*pcie.Tree     // per node
	NVLink  []*nvlink.Domain // per node
	GPUs    []*gpu.GPU       // per world rank
	NICs    []*nic.NIC       // per endpoint
	Ranks   []*gin.Rank      // per world rank
}

// Build wires spec into models on s for the given node count: the memory
// system, the network, one PCIe tree per node (a PCIe switch per GPU
// holding the GPU and its NICs, as in HGX H100), one NVLink domain per node,
// and the GPUs, NICs and gin ranks (world rank = node*GPUsPerNode + local),
// with the spec's faults installed (faults.go).
func Build(s *sim.Sim, spec Spec, nodes int) (*Machine, error) {
	return BuildTuned(s, spec, nodes, nil)
}

// BuildTuned is Build with tune (nil: none) applied to the hardware
// profile first: schedule exploration perturbs timing and switches
// mutants through it.
func BuildTuned(s *sim.Sim, spec Spec, nodes int, tune func(*Profile)) (*Machine, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if nodes < 1 || nodes > MaxNodes {
		return nil, fmt.Errorf("machine: node count %d out of range [1, %d]", nodes, MaxNodes)
	}
	if spec.Nodes != 0 && nodes > spec.Nodes {
		return nil, &FieldError{Field: "nodes", Msg: fmt.Sprintf("cluster %q has %d nodes; %d asked for",
			spec.Name, spec.Nodes, nodes)}
	}
	prof, err := spec.Hardware()
	if err != nil {
		return nil, err
	}
	if tune != nil {
		tune(&prof)
	}
	g, k := spec.GPUsPerNode, spec.NICsPerGPU
	ts := TopoSpec(spec, nodes)
	ts.PCIe, ts.NVLink = &prof.PCIe, &prof.NVLink
	cl, err := topo.Build(s, ts)
	if err != nil {
		return nil, fmt.Errorf("machine: cluster %s: %w", spec.Name, err)
	}
	if err := applyFaults(cl, &spec, nodes*g); err != nil {
		return nil, err
	}
	m := &Machine{Sim: s, Spec: spec, Profile: prof, Nodes: nodes, Mem: mem.NewSystem(s), Net: cl.Net, Topo: cl}
	for n := range nodes {
		bus, nvl := cl.PCIe(n), cl.NVLink(n)
		m.PCIe = append(m.PCIe, bus)
		m.NVLink = append(m.NVLink, nvl)
		for l := range g {
			world := n*g + l
			name := "n" + strconv.Itoa(n) + "g" + strconv.Itoa(l)
			gp := gpu.New(s, spec.Faults.gpuConfig(prof.GPU, world), name, n, l, m.Mem, bus, cl.GPUDev(n, l), nvl)
			m.GPUs = append(m.GPUs, gp)
			r := &gin.Rank{World: world, Node: n, Local: l, GPU: gp, Host: bus.Host()}
			for j := range k {
				ni := l*k + j
				nc := nic.New(s, prof.NIC, name+"/nic"+strconv.Itoa(j), m.Net, cl.Endpoint(n, ni), bus, cl.NICDev(n, ni))
				m.NICs = append(m.NICs, nc)
				r.NICs = append(r.NICs, nc)
			}
			m.Ranks = append(m.Ranks, r)
		}
	}
	return m, nil
}

// Rank returns world rank r.
func (m *Machine) Rank(r int) *gin.Rank { return m.Ranks[r] }

// TopoSpec translates a Spec into the fabric/topo description for nodes
// nodes. Spines 0 means one spine, reached by as many uplinks from each
// leaf as the leaf has hosts (non-blocking).
func TopoSpec(spec Spec, nodes int) topo.Spec {
	ts := topo.Spec{Nodes: nodes, GPUsPerNode: spec.GPUsPerNode, NICsPerGPU: spec.NICsPerGPU,
		LinkGbps:     int64(spec.LinkRate) / int64(sim.Gbps),
		HostPropNs:   int64(spec.Topology.CableDelay) / int64(sim.Nanosecond),
		FabricPropNs: int64(spec.Topology.CableDelay) / int64(sim.Nanosecond),
		Switch:       topo.SwitchSpec{LatencyNs: int64(spec.Topology.SwitchLatency) / int64(sim.Nanosecond)},
		Spines:       spec.Topology.Spines,
	}
	ts.GPUsPerPCIeSwitch, _ = spec.pcieLayout()
	ts.GPUsPerPCIeSwitch = min(ts.GPUsPerPCIeSwitch, spec.GPUsPerNode)
	t := spec.Topology.withDefaults()
	ts.Oversubscription, ts.K = t.Oversubscription, t.K
	ts.Switch.PortBufferKiB = int64(t.PortBuffer) / int64(sim.KiB)
	ts.Switch.ECNKminKiB, ts.Switch.ECNKmaxKiB, ts.Switch.ECNPmax = int64(t.ECNKmin)/int64(sim.KiB), int64(t.ECNKmax)/int64(sim.KiB), t.ECNPmax
	if spec.Topology.Lossless {
		ts.Switch.PortBufferKiB = -1 // unbounded: no drops
	}
	switch spec.Topology.Kind {
	case TopoSingleSwitch:
		ts.Kind = "single"
		ts.Spines = 0
	case TopoRailOptimized:
		ts.Kind = "rail"
		if ts.Spines == 0 {
			ts.Spines = 1
		}
	case TopoFatTree:
		ts.Kind = topo.KindFatTree
		ts.Spines = 0
	case TopoLeafSpine:
		ts.Kind = "leafspine"
		ts.Leaves = nodes
		if ts.Spines == 0 {
			ts.Spines = 1
		}
	}
	return ts
}

// SetObserver makes the network and every NIC emit their obs events into
// b (nil: off). The GIN layer (gin.Comm and the backends) takes b through
// its own SetObserver.
//
// On a World b is a split bus (obs.Split): each NIC emits into its
// partition's bus, and the network takes the split bus.
func (m *Machine) SetObserver(b *obs.Bus) {
	m.Net.SetObserver(b)
	for _, n := range m.NICs {
		n.SetObserver(b.Of(n.Sim()))
	}
}
