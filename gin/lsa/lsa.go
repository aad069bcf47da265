package lsa

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// LSA is one rank's load/store access to its LSA team, bound to a coop.
type LSA struct {
	dc   *gin.DevComm
	t    *gpu.Group
	rank int
	team gin.Team
	call gin.Call
}

// New returns world rank rank's LSA access for coop t.
func New(dc *gin.DevComm, t *gpu.Group, rank int) *LSA {
	return &LSA{dc: dc, t: t, rank: rank, team: dc.LSA(rank)}
}

// stored reports an LSA store of n bytes at off of r, visible at vis, to
// the communicator's observer (obs.LSAStored, with a fresh operation id),
// and returns vis.
func (l *LSA) stored(r *mem.Region, off, n uint64, vis sim.Time) sim.Time {
	if b := l.dc.Observer().Of(l.t.GPU().Sim()); b != nil {
		b.Emit(obs.Event{Kind: obs.LSAStored, At: l.t.Now(), Then: vis, Op: b.NewOp(), Who: l.t.Agent(), Where: r.Name(),
			Addr: off, Bytes: n, Index: uint64(l.rank)})
	}
	return vis
}

// Team returns the LSA team.
func (l *LSA) Team() gin.Team { return l.team }

// fail reports a user error (like gin's front end) and stops the coop.
func (l *LSA) fail(op string, kind error, format string, args ...any) {
	s := l.t.GPU().Sim()
	err := &gin.Error{At: s.Now(), Rank: l.rank, Ctx: -1, Coop: l.t.Name(), Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	s.Fail(err)
	l.t.Proc().Park("lsa: failed: " + err.Error())
}

// peer checks an LSA rank and returns its world rank.
func (l *LSA) peer(op string, p int) (int, bool) {
	if p < 0 || p >= l.team.NRanks {
		l.fail(op, gin.ErrPeer, "LSA peer %d of a team of %d ranks", p, l.team.NRanks)
		return 0, false
	}
	return gin.TeamRankToWorld(l.rank, l.team, p), true
}

func (l *LSA) window(op string, w *gin.Window, off, n uint64) bool {
	if w == nil || w.Comm() != l.dc.Comm() || !w.Registered() {
		l.fail(op, gin.ErrUnregistered, "%v", w)
		return false
	}
	if off > uint64(w.Size()) || n > uint64(w.Size())-off {
		l.fail(op, gin.ErrWindowBounds, "%v [%d,+%d) of %d bytes", w, off, n, w.Size())
		return false
	}
	return true
}

func (l *LSA) record(c gin.Call) { l.recordCtx(-1, c) }

func (l *LSA) recordCtx(ctx int, c gin.Call) {
	if h := l.dc.Hook(); h != nil {
		l.call = c
		h.Call(l.t, l.rank, ctx, &l.call)
	}
}

// Copy stores n bytes of src (nil: unknown content) at off of LSA peer
// peer's part of w, through the coop's threads over NVLink (a local copy
// for the rank itself). It returns when the bytes land at the peer; the
// coop continues once the stores are issued.
func (l *LSA) Copy(peer int, w *gin.Window, off uint64, src []byte, n sim.Bytes) sim.Time {
	const op = "lsa_store"
	wr, ok := l.peer(op, peer)
	if !ok || !l.window(op, w, off, uint64(n)) {
		return 0
	}
	l.record(gin.Call{Op: gin.CallLSAStore, Team: l.team, Peer: peer, Dst: w, DstOff: off, Bytes: uint64(n)})
	return l.stored(w.Region(wr), off, uint64(n), l.t.Write(w.Region(wr), off, src, n))
}

// CopyFrom copies n bytes at srcOff of this rank's part of window src to
// dstOff of LSA peer peer's part of dst (a device memcpy through
// ncclGetLsaPointer): the bytes are read when the copy is issued.
func (l *LSA) CopyFrom(peer int, dst *gin.Window, dstOff uint64, src *gin.Window, srcOff uint64, n sim.Bytes) sim.Time {
	const op = "lsa_store"
	wr, ok := l.peer(op, peer)
	if !ok || !l.window(op, dst, dstOff, uint64(n)) || !l.window(op, src, srcOff, uint64(n)) {
		return 0
	}
	l.record(gin.Call{Op: gin.CallLSAStore, Team: l.team, Peer: peer, Dst: dst, DstOff: dstOff, Src: src, SrcOff: srcOff, Bytes: uint64(n)})
	var buf []byte
	if r := src.Region(l.rank); r.Backed() {
		buf = make([]byte, n)
		r.Read(srcOff, buf)
	}
	return l.stored(dst.Region(wr), dstOff, uint64(n), l.t.Write(dst.Region(wr), dstOff, buf, n))
}

// Store stores the 8-byte word v at off of LSA peer peer's part of w.
func (l *LSA) Store(peer int, w *gin.Window, off uint64, v uint64) sim.Time {
	const op = "lsa_store"
	wr, ok := l.peer(op, peer)
	if !ok || !l.window(op, w, off, 8) {
		return 0
	}
	l.record(gin.Call{Op: gin.CallLSAStore, Team: l.team, Peer: peer, Dst: w, DstOff: off, Bytes: 8, Value: v, Size: 8})
	return l.stored(w.Region(wr), off, 8, l.t.Store64(w.Region(wr), off, v))
}

// StoreRelease is a release store (st.release.sys): a system-scope fence
// orders the coop's earlier stores (they land first), then the store.
func (l *LSA) StoreRelease(peer int, w *gin.Window, off uint64, v uint64) sim.Time {
	l.t.Fence(gpu.ScopeSystem)
	return l.Store(peer, w, off, v)
}

// WaitAcquire spins on the word at off of this rank's part of w until it
// reaches least (rolling compare on bits), then syncs the coop.
func (l *LSA) WaitAcquire(w *gin.Window, off uint64, least uint64, bits int) uint64 {
	if !l.window("lsa_wait", w, off, 8) {
		return 0
	}
	v := l.t.WaitWord(w.Region(l.rank), off, fmt.Sprintf("lsa flag %s+%d >= %d", w.Name(), off, least), func(v uint64) bool {
		return gin.RollingLessEq(least, v, bits)
	})
	l.t.Sync()
	return v
}
