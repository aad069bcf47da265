package hw

import (
	"fmt"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
)

// Fabric is the emulated link the plugin delays every message by: a
// one-way latency and a serialisation rate (GINHW_FABRIC).
type Fabric struct {
	Name    string
	Latency sim.Duration
	Rate    sim.BitRate // 0: unlimited
}

// Env is the fabric as the plugin's GINHW_FABRIC takes it.
func (f Fabric) Env() string {
	if f.Latency == 0 && f.Rate == 0 {
		return "zero"
	}
	return fmt.Sprintf("lat_ns=%d,gbps=%g,name=%s", f.Latency/sim.Nanosecond, float64(f.Rate)/float64(sim.Gbps), f.Name)
}

// Zero is the fabric that adds no delay.
var Zero = Fabric{Name: "zero"}

// FabricOf is the link between rank 0 and rank 1 of the validation setup
// on spec (GPU 0 of node 0 and of node 1): the propagation of its cables
// and the cut-through latency of its switches, at the NIC port rate. The
// NIC pipelines, PCIe and the CPU proxy are not in it: on the device they
// are the real host copies and NCCL's real proxy thread.
func FabricOf(spec machine.Spec) Fabric {
	cables, switches := sim.Duration(2), sim.Duration(1) // NIC - rail/leaf switch - NIC
	if spec.Topology.Kind == machine.TopoLeafSpine {
		cables, switches = 4, 3 // nodes on different leaves
	}
	lat := cables*sim.Duration(spec.Topology.CableDelay) + switches*sim.Duration(spec.Topology.SwitchLatency)
	return Fabric{Name: spec.Name, Latency: lat, Rate: sim.BitRate(spec.LinkRate)}
}
