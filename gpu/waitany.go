package gpu

import (
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// WaitAny parks a group until any of several words changes. The group's
// lanes poll one word each, every per, so the change is seen at the first
// poll instant after it (counted from the start of the wait). Wait runs on
// the group's process; WaitThen and WaitDoneThen are the same wait for a
// group without one (gpu's Then form).
type WaitAny struct {
	t     *Group
	armed bool
	base  sim.Time
	per   sim.Duration
	h     sim.Handler // WaitThen's continuation (nil: wake the process)
	arg   uint64
}

// NewWaitAny returns a wait-any of group t.
func NewWaitAny(t *Group) WaitAny { return WaitAny{t: t} }

// WordChanged implements mem.Watcher.
func (a *WaitAny) WordChanged(*mem.Region, uint64) {
	if !a.armed {
		return
	}
	a.armed = false
	now := a.t.Now()
	k := (now.Sub(a.base) + a.per - 1) / a.per
	if a.h != nil {
		h := a.h
		a.h = nil
		a.t.GPU().Sim().Post(a.base.Add(k*a.per), h, a.arg)
		return
	}
	a.t.Proc().WakeAt(a.base.Add(k * a.per))
}

// WaitThen is Wait for a group without a process: h.Handle(s, arg) runs
// when Wait's park would end; it then calls WaitDoneThen.
func (a *WaitAny) WaitThen(regs []*mem.Region, offs []uint64, per sim.Duration, h sim.Handler, arg uint64) {
	a.base, a.per, a.armed = a.t.Now(), per, true
	a.h, a.arg = h, arg
	for i, r := range regs {
		r.Watch(offs[i], a)
	}
}

// WaitDoneThen ends WaitThen: it stops watching and pays one load of
// latency lat, then continues at h.
func (a *WaitAny) WaitDoneThen(regs []*mem.Region, offs []uint64, lat sim.Duration, h sim.Handler, arg uint64) {
	for i, r := range regs {
		r.Unwatch(offs[i], a)
	}
	a.t.ComputeThen(lat, h, arg)
}

// Wait parks until one of regs[i]/offs[i] changes, polled every per, then
// pays one load of latency lat.
func (a *WaitAny) Wait(regs []*mem.Region, offs []uint64, per, lat sim.Duration, reason string) {
	a.base, a.per, a.armed = a.t.Now(), per, true
	for i, r := range regs {
		r.Watch(offs[i], a)
	}
	a.t.Proc().Park(reason)
	for i, r := range regs {
		r.Unwatch(offs[i], a)
	}
	a.t.Compute(lat)
}
