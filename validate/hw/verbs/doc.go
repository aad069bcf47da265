// Package verbs runs perftest-style RC transfers on a real RDMA NIC through
// libibverbs (cgo), so that `ginsim validate verbs` can print the model's
// nic/perftest figures beside the hardware's for the same cases:
// write_lat (ib_write_lat's WRITE ping-pong, half the round trip),
// write_bw (ib_write_bw's stream of outstanding signaled WRITEs) and
// atomic_lat (ib_atomic_lat's FETCH_AND_ADD round trip).
//
// Two placements: loopback (default; both QPs on one port of one NIC, one
// thread drives both sides, so the packets never leave the NIC or cross a
// switch) and client/server (two processes on two hosts, one with --server,
// the other with --connect, exchanging QP numbers, PSNs, GIDs and keys
// over TCP as perftest does).
//
// The cgo half (hw_cgo.go) builds only with -tags verbs, cgo and
// libibverbs-dev's headers; the default build has a stub that says how to
// rebuild (ErrNotBuilt). A built binary on a machine without an RDMA
// device fails with ErrNoDevice. The case definitions, the statistics, the
// TCP exchange (a fuzzed decoder) and the comparison with the model are
// pure Go and tested everywhere.
package verbs
