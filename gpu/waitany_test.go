package gpu

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

// waitAnyMachine is WaitAny's Then form: wait, then the load, then end.
type waitAnyMachine struct {
	t          *Group
	aw         WaitAny
	regs       []*mem.Region
	offs       []uint64
	per, lat   sim.Duration
	base, done sim.Time
	pc         int
}

func (m *waitAnyMachine) Handle(*sim.Sim, uint64) {
	switch m.pc {
	case 0:
		m.pc = 1
		m.base = m.t.Now()
		m.aw.WaitThen(m.regs, m.offs, m.per, m, 0)
	case 1:
		m.pc = 2
		m.aw.WaitDoneThen(m.regs, m.offs, m.lat, m, 0)
	default:
		m.done = m.t.Now()
		m.t.End()
	}
}

// A wait on two words returns at the first poll instant (a whole number
// of periods after the wait began) at or after a store lands in either,
// plus one load; a later store to the other word does not wake it again.
// The process and the Then forms return at the same instant.
func TestWaitAny(t *testing.T) {
	const per, lat = 700 * sim.Nanosecond, 300 * sim.Nanosecond
	run := func(then bool) (base, landed, done sim.Time) {
		nd := newNode(t, 1)
		g := nd.gpus[0]
		a, b := g.Alloc("a", 64, false), g.Alloc("b", 64, false)
		regs, offs := []*mem.Region{a, b}, []uint64{0, 8}
		var m *waitAnyMachine
		if then {
			m = &waitAnyMachine{regs: regs, offs: offs, per: per, lat: lat}
			m.t = g.LaunchHandler("waiter", 32, m, 0)
			m.aw = NewWaitAny(m.t)
		} else {
			g.Launch("waiter", 32, func(tg *Group) {
				aw := NewWaitAny(tg)
				base = tg.Now()
				aw.Wait(regs, offs, per, lat, "any")
				done = tg.Now()
			})
		}
		g.Launch("writer", 32, func(tg *Group) {
			tg.Sleep(1000 * sim.Nanosecond)
			landed = tg.Store64(b, 8, 1)
			tg.Sleep(5000 * sim.Nanosecond)
			tg.Store64(a, 0, 1)
		})
		require.NoError(t, nd.s.Run())
		if then {
			base, done = m.base, m.done
		}
		return base, landed, done
	}
	for _, then := range []bool{false, true} {
		base, landed, done := run(then)
		k := (landed.Sub(base) + per - 1) / per
		require.Equal(t, base.Add(k*per+lat), done, "then=%v", then)
	}
	_, _, p := run(false)
	_, _, q := run(true)
	require.Equal(t, p, q)
}
