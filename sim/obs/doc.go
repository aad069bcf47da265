// Package obs is the simulator's one observation point: a typed event
// stream that every layer (fabric, nic, gpu, gin and its backends) emits
// into, and an operation id (OpID) that ties the events of one GIN device
// operation together from the front end to the signal seen by a waiter.
//
// # Shape
//
// One value struct, Event, with a Kind enum, rather than one method per
// event kind. A checker, a timeline writer, a recorder and the critical
// path all want the whole stream in order; one struct gives them one
// switch, one encoding (traces/obslog writes it as JSON Lines) and one
// place to add a field. Event is passed by value, so emitting allocates
// nothing: the strings it carries (Who, Where, Note) are names the emitter
// already holds.
//
// # Cost when off
//
// Emitters hold a *Bus, nil when nobody observes, and test it before
// building an event:
//
//	if n.obs != nil {
//		n.obs.Emit(obs.Event{Kind: obs.Sent, ...})
//	}
//
// Off, that is one nil test per emit point and no call; the per-packet
// paths of fabric and nic pay nothing more. On, Bus.Emit is a direct call
// that fans the event out to its subscribers (one interface call each).
//
// # Operation ids
//
// The GIN front end (gin.Gin's put, putValue, signal, get) draws an OpID
// from the Bus (NewOp) when one is installed, else leaves it 0. The id
// travels in gin.Op, in the nic.WR the backend builds (GDAKI) or the GFD it
// stores (proxy), in every fabric.Packet of the WR, in the NIC's landing of
// the payload and of the signal or counter atomic, in the CQE, and back to
// the issuer's counter or flush. The Bus also remembers, per memory word,
// the op whose atomic last changed it (Atomic and Counter events), so the
// front end stamps the signal a waiter observes with the op that released
// it: causality is carried, never reconstructed.
//
// Ids are allocated in call order from 1 and are therefore deterministic:
// same inputs and seed, same ids. Id 0 means "no GIN operation" (a proxy
// bookkeeping store, a barrier's internal signal reset, a packet of a
// non-GIN user of the NIC).
//
// # Partitions
//
// On a sim.World, Split makes a bus with one partition bus per partition:
// a component emits into, draws ids from and asks LastOp of its own
// partition's bus (Bus.Of), and the split bus merges the partitions'
// events after every window, in (At, partition, emit order), for its
// subscribers: one stream, the same for every worker count.
// SplitOverlapped takes the merge, and the subscribers, off the World's
// serial step between windows: window k's events are merged and observed
// while the partitions run window k+1, so its subscribers must read
// nothing but the events (a critical-path tracker, a checker, a timeline's
// recorder).
//
// The package is pure: no goroutines, no I/O, no clock.
package obs
