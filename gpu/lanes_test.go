package gpu

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/require"
)

// lanesWarp is the warp of TestLanes as a state machine: a run of three
// jobs on the lanes, a run of one on itself, then Close.
type lanesWarp struct {
	t    *Group
	l    *Lanes
	pc   int
	ends *[]sim.Time
}

func (m *lanesWarp) Handle(*sim.Sim, uint64) {
	switch m.pc {
	case 0:
		m.pc = 1
		m.l.ResumeWarp(m)
		m.l.RunThen(3)
	case 1:
		*m.ends = append(*m.ends, m.t.Now())
		m.pc = 2
		m.t.SleepThen(100*sim.Nanosecond, m, 0) // the one job, on the warp
	default:
		*m.ends = append(*m.ends, m.t.Now())
		m.l.Close()
		m.t.End()
	}
}

// A run returns when its slowest job is done; each lane starts once before
// its first job; the process and the Then forms end at the same instants
// and run the same jobs on the same lanes.
func TestLanes(t *testing.T) {
	dur := func(i int) sim.Duration { return sim.Duration(i+1) * 1000 * sim.Nanosecond }
	run := func(then bool) (ends []sim.Time, ran []int, starts int) {
		nd := newNode(t, 1)
		g := nd.gpus[0]
		start := func(th *Group, i int) { starts++ }
		job := func(th *Group, i int) { ran = append(ran, i); th.Sleep(dur(i)) }
		if !then {
			g.Launch("warp", 32, func(w *Group) {
				l := NewLanes(w, 3, start, job, nil, nil)
				l.Run(3)
				ends = append(ends, w.Now())
				l.Run(1)
				ends = append(ends, w.Now())
				l.Close()
			})
		} else {
			m := &lanesWarp{ends: &ends}
			m.t = g.LaunchHandler("warp", 32, m, 0)
			m.l = NewLanes(m.t, 3, start, job, func(th *Group, i int, h sim.Handler, arg uint64) {
				ran = append(ran, i)
				th.SleepThen(dur(i), h, arg)
			}, nil)
		}
		require.NoError(t, nd.s.Run())
		return ends, ran, starts
	}
	pe, pr, ps := run(false)
	require.Len(t, pe, 2)
	require.Equal(t, 3, ps, "every lane starts once")
	require.GreaterOrEqual(t, pe[0], sim.Time(0).Add(dur(2)), "a run waits for its slowest job")
	te, tr, ts := run(true)
	require.Equal(t, ps, ts)
	require.Equal(t, pe[0], te[0])
	require.ElementsMatch(t, pr[:3], tr[:3])
}
