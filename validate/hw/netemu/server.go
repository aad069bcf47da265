package netemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"time"

	"github.com/ginsim/ginsim/sim"
)

// ServeOptions configures Serve.
type ServeOptions struct {
	// Lag keeps the simulation this far behind the wall clock, so that a
	// request reaching the server up to Lag after its instant is still
	// injected at that instant; deliveries are replied Lag late.
	Lag time.Duration
	// Tick, when positive, sleeps Tick between runs while nothing
	// arrives; zero spins (one core busy, microsecond pacing: Go's timers
	// wake no finer than about a millisecond).
	Tick time.Duration
	// Arrival maps the clients' clock by the first request's arrival
	// (simulated 0 is then, on the server's monotonic clock) instead of
	// reading the clients' clock, CLOCK_REALTIME, directly: for clients
	// whose stamps are not CLOCK_REALTIME. It adds the first request's
	// transit to every reply.
	Arrival bool
	// Logf, if set, is told about refused requests.
	Logf func(format string, args ...any)
}

// ServeStats is what Serve did, with the Emulator's counters.
type ServeStats struct {
	Stats
	Malformed   uint64 `json:"malformed"`    // datagrams that did not decode
	ReplyErrors uint64 `json:"reply_errors"` // replies the socket refused (client gone)
}

type datagram struct {
	b    []byte
	from *net.UnixAddr
}

// recv takes one datagram without waiting; ok is false when none is
// queued. It reads the socket directly (MSG_DONTWAIT) rather than from a
// goroutine: a spinning loop keeps Go's scheduler from polling the network
// for up to 10 ms, which would hold every request that long.
func recv(rc syscall.RawConn, b []byte) (d datagram, ok bool, err error) {
	var (
		n    int
		from syscall.Sockaddr
		rerr error
	)
	if cerr := rc.Read(func(fd uintptr) bool {
		n, from, rerr = syscall.Recvfrom(int(fd), b, syscall.MSG_DONTWAIT)
		return true
	}); cerr != nil {
		return d, false, cerr
	}
	if rerr == syscall.EAGAIN || rerr == syscall.EINTR {
		return d, false, nil
	}
	if rerr != nil {
		return d, false, rerr
	}
	d.b = b[:n]
	if u, isUnix := from.(*syscall.SockaddrUnix); isUnix && u.Name != "" {
		d.from = &net.UnixAddr{Name: u.Name, Net: "unixgram"}
	}
	return d, true, nil
}

// Serve runs e in real time on conn until ctx is done: requests are
// injected at their instants (see the package doc for the clock mapping)
// and every delivery is replied to the socket that sent its source rank's
// last request. It returns the counters; the error is the model's or the
// socket's, not ctx's. The caller closes conn.
func Serve(ctx context.Context, conn *net.UnixConn, e *Emulator, o ServeOptions) (ServeStats, error) {
	var st ServeStats
	rc, err := conn.SyscallConn()
	if err != nil {
		return st, fmt.Errorf("netemu: %w", err)
	}
	var (
		started bool
		start   time.Time
		c0      int64
		addrs   = map[uint32]*net.UnixAddr{}
		out     []Reply
		buf     []byte
		rbuf    = make([]byte, RequestBytes+1)
	)
	e.deliver = func(d Delivery) {
		ns := (int64(d.At) + int64(sim.Nanosecond) - 1) / int64(sim.Nanosecond)
		out = append(out, Reply{Status: StatusOK, Src: uint32(d.Src), Dst: uint32(d.Dst), Seq: d.Seq, DeliverNs: c0 + ns})
	}
	reply := func(r Reply, to *net.UnixAddr) {
		if to == nil {
			st.ReplyErrors++
			return
		}
		buf = r.Append(buf[:0])
		if _, err := conn.WriteToUnix(buf, to); err != nil {
			st.ReplyErrors++
		}
	}
	handle := func(d datagram) {
		r, err := DecodeRequest(d.b)
		if err != nil {
			st.Malformed++
			if o.Logf != nil {
				o.Logf("%v", err)
			}
			return
		}
		if !started {
			started, start, c0 = true, time.Now(), r.PostNs
		}
		if d.from != nil && int(r.Src) < e.ranks {
			addrs[r.Src] = d.from
		}
		if err := e.Inject(r, sim.Time(r.PostNs-c0)*sim.Time(sim.Nanosecond)); err != nil {
			if o.Logf != nil {
				o.Logf("request %d -> %d seq %d: %v", r.Src, r.Dst, r.Seq, err)
			}
			reply(Reply{Status: StatusBad, Src: r.Src, Dst: r.Dst, Seq: r.Seq}, d.from)
		}
	}
	done := func(err error) (ServeStats, error) {
		st.Stats = e.Stats()
		return st, err
	}
	for {
		got := false
		for {
			d, ok, err := recv(rc, rbuf)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return done(nil)
				}
				return done(fmt.Errorf("netemu: read: %w", err))
			}
			if !ok {
				break
			}
			got = true
			handle(d)
		}
		if started {
			var t time.Duration
			if o.Arrival {
				t = time.Since(start) - o.Lag
			} else {
				t = time.Duration(time.Now().UnixNano()-c0) - o.Lag
			}
			if t > 0 {
				if err := e.RunUntil(sim.Time(t.Nanoseconds()) * sim.Time(sim.Nanosecond)); err != nil {
					return done(err)
				}
			}
			for _, r := range out {
				reply(r, addrs[r.Src])
			}
			out = out[:0]
		}
		if ctx.Err() != nil {
			return done(nil)
		}
		if !got {
			if o.Tick > 0 {
				time.Sleep(o.Tick)
			} else {
				runtime.Gosched()
			}
		}
	}
}
