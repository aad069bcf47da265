// Package nvlink models the NVLink/NVSwitch domain of one node: every GPU has
// an egress and an ingress port of PortRate each into a non-blocking switch
// (NVSwitch), so transfers contend only at the sending GPU's egress and the
// receiving GPU's ingress. Stores and copies are cut into packets of
// MaxPayload bytes with a per-packet header; reads send request packets and
// receive data responses.
//
// Like fabric/pcie it holds no events: Write, Read and Atomic reserve port
// time and return the instants at which the bytes land. Ports arbitrate by
// readiness (link.Pipe.Backfill): a transfer ready while a port idles
// goes, even if a call made earlier reserved the port for later (the
// response of a remote atomic, say); a GPU's writes keep their order (a
// flag stored after data lands after it). One transfer holds a port
// contiguously: packets of concurrent transfers are not interleaved.
//
// Not safe for concurrent use.
package nvlink
