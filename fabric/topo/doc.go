// Package topo builds clusters from a declarative Spec: the switched network
// between NIC ports (a single switch, a two-tier leaf/spine or a
// rail-optimised fat tree, or a three-tier k-ary fat tree) plus, per node, the PCIe tree joining GPUs, NICs
// and the host, and the NVLink domain joining the GPUs. It also answers the
// lookups the rest of the simulator needs: the endpoint of (node, nic), the
// PCIe device of a GPU, NIC or host, a node's NVLink domain, and the
// deterministic addresses of every endpoint.
package topo
