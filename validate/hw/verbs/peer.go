package verbs

import (
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

// dialOrAccept opens the TCP connection of a client/server run: the
// server accepts one client on o.Server, the client dials o.Connect,
// retrying until o.Timeout (the server may start second).
func dialOrAccept(o *Options) (net.Conn, error) {
	if o.Server != "" {
		l, err := net.Listen("tcp", o.Server)
		if err != nil {
			return nil, fmt.Errorf("--server: %w", err)
		}
		defer l.Close()
		if tl, ok := l.(*net.TCPListener); ok {
			_ = tl.SetDeadline(time.Now().Add(6 * o.Timeout))
		}
		c, err := l.Accept()
		if err != nil {
			return nil, fmt.Errorf("--server %s: waited %v for a client: %w", o.Server, 6*o.Timeout, err)
		}
		return c, nil
	}
	deadline := time.Now().Add(o.Timeout)
	for {
		c, err := net.DialTimeout("tcp", o.Connect, o.Timeout)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("--connect %s: %w (is `ginsim validate verbs --server` running there?)", o.Connect, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// peerConn is the TCP side channel; every operation is bounded by
// timeout and says what it was waiting for.
type peerConn struct {
	c       net.Conn
	timeout time.Duration
}

func (p *peerConn) write(b []byte, what string) error {
	_ = p.c.SetWriteDeadline(time.Now().Add(p.timeout))
	if _, err := p.c.Write(b); err != nil {
		return fmt.Errorf("sending %s to %v: %w", what, p.c.RemoteAddr(), err)
	}
	return nil
}

func (p *peerConn) read(n int, what string) ([]byte, error) {
	_ = p.c.SetReadDeadline(time.Now().Add(p.timeout))
	b := make([]byte, n)
	if _, err := io.ReadFull(p.c, b); err != nil {
		return nil, fmt.Errorf("waiting %v for %s from %v: %w", p.timeout, what, p.c.RemoteAddr(), err)
	}
	return b, nil
}

// handshake exchanges one byte each way so that both sides are at the
// same step; the client writes first.
func (p *peerConn) handshake(client bool) error {
	if client {
		if err := p.write([]byte{'s'}, "the step handshake"); err != nil {
			return err
		}
	}
	b, err := p.read(1, "the peer's step handshake (did it fail? its own output says why)")
	if err != nil {
		return err
	}
	if b[0] != 's' {
		return fmt.Errorf("step handshake: got %q from the peer, want 's'", b)
	}
	if !client {
		return p.write([]byte{'s'}, "the step handshake")
	}
	return nil
}

// exchange is the set-up of a client/server run: the client sends its
// Hello and the server checks that it was started for the same run; then
// each sends the Info of its QP and gets the peer's.
func (p *peerConn) exchange(o *Options, mine Info) (Info, error) {
	if o.Placement() == "client" {
		h, err := AppendHello(nil, Hello{Case: o.Case, Iters: o.Iters, TxDepth: o.TxDepth, Sizes: o.Sizes})
		if err != nil {
			return Info{}, err
		}
		if err := p.write(h, "the hello"); err != nil {
			return Info{}, err
		}
	} else {
		head, err := p.read(helloFixed, "the client's hello")
		if err != nil {
			return Info{}, err
		}
		n, err := HelloLen(head)
		if err != nil {
			return Info{}, err
		}
		rest, err := p.read(n-helloFixed, "the client's sizes")
		if err != nil {
			return Info{}, err
		}
		h, err := ParseHello(append(head, rest...))
		if err != nil {
			return Info{}, err
		}
		if h.Case != o.Case || !slices.Equal(h.Sizes, o.Sizes) || h.Iters != o.Iters || h.TxDepth != o.TxDepth {
			return Info{}, fmt.Errorf("the client runs %s sizes %v iters %d tx depth %d; this server was started "+
				"with %s sizes %v iters %d tx depth %d: start both with the same --case, --sizes, --iters and --tx-depth",
				h.Case, h.Sizes, h.Iters, h.TxDepth, o.Case, o.Sizes, o.Iters, o.TxDepth)
		}
	}
	// One side writes while the other reads (a synchronous channel would
	// otherwise block both): the client sends first.
	if o.Placement() == "client" {
		if err := p.write(AppendInfo(nil, mine), "our QP info"); err != nil {
			return Info{}, err
		}
	}
	b, err := p.read(InfoLen, "the peer's QP info")
	if err != nil {
		return Info{}, err
	}
	ri, err := ParseInfo(b)
	if err != nil {
		return Info{}, err
	}
	if o.Placement() != "client" {
		if err := p.write(AppendInfo(nil, mine), "our QP info"); err != nil {
			return Info{}, err
		}
	}
	return ri, nil
}
