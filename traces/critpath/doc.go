// Package critpath computes the critical path of GIN operations from the
// observer's event stream (sim/obs) alone: for every operation id, the
// time spent in each phase from the device call to the signal the waiter
// saw. Every boundary is one event of that operation, found by its id and
// kind, and the target of the operation is named by the events themselves
// (the waiter's SignalSeen names the signal word, the Atomic on that word
// names the responder QP, the packets to that QP carry the id), so nothing
// is matched by time or guessed, and no model formula is recomputed: a
// phase is the difference of two observed instants.
//
// Phases, in order (each starts where the previous one ends, except that
// fetch and payload are the two PCIe reads inside the NIC's span and nic
// is what is left of it):
//
//	issue       device call -> descriptor written (GDAKI: WQEs published;
//	            proxy: GFD stores issued)
//	descriptor  GDAKI: publish -> doorbell MMIO issued (sq lock, atomicMax);
//	            proxy: GFD stores -> GFD landed in host memory
//	proxy       proxy: GFD landed -> ibv_post_send done (pickup, WR build);
//	            zero for GDAKI
//	doorbell    doorbell MMIO issued -> arrived at the NIC (PCIe)
//	fetch       the NIC's read of the op's first WQE over PCIe (issued ->
//	            arrived; the PCIe links' queueing and bandwidth cap
//	            included); zero with BlueFlame
//	payload     the time the head of the op's send queue waited for a
//	            payload read still crossing PCIe, from the op's fetch to
//	            its first packet: the reads of WQEs ahead of it and its
//	            own (obs.Fetched and Sent carry the QP's running sum);
//	            without those events, its own first payload read
//	nic         the rest of doorbell arrived -> first request packet on the
//	            wire: the NIC's own time (doorbell handling, waiting for a
//	            fetch slot, the WQE pipeline, waiting for the read budget,
//	            transmit latency, the send queues' and the port's
//	            arbitration, the rate limiter)
//	wire        first request packet sent -> last request packet received
//	            at the target NIC (serialisation, switches, queueing)
//	landing     last request received -> its effect applied at the target
//	            (receive pipeline, PCIe write or atomic)
//	signal      effect applied -> the waiter saw the signal (poll)
//
// An operation without a waiter ends at its last landing; one without
// packets (a failed or LSA op) has no row.
//
// Table computes the rows of a recorded stream; a Tracker, subscribed to
// a run's bus, builds them as the run goes (traces/replay asks it for the
// op that released each phase's slowest receiver). Row.Ports, the fabric
// ports a path crossed, need the fabric observed (obs.Hop).
package critpath
