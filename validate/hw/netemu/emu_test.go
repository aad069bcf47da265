package netemu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
)

func h100(t testing.TB) machine.Spec {
	spec, ok := machine.Preset("h100-ib")
	require.True(t, ok)
	return spec
}

type timed struct {
	r  Request
	at sim.Time
}

// offline injects every request up front and runs to quiescence.
func offline(t testing.TB, o Options, reqs []timed) (map[[3]uint64]sim.Time, Stats) {
	t.Helper()
	got := map[[3]uint64]sim.Time{}
	e, err := New(o, func(d Delivery) {
		got[[3]uint64{uint64(d.Src), uint64(d.Dst), d.Seq}] = d.At
	})
	require.NoError(t, err)
	for _, q := range reqs {
		require.NoError(t, e.Inject(q.r, q.at))
	}
	require.NoError(t, e.Run())
	require.Len(t, got, len(reqs), "every request delivered")
	return got, e.Stats()
}

func put(src, dst uint32, seq, bytes uint64) Request {
	return Request{Kind: KindPut, Src: src, Dst: dst, Seq: seq, Bytes: bytes}
}

func key(src, dst, seq uint64) [3]uint64 { return [3]uint64{src, dst, seq} }

func TestEmulatorOneMessage(t *testing.T) {
	spec := h100(t)
	got, st := offline(t, Options{Spec: spec, Ranks: 2}, []timed{{put(0, 1, 0, 8), 0}})
	d := got[key(0, 1, 0)]
	// Two cables and a switch at least; well under a retransmission timeout.
	floor := 2*sim.Duration(spec.Topology.CableDelay) + sim.Duration(spec.Topology.SwitchLatency)
	require.Greater(t, d.Sub(0), floor)
	require.Less(t, d.Sub(0), 50*sim.Microsecond)
	require.Zero(t, st.Late)
	require.Zero(t, st.Retransmits)
}

// A burst on one pair serialises on the link: successive deliveries are at
// least one message's wire time apart.
func TestEmulatorBurstQueues(t *testing.T) {
	spec := h100(t)
	const n, size = 8, 64 << 10
	var reqs []timed
	for i := range n {
		reqs = append(reqs, timed{put(0, 1, uint64(i), size), 0})
	}
	got, _ := offline(t, Options{Spec: spec, Ranks: 2}, reqs)
	wire := sim.Duration(float64(size*8) / float64(spec.LinkRate) * float64(sim.Second))
	for i := 1; i < n; i++ {
		gap := got[key(0, 1, uint64(i))].Sub(got[key(0, 1, uint64(i-1))])
		require.GreaterOrEqual(t, gap, wire*95/100, "message %d", i)
	}
	alone, _ := offline(t, Options{Spec: spec, Ranks: 2}, reqs[:1])
	require.Greater(t, got[key(0, 1, n-1)].Sub(0), alone[key(0, 1, 0)].Sub(0)+sim.Duration(n-2)*wire)
}

// Two senders to one target share its link: the incast takes longer than
// one sender's messages alone.
func TestEmulatorIncast(t *testing.T) {
	spec := h100(t)
	const n, size = 16, 64 << 10
	var one, both []timed
	for i := range n {
		one = append(one, timed{put(0, 2, uint64(i), size), 0})
		both = append(both, timed{put(0, 2, uint64(i), size), 0}, timed{put(1, 2, uint64(i), size), 0})
	}
	a, _ := offline(t, Options{Spec: spec, Ranks: 3}, one)
	b, _ := offline(t, Options{Spec: spec, Ranks: 3}, both)
	require.Greater(t, b[key(0, 2, n-1)], a[key(0, 2, n-1)])
}

func TestEmulatorLossRetransmits(t *testing.T) {
	spec := h100(t)
	var reqs []timed
	for i := range 32 {
		reqs = append(reqs, timed{put(0, 1, uint64(i), 16<<10), sim.Time(i) * sim.Time(sim.Microsecond)})
	}
	clean, _ := offline(t, Options{Spec: spec, Ranks: 2, Seed: 3}, reqs)
	lossy, st := offline(t, Options{Spec: spec, Ranks: 2, Seed: 3, Loss: 0.05}, reqs)
	require.Positive(t, st.Drops)
	require.Positive(t, st.Retransmits)
	later := 0
	for k, at := range lossy {
		require.GreaterOrEqual(t, at, clean[k])
		if at > clean[k] {
			later++
		}
	}
	require.Positive(t, later)
	again, _ := offline(t, Options{Spec: spec, Ranks: 2, Seed: 3, Loss: 0.05}, reqs)
	require.Equal(t, lossy, again, "same seed, same deliveries")
}

func TestEmulatorLateAndRefused(t *testing.T) {
	e, err := New(Options{Spec: h100(t), Ranks: 2}, nil)
	require.NoError(t, err)
	require.NoError(t, e.RunUntil(10*sim.Time(sim.Microsecond)))
	require.NoError(t, e.Inject(put(0, 1, 0, 8), 4*sim.Time(sim.Microsecond)))
	require.ErrorIs(t, e.Inject(put(0, 2, 1, 8), 0), ErrRank)
	require.ErrorIs(t, e.Inject(put(1, 1, 1, 8), 0), ErrRank)
	require.NoError(t, e.Run())
	st := e.Stats()
	require.Equal(t, uint64(1), st.Late)
	require.Equal(t, int64(6000), st.MaxLateNs)
	require.Equal(t, uint64(2), st.Refused)
	require.Equal(t, uint64(1), st.Delivered)
}

func TestNewRejects(t *testing.T) {
	for _, o := range []Options{
		{Spec: h100(t), Ranks: 1},
		{Spec: h100(t), Ranks: 2, Loss: 1},
		{Spec: h100(t), Ranks: 2, Loss: -0.1},
		{Spec: h100(t), Ranks: 2, IBTimeout: 32},
	} {
		_, err := New(o, nil)
		require.Error(t, err, "%+v", o)
	}
}
