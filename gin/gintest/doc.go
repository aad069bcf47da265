// Package gintest provides an in-memory GIN backend and a small cluster
// builder for tests of code above gin (gin/prog, workloads): operations
// cost a fixed issue time, land at the peer after a fixed latency in
// per-(rank, context, peer) FIFO order (data, then the signal) and complete
// locally a fixed time later. It is a reference for semantics, not a model
// of any NIC.
package gintest
