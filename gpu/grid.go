package gpu

import (
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// GridSync is cooperative_groups::this_grid().sync() for a kernel of n
// participating groups: t adds one to the device-scope counter word (r,
// off), one word per sync point, and spins until the word reaches n.
func (t *Group) GridSync(r *mem.Region, off, n uint64) {
	t.AtomicAdd64(r, off, 1, ScopeDevice)
	t.WaitWord(r, off, "grid sync", func(v uint64) bool { return v >= n })
}

// GridArriveThen is GridSync's arrival for a group without a process; it
// continues at h, which then calls GridWaitThen.
func (t *Group) GridArriveThen(r *mem.Region, off uint64, h sim.Handler, arg uint64) {
	t.AtomicAdd64Then(r, off, 1, ScopeDevice, h, arg)
}

// GridWaitThen is GridSync's spin for a group without a process: reached
// reports whether the word has reached the participant count (a closure
// the caller builds once); it continues at h.
func (t *Group) GridWaitThen(r *mem.Region, off uint64, reached func(v uint64) bool, h sim.Handler, arg uint64) {
	t.WaitWordThen(r, off, "grid sync", reached, h, arg)
}
