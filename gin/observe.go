package gin

import (
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// SetObserver makes the communicator's front end emit obs events into b
// (nil: off) and draw an operation id from it for every put, putValue,
// signal and get. Backends, NICs and the fabric take the same bus through
// their own SetObserver (gin/machine.Machine.SetObserver and
// gin/bench.Env.Observe wire them all).
//
// On a sim.World b is a split bus (obs.Split): each rank emits into, and
// draws ids from, its partition's bus; the device communicators that
// exist draw their domains now, in creation order.
func (c *Comm) SetObserver(b *obs.Bus) {
	c.obs = b
	if b != nil && c.parts > 1 {
		for _, dc := range c.devs {
			dc.domain()
		}
	}
}

// bus returns the bus g's rank emits into (call it with an observer set).
func (g *Gin) bus() *obs.Bus {
	b := g.dc.c.obs
	if g.dc.c.parts == 1 {
		return b
	}
	return b.Part(g.dc.c.ranks[g.rank].Part())
}

// Observer returns the communicator's bus (nil: off); backends and gin/lsa
// emit into it.
func (c *Comm) Observer() *obs.Bus { return c.obs }

// Observer returns the bus of dc's communicator (nil: off).
func (dc *DevComm) Observer() *obs.Bus { return dc.c.obs }

// stamp gives g.op a fresh operation id and reports it issued; a no-op
// when nobody observes (the id stays 0). It inlines to a nil test.
func (g *Gin) stamp() {
	if g.dc.c.obs != nil && !g.internal {
		g.issued()
	}
}

func (g *Gin) issued() {
	b := g.bus()
	g.op.ID = b.NewOp()
	g.lastOp = g.op.ID
	n := g.op.Bytes
	if g.op.Kind == OpPutValue {
		n = uint64(g.op.ValueSize)
	}
	b.Emit(obs.Event{Kind: obs.Issued, At: g.t.Now(), Op: g.op.ID, Who: g.t.Agent(), Where: g.op.Kind.String(),
		Index: uint64(g.rank), Value: uint64(g.op.Peer), Bytes: n, QP: uint32(g.ctx), Code: actions(&g.op), Addr: g.dc.domain()})
}

// domain returns the device communicator's observer domain, drawn from
// the bus on first use.
func (dc *DevComm) domain() uint64 {
	if !dc.hasDom {
		dc.dom, dc.hasDom = dc.c.obs.NewDomain(), true
	}
	return dc.dom
}

// actions returns the obs.Issued* bits of op.
func actions(op *Op) uint32 {
	var c uint32
	switch op.Remote.(type) {
	case SignalInc, SignalAdd:
		c |= obs.IssuedSignal
	case VASignalInc, VASignalAdd:
		c |= obs.IssuedVASignal
	}
	if op.Remote != nil && IsWeak(op.Remote) {
		c |= obs.IssuedWeak
	}
	if op.Local != nil {
		c |= obs.IssuedCounter
	}
	return c
}

// read reports a device read of n bytes at off of r (Note what; v the
// word read), stamped with the op that last changed the word.
func (g *Gin) read(what string, r *mem.Region, off, n, v uint64) {
	if g.dc.c.obs != nil && !g.internal {
		b := g.bus()
		b.Emit(obs.Event{Kind: obs.Read, At: g.t.Now(), Op: b.LastOp(r.Name(), off), Who: g.t.Agent(), Where: r.Name(),
			Note: what, Addr: off, Bytes: n, Value: v, Index: uint64(g.rank), QP: uint32(g.ctx)})
	}
}

// completed reports a flushAsync wait (what "wait", v the peer) or a
// barrier (what "barrier", code its fence, v 1 for all contexts) that
// began at since.
func (g *Gin) completed(what string, since sim.Time, code uint32, v uint64) {
	if g.dc.c.obs != nil && !g.internal {
		g.bus().Emit(obs.Event{Kind: obs.Completed, At: g.t.Now(), Op: g.lastOp, Who: g.t.Agent(), Note: what,
			Code: code, Value: v, Index: uint64(g.rank), QP: uint32(g.ctx), Addr: g.dc.domain(), Then: since})
	}
}

// seen reports that a wait on the word at off of r, begun at since,
// returned with v: kind SignalSeen (Note "signal", "va signal") or
// Completed (Note "counter", "flush"), stamped with the op that last
// changed the word (op: the handle's last op for a flush).
func (g *Gin) seen(k obs.Kind, what string, since sim.Time, r *mem.Region, off, v uint64) {
	if g.dc.c.obs != nil && !g.internal {
		g.emitSeen(k, what, since, r, off, v)
	}
}

func (g *Gin) emitSeen(k obs.Kind, what string, since sim.Time, r *mem.Region, off, v uint64) {
	b := g.bus()
	e := obs.Event{Kind: k, At: g.t.Now(), Who: g.t.Agent(), Note: what, Addr: off, Value: v, Index: uint64(g.rank), QP: uint32(g.ctx),
		Then: since}
	if r != nil {
		e.Op, e.Where = b.LastOp(r.Name(), off), r.Name()
	} else {
		e.Op, e.Addr = g.lastOp, g.dc.domain()
	}
	b.Emit(e)
}
