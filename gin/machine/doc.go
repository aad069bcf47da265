// Package machine describes and builds simulated GPU clusters: a Spec (nodes,
// GPUs per node, NICs per GPU, link rates, topology, hardware profile) with a
// YAML form whose errors name the file, line and field; named hardware
// Profiles holding the per-device configurations (GPU, NIC, PCIe, NVLink,
// fabric and CPU-proxy costs); built-in presets (h100-ib, h800-cx7,
// h200-nvl); and Build, which wires a Spec into a running model on one sim.Sim:
// the memory system, the packet network, per-node PCIe trees and NVLink
// domains, GPUs, NICs and the gin.Rank of every GPU.
//
// A Spec's optional faults section (Faults) injects what-if impairments when
// it is built: loss and corruption per link class, a link down and back up,
// a degraded link, a straggler GPU and a slow proxy CPU, drawn from the
// run's seeded streams.
//
// Snapshot reads the accounting of every resource of a built machine (NIC
// ports both ways, the GPUs' and NICs' PCIe links, PCIe switch uplinks,
// NVLink ports, inter-switch ports, proxy threads); Since turns two
// snapshots into a phase's utilisation and queueing, Bind names the
// resource that bound it and WriteTable prints it for people.
//
// BuildWorld builds the same machine on a sim.World, one partition per
// node (node n on partition n % parts; Lookahead gives the World's
// lookahead): everything inside a node (PCIe tree, NVLink domain, host
// and GPU memory, GPUs, NICs, the proxy threads and gin ranks of its
// GPUs) lives on the node's partition and touches only it; nodes talk
// only through packets on the fabric. Observe such a machine through a
// split bus (obs.Split) handed to Machine.SetObserver, the communicator
// and its backends; a Sampler samples it between windows. The run, the
// merged observation stream included, is the same for every worker
// count (TestWorldWorkersDoNotChangeTheRun).
//
// A Spec is data and is validated without building anything; a Profile is the
// set of documented timing constants that the Spec's profile name selects.
package machine
