package verbs

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The TCP set-up of a client/server run, over an in-memory pipe: each
// side gets the other's QP info, and a server started for another run
// refuses the client with a message naming both.
func TestExchange(t *testing.T) {
	base := Options{Case: CaseWriteLat, Sizes: []int64{8, 4096}, Iters: 100, TxDepth: 16, Timeout: time.Second}
	ci := Info{QPN: 0x11, PSN: 1, RKey: 2, Addr: 0x1000, MTU: 5, Port: 1}
	si := Info{QPN: 0x22, PSN: 3, RKey: 4, Addr: 0x2000, MTU: 3, Port: 1}
	run := func(server Options) (gotByClient, gotByServer Info, cerr, serr error) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		client := base
		client.Connect = "peer:1"
		server.Server = ":1"
		done := make(chan struct{})
		go func() {
			defer close(done)
			gotByServer, serr = (&peerConn{c: b, timeout: time.Second}).exchange(&server, si)
			if serr != nil {
				b.Close()
			}
		}()
		gotByClient, cerr = (&peerConn{c: a, timeout: time.Second}).exchange(&client, ci)
		<-done
		return
	}
	gc, gs, cerr, serr := run(base)
	require.NoError(t, cerr)
	require.NoError(t, serr)
	assert.Equal(t, si, gc)
	assert.Equal(t, ci, gs)

	other := base
	other.Sizes = []int64{8}
	_, _, cerr, serr = run(other)
	assert.ErrorContains(t, serr, "start both with the same")
	assert.Error(t, cerr, "the client sees the server hang up")
}

// A handshake that the peer never answers ends at the timeout with a
// message that says what it waited for.
func TestHandshakeTimeout(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _, _ = b.Read(make([]byte, 1)) }() // takes the byte, never answers
	err := (&peerConn{c: a, timeout: 50 * time.Millisecond}).handshake(true)
	assert.ErrorContains(t, err, "the peer's step handshake")
}

// Both sides of a handshake return once each has the other's byte.
func TestHandshake(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() { errc <- (&peerConn{c: b, timeout: time.Second}).handshake(false) }()
	require.NoError(t, (&peerConn{c: a, timeout: time.Second}).handshake(true))
	require.NoError(t, <-errc)
}
