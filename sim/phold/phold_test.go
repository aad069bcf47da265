package phold_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/phold"
)

func small() phold.Config {
	return phold.Config{Seed: 3, Parts: 6, LPs: 4, Pending: 2, Remote: 0.5,
		Lookahead: 250 * sim.Nanosecond, Mean: 200 * sim.Nanosecond, Work: 10, End: sim.Time(200 * sim.Microsecond)}
}

func run(t *testing.T, cfg phold.Config, workers int) phold.Result {
	t.Helper()
	m, err := phold.New(cfg)
	require.NoError(t, err)
	if workers > 0 {
		p := par.NewPool(workers)
		defer p.Close()
		m.World().SetExec(p.Exec)
	}
	require.NoError(t, m.World().Run())
	return m.Result()
}

func TestWorkersDoNotChangeTheRun(t *testing.T) {
	want := run(t, small(), 0)
	// Every process is busy for the whole run: 6*4*2 events per 450 ns.
	require.Greater(t, want.Events, uint64(15_000))
	for _, w := range []int{1, 2, 3, 7} {
		require.Equal(t, want, run(t, small(), w), "workers %d", w)
	}
}

// The digest sees the run: another seed or another remote fraction gives
// another digest.
func TestDigestTellsRunsApart(t *testing.T) {
	a := run(t, small(), 0)
	c := small()
	c.Seed++
	require.NotEqual(t, a.Digest, run(t, c, 0).Digest)
	c = small()
	c.Remote = 0.25
	require.NotEqual(t, a.Digest, run(t, c, 0).Digest)
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*phold.Config)
		want string
	}{
		{func(c *phold.Config) { c.Parts = 0 }, "phold: parts 0 must be at least 1"},
		{func(c *phold.Config) { c.Remote = 2 }, "phold: remote 2 must be in [0, 1]"},
		{func(c *phold.Config) { c.Lookahead = 0 }, "phold: lookahead 0s must be positive"},
		{func(c *phold.Config) { c.End = 0 }, "phold: end 0s must be positive"},
	} {
		c := small()
		tc.edit(&c)
		_, err := phold.New(c)
		require.EqualError(t, err, tc.want)
	}
}

// BenchmarkFineWindows is PHOLD with windows as fine as a packet-level
// all-to-all's: 128 partitions, about 4 events each per window (505 in all), so that
// the cost of a window's hand-off and the serial step between windows
// shows. ns/op is one run; the events/s metric is what to compare.
func BenchmarkFineWindows(b *testing.B) {
	cfg := phold.Config{Seed: 1, Parts: 128, LPs: 4, Pending: 2, Remote: 0.5,
		Lookahead: 250 * sim.Nanosecond, Mean: 250 * sim.Nanosecond, Work: 0, End: sim.Time(100 * sim.Microsecond)}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var events uint64
			for b.Loop() {
				m, err := phold.New(cfg)
				require.NoError(b, err)
				p := par.NewPool(workers)
				m.World().SetExec(p.Exec)
				require.NoError(b, m.World().Run())
				p.Close()
				events += m.World().Fired()
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds()/1e6, "Mevents/s")
		})
	}
}
