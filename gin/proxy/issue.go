package proxy

import (
	"encoding/binary"
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/internal/submit"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// The GPU side of the proxy backend (NCCL's postGfd and the flush's
// spin on cis) is a state machine (issuer) driven by the group's Then
// operations, as gdaki's is, so that one implementation serves both
// callers: Issue and Wait run it for a group with a process and park that
// process until it ends (resuming it in the event of the last step, as
// its own wake-up would); IssueThen and FlushThen run it for a group
// without one and then hand the group to the caller's continuation. The
// steps and their costs are:
//
//	issue: [fence.release.sys] → per GFD: write → [get bookkeeping]
//	write: atomicAdd.sys(pis[peer]) → load cis[peer] → [spin until the
//	       slot is free] → build cycles → write-through 16-B stores
//	wait:  [load pis[peer]: the ticket] → load cis[peer], or spin on it
//	       until it reaches the ticket

// Steps of the issuer.
const (
	stIssue uint8 = iota
	stBuild
	stClaim
	stClaimed
	stCredit
	stGFD
	stStore
	stStored
	stIssued

	stTicket
	stTicketed
	stWait
	stWaitDone
	stSelfFlush
	stSelfWait
	stSelfDone
	stEnd
)

// issuer is one run of the submit or flush path by one group.
type issuer struct {
	b    *Backend
	ln   *lane // the issuing group's partition's
	cs   *commState
	rank int
	op   *gin.Op
	ch   *channel

	gfds []GFD    // the op's descriptors, written in order
	i    int      // the one being written
	idx  uint64   // its slot claim (pis fetch_add result)
	land sim.Time // when its last store lands

	ctx, peer int    // Wait's (context, peer)
	ticket    uint64 // Wait's target for cis[peer]
	getMark   uint64 // the gets a self Flush GFD makes visible (lastGet)
	flushing  bool   // writing that Flush GFD

	submit.Run // the driver: t, the step, the continuation and the run's end
}

// newIssuer takes an issuer from the backend's free list.
func (b *Backend) newIssuer(t *gpu.Group, cs *commState, rank int) *issuer {
	ln := b.lanes[t.GPU().Sim().Part()]
	m := ln.free.Get()
	gfds := m.gfds[:0]
	*m = issuer{b: b, ln: ln, cs: cs, rank: rank, gfds: gfds, Run: submit.NewRun(m, t, "proxy issue")}
	return m
}

// Step implements submit.Stepper: it runs the machine until it starts an
// operation that takes time (its completion calls Handle) or ends.
func (m *issuer) Step() {
	b, t := m.b, m.T
	for {
		switch m.PC {
		case stIssue:
			m.ln.st.Ops++
			m.PC = stBuild
			if m.FenceSys(m.op, true, m.ln.events) {
				return
			}
		case stBuild:
			m.gfds = appendGFDs(m.gfds, m.cs.ver, m.op)
			m.i = 0
			m.PC = stClaim
		case stClaim:
			if m.i == len(m.gfds) {
				m.PC = stIssued
				continue
			}
			m.PC = stClaimed
			t.AtomicAdd64Then(m.cs.ranks[m.rank].pis[m.ch.ctx], 8*uint64(m.ch.peer), 1, gpu.ScopeSystem, m, 0)
			return
		case stClaimed:
			m.idx = t.Result()
			m.PC = stCredit
			t.Load64Then(m.cs.ranks[m.rank].cis[m.ch.ctx], 8*uint64(m.ch.peer), m, 0)
			return
		case stCredit:
			ch := m.ch
			m.PC = stGFD
			if idx, c, q := m.idx, t.Result(), uint64(b.cfg.QueueSize); idx-c >= q {
				if m.ln.events != nil {
					m.ln.emit(t, obs.Event{Kind: obs.CreditWait, Op: m.opID(), Where: ch.name, Index: idx, Value: c})
				}
				t.WaitWordThen(m.cs.ranks[m.rank].cis[ch.ctx], 8*uint64(ch.peer), "proxy credit",
					func(v uint64) bool { return idx-v < q }, m, 0)
				return
			}
		case stGFD:
			m.PC = stStore
			t.CyclesThen(b.cfg.GFDBuildCycles, m, 0)
			return
		case stStore:
			ch, g := m.ch, &m.gfds[m.i]
			n := m.cs.ver.Qwords()
			if err := g.Encode(m.cs.ver, m.ln.enc[:n]); err != nil {
				m.fail(fmt.Errorf("proxy: %s: t=%v: %w", ch.name, t.Now(), err))
				return
			}
			for i := range n {
				binary.LittleEndian.PutUint64(m.ln.gfd[8*i:], m.ln.enc[i])
			}
			slot := m.idx & (uint64(b.cfg.QueueSize) - 1)
			if m.ln.events != nil {
				ch.setID(m.idx, uint64(b.cfg.QueueSize), m.opID())
			}
			m.PC = stStored
			// The stores copy the bytes at issue, so the next writer may
			// reuse the scratch at once.
			m.land = t.WriteWTThen(ch.ring, slot*uint64(8*n), m.ln.gfd[:8*n], sim.Bytes(8*n), m, 0)
			return
		case stStored:
			g := &m.gfds[m.i]
			m.ln.st.GFDs++
			if m.ln.events != nil {
				m.ln.emit(t, obs.Event{Kind: obs.Posted, Op: m.opID(), Where: m.ch.name, Index: m.idx, Code: uint32(g.Op), Bytes: g.Size, Then: m.land})
			}
			m.i++
			m.PC = stClaim
		case stIssued:
			if m.flushing {
				m.PC = stSelfWait
				continue
			}
			if op := m.op; op.Kind == gin.OpGet {
				rs := &m.cs.ranks[m.rank]
				rs.lastGet[op.Ctx*m.cs.nranks+op.Peer] = rs.pis[op.Ctx].Load64(8 * uint64(op.Peer))
			}
			m.PC = stEnd

		case stTicket:
			m.PC = stTicketed
			t.Load64Then(m.cs.ranks[m.rank].pis[m.ctx], 8*uint64(m.peer), m, 0)
			return
		case stTicketed:
			m.ticket = t.Result()
			m.PC = stWait
		case stWait:
			m.PC = stWaitDone
			cis, off, tk := m.cs.ranks[m.rank].cis[m.ctx], 8*uint64(m.peer), m.ticket
			if cis.Load64(off) >= tk {
				t.Load64Then(cis, off, m, 0)
				return
			}
			t.WaitWordThen(cis, off, "proxy flush", func(v uint64) bool { return v >= tk }, m, 0)
			return
		case stWaitDone:
			m.PC = stEnd
			// 2.30: gets covered by the wait and not yet made visible
			// need a Flush GFD on the rank's own queue (gin_proxy.h@230
			// L328; gin-semantics-review M7).
			if k := m.ctx*m.cs.nranks + m.peer; m.cs.ver == GFDv2 && m.peer != m.rank {
				rs := &m.cs.ranks[m.rank]
				if g := rs.lastGet[k]; g > rs.visGet[k] && g <= m.ticket {
					m.getMark, m.PC = g, stSelfFlush
				}
			}
		case stSelfFlush:
			m.ch = m.cs.ch(m.rank, m.ctx, m.rank)
			m.gfds = append(m.gfds[:0], GFD{Op: GFDFlush})
			m.i, m.flushing = 0, true
			m.PC = stClaim
		case stSelfWait:
			m.PC = stSelfDone
			cis, off, tk := m.cs.ranks[m.rank].cis[m.ctx], 8*uint64(m.rank), m.idx+1
			if cis.Load64(off) >= tk {
				t.Load64Then(cis, off, m, 0)
				return
			}
			t.WaitWordThen(cis, off, "proxy get flush", func(v uint64) bool { return v >= tk }, m, 0)
			return
		case stSelfDone:
			k := m.ctx*m.cs.nranks + m.peer
			rs := &m.cs.ranks[m.rank]
			rs.visGet[k] = max(rs.visGet[k], m.getMark)
			m.PC = stEnd

		case stEnd:
			m.end()
			return
		default:
			panic(fmt.Sprintf("proxy: issuer in unknown step %d", m.PC))
		}
	}
}

// appendGFDs appends the descriptors of op to gfds, in the order the GPU
// writes them: the parts of a put split at 1 GiB (2.30), then the op's
// own GFD, or the put and then its VA-signal GFD.
func appendGFDs(gfds []GFD, ver GFDVersion, op *gin.Op) []GFD {
	var g GFD
	switch op.Kind {
	case gin.OpPut:
		g = GFD{Op: GFDPut, Size: op.Bytes, SrcOff: op.SrcOff, SrcHandle: uint64(op.Src.ID() + 1), DstOff: op.DstOff,
			DstHandle: uint64(op.Dst.ID() + 1)}
		if ver == GFDv2 {
			for g.Size > maxGFDBytes { // 2.30: split into 1-GiB plain puts
				part := g
				part.Size = maxGFDBytes
				gfds = append(gfds, part)
				g.Size -= maxGFDBytes
				g.SrcOff += maxGFDBytes
				g.DstOff += maxGFDBytes
			}
		}
	case gin.OpPutValue:
		g = GFD{Op: GFDPut | GFDWithInline, Size: uint64(op.ValueSize), Inline: op.Value, DstOff: op.DstOff,
			DstHandle: uint64(op.Dst.ID() + 1)}
	case gin.OpSignal:
		g = GFD{}
	case gin.OpGet:
		g = GFD{Op: GFDGet, Size: op.Bytes, SrcOff: op.DstOff, SrcHandle: uint64(op.Dst.ID() + 1), DstOff: op.SrcOff,
			DstHandle: uint64(op.Src.ID() + 1)}
	}
	if id, add, ok := gin.SignalOf(op.Remote); ok {
		g.SignalID, g.SignalVal = uint32(id), add
		if _, inc := op.Remote.(gin.SignalInc); inc {
			g.Op |= GFDWithSignalInc
		} else {
			g.Op |= GFDWithSignalAdd
		}
		g.Strong = !gin.IsWeak(op.Remote)
	}
	if c, ok := op.Local.(gin.CounterInc); ok {
		g.Op |= GFDWithCounter
		g.CounterID = uint32(c.Counter)
	}
	if w, off, add, ok := gin.VASignalOf(op.Remote); ok {
		va := GFD{Op: GFDVASignal | GFDWithSignalAdd, SignalVal: add, VASigOff: off, VASigHandle: uint64(w.ID() + 1),
			Strong: !gin.IsWeak(op.Remote)}
		if op.Kind != gin.OpSignal { // a signal alone is the VA-signal GFD alone
			gfds = append(gfds, g) // the put, then a VA-signal GFD
		}
		g = va
	}
	return append(gfds, g)
}

// fail fails the run (NCCL traps on a descriptor it cannot encode). The
// group stays where it is.
func (m *issuer) fail(err error) { m.Fail(err) }

// end recycles m and hands the group back.
func (m *issuer) end() { m.ln.free.Recycle(m, &m.Run) }

// opID is the observer id of the operation being issued: 0 for a flush's
// own Flush GFD, which carries no operation of the user's.
func (m *issuer) opID() obs.OpID {
	if m.op == nil {
		return 0
	}
	return m.op.ID
}
