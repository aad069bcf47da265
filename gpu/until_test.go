package gpu

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/require"
)

// untilMachine computes until 40 ns (from 0), sleeps until 100 ns, then
// asks for both again at times already past: those take no time and
// start nothing, so the machine goes straight on in the same Handle.
type untilMachine struct {
	t       *Group
	started []bool
	at      []sim.Time
	calls   int
	pc      int
}

func (m *untilMachine) Handle(*sim.Sim, uint64) {
	m.calls++
	for {
		m.at = append(m.at, m.t.Now())
		m.pc++
		var ok bool
		switch m.pc {
		case 1:
			ok = m.t.ComputeUntilThen(sim.Time(40*sim.Nanosecond), m, 0)
		case 2:
			ok = m.t.SleepUntilThen(sim.Time(100*sim.Nanosecond), m, 0)
		case 3:
			ok = m.t.ComputeUntilThen(sim.Time(70*sim.Nanosecond), m, 0)
		case 4:
			ok = m.t.SleepUntilThen(m.t.Now(), m, 0)
		default:
			m.t.End()
			return
		}
		m.started = append(m.started, ok)
		if ok {
			return
		}
	}
}

func TestUntilThen(t *testing.T) {
	nd := newNode(t, 1)
	m := &untilMachine{}
	m.t = nd.gpus[0].LaunchHandler("u", 32, m, 0)
	require.NoError(t, nd.s.Run())
	ns := func(n int64) sim.Time { return sim.Time(sim.Duration(n) * sim.Nanosecond) }
	require.Equal(t, []bool{true, true, false, false}, m.started)
	require.Equal(t, []sim.Time{0, ns(40), ns(100), ns(100), ns(100)}, m.at)
	require.Equal(t, 3, m.calls, "the launch and two wake-ups; the past ends run inline")
	require.Equal(t, 40*sim.Nanosecond, m.t.Busy(), "only the compute is SM time")
}
