package sim_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/sim"
)

// gossip is a model for the World's tests: every partition holds agents
// that, on each event, log it, then schedule a local event (sometimes at
// the same instant) and sometimes Send one to a random partition at least
// the lookahead later. Each partition draws from its own stream, so its
// log depends only on the order its events fire in.
type gossip struct {
	parts []*gpart
	la    sim.Duration
	limit sim.Time
}

type gpart struct {
	g   *gossip
	s   *sim.Sim
	rnd *rand.Rand
	log strings.Builder
	n   int
}

func (p *gpart) Handle(s *sim.Sim, arg uint64) {
	if s != p.s {
		panic("event on the wrong partition")
	}
	p.n++
	fmt.Fprintf(&p.log, "%d:%d ", s.Now(), arg)
	if s.Now() > p.g.limit {
		return
	}
	// Each event has one successor: the population of tokens is fixed.
	if p.rnd.IntN(3) == 0 {
		dst := p.g.parts[p.rnd.IntN(len(p.g.parts))]
		p.s.Send(dst.s, s.Now().Add(p.g.la+sim.Duration(p.rnd.IntN(4))*50), dst, arg*17+2)
		return
	}
	p.s.Post(s.Now().Add(sim.Duration(p.rnd.IntN(3))*100), p, arg*31+1)
}

func newGossip(w *sim.World, limit sim.Time) *gossip {
	g := &gossip{la: w.Lookahead(), limit: limit}
	for i := range w.Parts() {
		s := w.Part(i)
		p := &gpart{g: g, s: s, rnd: s.Rand(fmt.Sprintf("gossip/%d", i))}
		g.parts = append(g.parts, p)
		for k := range 4 {
			s.Post(sim.Time(i*70+k*30), p, uint64(i*4+k))
		}
	}
	return g
}

func (g *gossip) logs() string {
	var b strings.Builder
	for i, p := range g.parts {
		fmt.Fprintf(&b, "part %d (%d events): %s\n", i, p.n, p.log.String())
	}
	return b.String()
}

func runGossip(t *testing.T, parts int, exec sim.Exec) (string, sim.Time, uint64) {
	t.Helper()
	w := sim.NewWorld(sim.Config{Seed: 7}, parts, 250)
	w.SetExec(exec)
	g := newGossip(w, 200_000)
	require.NoError(t, w.Run())
	return g.logs(), w.Now(), w.Fired()
}

// The sequential kernel fires the World's events in the World's order:
// every partition's log is the same, whatever the partition count.
func TestWorldIsTheSequentialKernel(t *testing.T) {
	for _, parts := range []int{1, 2, 5, 16} {
		want, wantNow, wantFired := runGossip(t, parts, sim.Serial)
		w := sim.NewWorld(sim.Config{Seed: 7}, parts, 250)
		w.SetSequential(true)
		g := newGossip(w, 200_000)
		require.NoError(t, w.Run())
		require.Equal(t, want, g.logs(), "parts %d", parts)
		require.Equal(t, wantNow, w.Now())
		require.Equal(t, wantFired, w.Fired())
	}
}

// A partition's order of same-instant events does not depend on the
// windows: a World whose windows are shorter than the model's least
// cross-partition delay (more, shorter windows; events handed over at
// other instants) fires every partition's events in the same order.
func TestWorldWindowsDoNotChangeTheRun(t *testing.T) {
	run := func(lookahead sim.Duration, sequential bool) string {
		w := sim.NewWorld(sim.Config{Seed: 7}, 5, lookahead)
		w.SetSequential(sequential)
		g := newGossip(w, 200_000)
		g.la = 250 // the model's delay, whatever the windows
		require.NoError(t, w.Run())
		return g.logs()
	}
	want := run(250, false)
	require.Contains(t, want, "(", "the model ran")
	for _, la := range []sim.Duration{1, 37, 100, 249} {
		require.Equal(t, want, run(la, false), "lookahead %v", la)
		require.Equal(t, want, run(la, true), "lookahead %v, sequential", la)
	}
}

// The sequential kernel fires one event at a time in the order (time,
// partition) over all partitions.
func TestSequentialFiresInTimeOrder(t *testing.T) {
	w := sim.NewWorld(sim.Config{Seed: 7}, 5, 250)
	w.SetSequential(true)
	g := newGossip(w, 50_000)
	type ev struct {
		at   sim.Time
		part int
	}
	var seen []ev
	for _, p := range g.parts {
		p.s.SetTracer(func(r sim.Record) { seen = append(seen, ev{r.At, p.s.Part()}) })
	}
	require.NoError(t, w.Run())
	require.Greater(t, len(seen), 1000)
	for i := 1; i < len(seen); i++ {
		a, b := seen[i-1], seen[i]
		require.True(t, a.at < b.at || (a.at == b.at && a.part <= b.part), "event %d: %v after %v", i, b, a)
	}
}

func TestWorldWorkersDoNotChangeTheRun(t *testing.T) {
	for _, parts := range []int{1, 2, 5, 16} {
		want, wantNow, wantFired := runGossip(t, parts, sim.Serial)
		require.Greater(t, wantFired, uint64(parts*100))
		for _, workers := range []int{1, 2, 3, 8} {
			p := par.NewPool(workers)
			got, now, fired := runGossip(t, parts, p.Exec)
			p.Close()
			require.Equal(t, want, got, "parts %d workers %d", parts, workers)
			require.Equal(t, wantNow, now)
			require.Equal(t, wantFired, fired)
		}
	}
}

// A World of one partition is the lone Sim: same events in the same order.
func TestWorldOfOneIsTheSim(t *testing.T) {
	w := sim.NewWorld(sim.Config{Seed: 7}, 1, 250)
	gw := newGossip(w, 100_000)
	require.NoError(t, w.Run())

	s := sim.New(sim.Config{Seed: 7})
	g := &gossip{la: 250, limit: 100_000}
	p := &gpart{g: g, s: s, rnd: s.Rand("gossip/0")}
	g.parts = []*gpart{p}
	for k := range 4 {
		s.Post(sim.Time(k*30), p, uint64(k))
	}
	require.NoError(t, s.Run())
	require.Equal(t, g.logs(), gw.logs())
	require.Equal(t, s.Now(), w.Now())
}

func TestWorldSendWithinLookaheadPanics(t *testing.T) {
	w := sim.NewWorld(sim.Config{}, 2, 250)
	a, b := w.Part(0), w.Part(1)
	a.Post(1000, sim.HandlerFunc(func(s *sim.Sim, _ uint64) {
		s.Send(b, s.Now().Add(249), sim.HandlerFunc(func(*sim.Sim, uint64) {}), 0)
	}), 0)
	require.PanicsWithValue(t, "sim: Send from partition 0 at 1ns to partition 1 at 1.249ns is within the lookahead 250ps (handler sim.HandlerFunc arg 0x0)",
		func() { _ = w.Run() })
}

// Stop ends the run with the window: the other partitions fire their
// events before the window's end, none after, and every clock is the
// window's end; a second Run carries on.
func TestWorldStopEndsTheWindow(t *testing.T) {
	w := sim.NewWorld(sim.Config{}, 2, 1000)
	var fired []string
	rec := func(name string) sim.Handler {
		return sim.HandlerFunc(func(s *sim.Sim, _ uint64) { fired = append(fired, fmt.Sprintf("%s@%d", name, s.Now())) })
	}
	a, b := w.Part(0), w.Part(1)
	a.Post(100, sim.HandlerFunc(func(s *sim.Sim, _ uint64) { fired = append(fired, "stop@100"); s.Stop() }), 0)
	a.Post(500, rec("a"), 0)
	b.Post(900, rec("b"), 0)
	b.Post(1100, rec("late"), 0)
	require.NoError(t, w.Run())
	require.Equal(t, []string{"stop@100", "a@500", "b@900"}, fired)
	require.Equal(t, sim.Time(1100), w.Now()) // the window [100, 1100)
	require.Equal(t, sim.Time(1100), a.Now())
	require.Equal(t, sim.Time(1100), b.Now())
	require.NoError(t, w.Run())
	require.Equal(t, "late@1100", fired[len(fired)-1])
}

func TestWorldFailReturnsLowestPartition(t *testing.T) {
	w := sim.NewWorld(sim.Config{}, 3, 1000)
	for i, at := range []sim.Time{0, 300, 200} {
		w.Part(i).Post(at, sim.HandlerFunc(func(s *sim.Sim, _ uint64) {
			if s.Part() > 0 {
				s.Fail(fmt.Errorf("part %d failed", s.Part()))
			}
		}), 0)
	}
	require.EqualError(t, w.Run(), "part 1 failed")
}

// OnWindowOverlapped hooks consume every window once, in window order,
// after that window's OnWindow hooks, beside the next window's partitions
// (or before Run returns; on the sequential kernel, workers -1, right
// after the hooks), and change nothing of the run.
func TestWorldOverlappedHooksConsumeEveryWindow(t *testing.T) {
	for _, parts := range []int{1, 3, 8} {
		want, wantNow, wantFired := runGossip(t, parts, sim.Serial)
		for _, workers := range []int{-1, 0, 1, 2, 5} {
			exec, closePool := sim.Exec(sim.Serial), func() {}
			if workers > 0 {
				p := par.NewPool(workers)
				exec, closePool = p.Exec, p.Close
			}
			w := sim.NewWorld(sim.Config{Seed: 7}, parts, 250)
			w.SetExec(exec)
			w.SetSequential(workers < 0)
			g := newGossip(w, 200_000)
			// handed[k] is what window k's OnWindow hook handed over: the
			// events fired so far; got is what the overlapped hook saw.
			var handed, got []string
			w.OnWindow(func(end sim.Time) {
				handed = append(handed, fmt.Sprintf("%d:%d", end, w.Fired()))
			})
			w.OnWindowOverlapped(func(end sim.Time) {
				k := len(got)
				require.Less(t, k, len(handed), "a window consumed before its OnWindow hook ran")
				require.True(t, strings.HasPrefix(handed[k], fmt.Sprintf("%d:", end)), "window %d: end %d, handed %s", k, end, handed[k])
				got = append(got, handed[k])
			})
			require.NoError(t, w.Run())
			closePool()
			require.Equal(t, want, g.logs(), "parts %d workers %d", parts, workers)
			require.Equal(t, wantNow, w.Now())
			require.Equal(t, wantFired, w.Fired())
			require.Equal(t, handed, got, "parts %d workers %d", parts, workers)
			require.Len(t, got, int(w.Windows()))
		}
	}
}

// A run that Stop ended has consumed its last window when Run returns; a
// second Run carries on from there.
func TestWorldOverlappedHooksDrainOnStop(t *testing.T) {
	for _, seq := range []bool{false, true} {
		t.Run(fmt.Sprint("sequential=", seq), func(t *testing.T) { testOverlappedDrainOnStop(t, seq) })
	}
}

func testOverlappedDrainOnStop(t *testing.T, seq bool) {
	w := sim.NewWorld(sim.Config{}, 2, 1000)
	w.SetSequential(seq)
	var ends []sim.Time
	w.OnWindowOverlapped(func(end sim.Time) { ends = append(ends, end) })
	a, b := w.Part(0), w.Part(1)
	a.Post(100, sim.HandlerFunc(func(s *sim.Sim, _ uint64) {}), 0)
	b.Post(1500, sim.HandlerFunc(func(s *sim.Sim, _ uint64) { s.Stop() }), 0)
	b.Post(5000, sim.HandlerFunc(func(s *sim.Sim, _ uint64) {}), 0)
	require.NoError(t, w.Run())
	require.Equal(t, []sim.Time{1100, 2500}, ends)
	require.NoError(t, w.Run())
	require.Equal(t, []sim.Time{1100, 2500, 6000}, ends)
}
