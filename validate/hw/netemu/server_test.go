package netemu

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/sim"
)

// rig is a server on a socket and one client socket per rank.
type rig struct {
	t       *testing.T
	srv     *net.UnixConn
	addr    *net.UnixAddr
	clients []*net.UnixConn
	done    chan struct{}
	stats   ServeStats
	err     error
	cancel  context.CancelFunc
}

func newRig(t *testing.T, o Options, so ServeOptions) *rig {
	dir, err := os.MkdirTemp("", "netemu")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	e, err := New(o, nil)
	require.NoError(t, err)
	addr := &net.UnixAddr{Name: filepath.Join(dir, "srv"), Net: "unixgram"}
	srv, err := net.ListenUnixgram("unixgram", addr)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{t: t, srv: srv, addr: addr, done: make(chan struct{}), cancel: cancel}
	for i := range o.Ranks {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "c"+string(rune('0'+i))), Net: "unixgram"})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		r.clients = append(r.clients, c)
	}
	go func() {
		r.stats, r.err = Serve(ctx, srv, e, so)
		close(r.done)
	}()
	return r
}

func (r *rig) send(from int, b []byte) {
	_, err := r.clients[from].WriteToUnix(b, r.addr)
	require.NoError(r.t, err)
}

// replies reads n replies from rank from's socket.
func (r *rig) replies(from, n int) []Reply {
	var out []Reply
	b := make([]byte, 64)
	for range n {
		require.NoError(r.t, r.clients[from].SetReadDeadline(time.Now().Add(20*time.Second)))
		k, _, err := r.clients[from].ReadFromUnix(b)
		require.NoError(r.t, err)
		rep, err := DecodeReply(b[:k])
		require.NoError(r.t, err)
		out = append(out, rep)
	}
	return out
}

func (r *rig) stop() ServeStats {
	r.cancel()
	<-r.done
	r.srv.Close()
	require.NoError(r.t, r.err)
	return r.stats
}

// serveAndCompare sends reqs (instants relative to the first, in client
// nanoseconds from base) in order, collects every reply and checks each
// delivery against the offline run of the same requests.
func serveAndCompare(t *testing.T, o Options, reqs []timed) ServeStats {
	base := time.Now().UnixNano()
	r := newRig(t, o, ServeOptions{})
	per := make([]int, o.Ranks)
	for _, q := range reqs {
		q.r.PostNs = base + int64(q.at/sim.Time(sim.Nanosecond))
		r.send(int(q.r.Src), q.r.Append(nil))
		per[q.r.Src]++
	}
	got := map[[3]uint64]int64{}
	for src, n := range per {
		for _, rep := range r.replies(src, n) {
			require.Equal(t, StatusOK, rep.Status)
			require.Equal(t, uint32(src), rep.Src)
			got[key(uint64(rep.Src), uint64(rep.Dst), rep.Seq)] = rep.DeliverNs
		}
	}
	st := r.stop()
	want, _ := offline(t, o, reqs)
	require.Len(t, got, len(want))
	for k, at := range want {
		ns := (int64(at) + int64(sim.Nanosecond) - 1) / int64(sim.Nanosecond)
		require.Equal(t, base+ns, got[k], "request %v", k)
	}
	require.Zero(t, st.Late, "the test sends in order and ahead of time")
	require.Equal(t, uint64(len(reqs)), st.Delivered)
	return st
}

// The first request fixes the epoch at simulated 0; the rest are 250 ms
// ahead, so they reach the server before the simulation reaches them even
// on a loaded machine (a stall that long would count them late and fail).
const ahead = 250 * sim.Time(sim.Millisecond)

func TestServeBurst(t *testing.T) {
	reqs := []timed{{put(0, 1, 0, 8), 0}}
	for i := range 8 {
		reqs = append(reqs, timed{put(0, 1, uint64(1+i), 64<<10), ahead})
		reqs = append(reqs, timed{put(1, 0, uint64(i), 256), ahead + sim.Time(i)*sim.Time(sim.Microsecond)})
	}
	serveAndCompare(t, Options{Spec: h100(t), Ranks: 2}, reqs)
}

func TestServeLoss(t *testing.T) {
	reqs := []timed{{put(0, 1, 0, 8), 0}}
	for i := range 24 {
		reqs = append(reqs, timed{put(0, 1, uint64(1+i), 16<<10), ahead + sim.Time(i)*sim.Time(sim.Microsecond)})
	}
	st := serveAndCompare(t, Options{Spec: h100(t), Ranks: 2, Seed: 3, Loss: 0.05}, reqs)
	require.Positive(t, st.Retransmits)
}

func TestServeRefusesBadInput(t *testing.T) {
	r := newRig(t, Options{Spec: h100(t), Ranks: 2}, ServeOptions{Tick: time.Millisecond})
	r.send(0, []byte("not a request"))
	r.send(0, put(0, 5, 7, 8).Append(nil))
	rep := r.replies(0, 1)[0]
	require.Equal(t, Reply{Status: StatusBad, Src: 0, Dst: 5, Seq: 7}, rep)
	r.send(0, put(0, 1, 8, 8).Append(nil))
	rep = r.replies(0, 1)[0]
	require.Equal(t, StatusOK, rep.Status)
	require.Equal(t, uint64(8), rep.Seq)
	st := r.stop()
	require.Equal(t, uint64(1), st.Malformed)
	require.Equal(t, uint64(1), st.Refused)
	require.Equal(t, uint64(1), st.Delivered)
}
