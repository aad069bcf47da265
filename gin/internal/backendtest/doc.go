// Package backendtest is the test rig shared by the IB GIN backends'
// tests (gdaki, proxy): golden timelines of one op on a two-rank env, and
// the spec 2.4 ordering checks from the NIC writes that land on the peer.
package backendtest
