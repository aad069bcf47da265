// Package nvlink models the NVLink/NVSwitch domain of one node: every GPU has
// an egress and an ingress port of PortRate each into a non-blocking switch
// (NVSwitch), so transfers contend only at the sending GPU's egress and the
// receiving GPU's ingress. Stores and copies are cut into packets of
// MaxPayload bytes with a per-packet header; reads send request packets and
// receive data responses.
//
// Like fabric/pcie it holds no events: Write, Read and Atomic reserve port
// time and return the instants at which the bytes land. Calls with at in the
// future are arbitrated in call order (see fabric.Pipe). One transfer holds
// a port contiguously: packets of concurrent transfers are not interleaved.
//
// Not safe for concurrent use.
package nvlink
