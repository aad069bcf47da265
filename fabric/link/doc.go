// Package link models one direction of a point-to-point link inside a node
// (a PCIe lane group, an NVLink port) as a Pipe: a serialising FIFO
// resource that callers reserve time on. It holds no events and imports
// nothing of the model but sim, so the bus models (fabric/pcie,
// fabric/nvlink) and the GPU model stand on it without depending on the
// packet network in fabric.
package link
