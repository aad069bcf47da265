package gpu

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

// gridMachine is a participant of the grid sync in Then form.
type gridMachine struct {
	t       *Group
	r       *mem.Region
	delay   sim.Duration
	reached func(uint64) bool
	left    *sim.Time
	pc      int
}

func (m *gridMachine) Handle(*sim.Sim, uint64) {
	switch m.pc {
	case 0:
		m.pc = 1
		m.t.SleepThen(m.delay, m, 0)
	case 1:
		m.pc = 2
		m.t.GridArriveThen(m.r, 8, m, 0)
	case 2:
		m.pc = 3
		m.t.GridWaitThen(m.r, 8, m.reached, m, 0)
	default:
		*m.left = m.t.Now()
		m.t.End()
	}
}

// No participant leaves a grid sync before the last one has arrived, and
// the process and the Then forms leave at the same instants.
func TestGridSync(t *testing.T) {
	delays := []sim.Duration{0, 3000 * sim.Nanosecond, 1000 * sim.Nanosecond}
	run := func(then bool) []sim.Time {
		nd := newNode(t, 1)
		g := nd.gpus[0]
		r := g.Alloc("grid", 64, false)
		n := uint64(len(delays))
		left := make([]sim.Time, len(delays))
		for i, d := range delays {
			if then {
				m := &gridMachine{r: r, delay: d, left: &left[i], reached: func(v uint64) bool { return v >= n }}
				m.t = g.LaunchHandler("sm", 32, m, 0)
				continue
			}
			g.Launch("sm", 32, func(tg *Group) {
				tg.Sleep(d)
				tg.GridSync(r, 8, n)
				left[i] = tg.Now()
			})
		}
		require.NoError(t, nd.s.Run())
		return left
	}
	p := run(false)
	for i, at := range p {
		require.GreaterOrEqual(t, at, sim.Time(0).Add(delays[1]), "participant %d left before the last arrived", i)
	}
	require.Equal(t, p, run(true))
}
