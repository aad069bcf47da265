// Package netemu times the messages of ginsim's NCCL GIN plugin
// (validate/hw/native/ginhw.c, GINHW_FABRIC="model:SOCKET") with the
// model's NICs and network, in real time: `ginsim validate fabric-serve`.
//
// Emulator is the model half, a single-threaded state machine on a sim.Sim
// and so testable offline: N ranks, one per node of a cluster (GPU 0 of
// node r and its first NIC), buffers in GPU memory, one RC QP per ordered
// rank pair. Each Request is an RDMA WRITE of its bytes, posted at its
// instant through the host doorbell (the plugin's iput is the proxy's
// post); it is delivered when the model's DMA writes its last byte into
// the target's memory. Queueing behind the other pairs' traffic,
// congestion control and, with Loss, retransmission come from the model.
//
// Serve is the real-time half: it reads Requests from a unix datagram
// socket, injects each at its instant and runs the simulation up to the
// wall clock less a lag, replying with every delivery as the model makes
// it. Wire is the datagram format (wire.go).
//
// Clock mapping: the client stamps requests with CLOCK_REALTIME
// nanoseconds (the plugin's clock, which it lines up with the GPU's
// %globaltimer), the clock Go's time.Now().UnixNano() reads too, so server
// and clients share it on one machine. The first request fixes the epoch:
// client instant c is simulated time c - c0 (c0 the first request's
// post_ns), and the simulation runs to simulated time now - c0 - Lag.
// (ServeOptions.Arrival instead takes simulated 0 at the first request's
// arrival on the server's monotonic clock, for clients with another
// clock.) Deliveries go back in the client's clock, c0 + t rounded up to
// the nanosecond, so the client never delivers before the model does. A
// request whose instant the simulation has already passed is injected at
// the simulation's now and counted late.
package netemu
