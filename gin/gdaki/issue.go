package gdaki

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/internal/submit"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// The GPU side of DOCA GPUNetIO's submit path is a state machine (issuer)
// driven by the group's Then operations, so that one implementation serves
// both callers: Issue, FlushAsync and Wait run it for a group with a
// process and park that process until it ends (resuming it in the event of
// the last step, as its own wake-up would); IssueThen runs it for a group
// without one (gpu.GPU.LaunchHandler) and then hands the group to the
// caller's continuation. The steps and their costs are:
//
//	issue: [fence.release.sys] → post → [counter companion: post] → [ring]
//	post:  atomicAdd(sq_rsvd_index) → [credit: poll CQE idx-depth] →
//	       per WQE: build cycles, store → fence.gpu → [spin until
//	       sq_ready_index == base] → atomicAdd(sq_ready_index) → WQEs
//	       visible to the NIC
//	ring:  [spin on sq_lock] → lock, atomicCAS cost → atomicMax(sq_wqe_pi)
//	       → [if it moved: MMIO doorbell, doorbell record, MMIO again]
//	       → unlock
//	poll:  [spin on the CQE's owner word] → parse cycles → status check

// Steps of the issuer. A step either starts an operation whose completion
// re-enters the machine at the step it set, or goes on to the next step.
const (
	stIssue uint8 = iota
	stPost
	stAfterPost
	stAfterComp
	stRing2
	stEnd

	stPReserve
	stPReserved
	stPWQE
	stPStore
	stPFenced
	stPReady
	stPPublish

	stRLock
	stRLocked
	stRPI
	stRDoorbell
	stRRecord
	stRDoorbell2
	stRUnlock

	stQPoll
	stQParse
	stQCheck

	stFlushNop
	stFlushRing
	stWait
	stWaitDone
)

// issuer is one run of the submit path by one group.
type issuer struct {
	b    *Backend
	ln   *lane // the issuing group's partition's
	cs   *commState
	rank int
	op   *gin.Op
	ch   *channel

	// post on pch, then continue at pret.
	pch         *channel
	wrs         []nic.WR
	base        uint64
	i           int32
	scope       gpu.Scope
	skip        bool
	pret        uint8
	rret        uint8 // (ring, below)
	last, clast uint64

	// ring rch up to rpi, then continue at rret.
	rch     *channel
	rpi     uint64
	arrive  sim.Time // the doorbell MMIO's arrival at the NIC
	arrive2 sim.Time // the second one's
	opi     uint64   // sq_wqe_pi before this ring's atomicMax (observer)

	// poll qch's CQE qidx, then continue at qret.
	qch  *channel
	qidx uint64
	qwhy string
	qret uint8

	ticket uint64 // FlushAsync's request ticket

	submit.Run // the driver: t, the step, the continuation and the run's end
}

// newIssuer takes an issuer from the backend's free list.
func (b *Backend) newIssuer(t *gpu.Group, cs *commState, rank int) *issuer {
	ln := b.lanes[t.GPU().Sim().Part()]
	m := ln.free.Get()
	*m = issuer{b: b, ln: ln, cs: cs, rank: rank, Run: submit.NewRun(m, t, "gdaki issue")}
	return m
}

// Step implements submit.Stepper: it runs steps until one starts an
// operation (whose completion calls Handle) or the machine ends.
func (m *issuer) Step() {
	b, t := m.b, m.T
	for {
		switch m.PC {
		case stIssue:
			m.wrs = m.ln.wrList()
			m.ch = b.build(m.cs, m.rank, m.op, &m.wrs)
			m.ln.st.Ops++
			m.PC = stPost
			if m.FenceSys(m.op, false, m.ln.events) {
				return
			}
		case stPost:
			m.post(m.ch, sharingScope(m.op.Sharing), m.op.Flags&gin.OptMaySkipCreditCheck != 0, stAfterPost)
		case stAfterPost:
			op, ch := m.op, m.ch
			if ctr, ok := op.Local.(gin.CounterInc); ok && ch.comp != nil {
				// The counter companion: a WAIT on ch's CQ for the last
				// WQE, then the FETCH_ADD on the counter.
				rs := &m.cs.ranks[m.rank]
				cmr := rs.ctrMR[op.Ctx]
				comp := ch.comp
				m.wrs = m.ln.wrList()
				var w *nic.WR
				if b.cfg.Mutations&MutCounterNoWait == 0 {
					w = addWR(&m.wrs, nic.WRWait)
					w.WaitCQ, w.WaitIndex = ch.cq, m.last+1
				}
				w = addWR(&m.wrs, nic.WRFetchAdd)
				w.CompareAdd, w.Local = 1, nic.SGE{MR: rs.sink(m.cs, op.Ctx), Len: 8}
				w.RemoteVA, w.RKey = cmr.VA+8*uint64(ctr.Counter), cmr.RKey
				if op.ID != 0 {
					for i := range m.wrs {
						m.wrs[i].OpID = op.ID
					}
				}
				m.clast = m.last
				m.post(comp, sharingScope(op.Sharing), op.Flags&gin.OptMaySkipCreditCheck != 0, stAfterComp)
				continue
			}
			if op.Kind == gin.OpGet {
				if v := ch.ctrl.Load64(offIssuedGet); m.last+1 > v {
					ch.ctrl.Store64(offIssuedGet, m.last+1, t.Agent())
				}
			}
			if op.Flags&gin.OptAggregateRequests == 0 {
				m.ring(ch, m.last+1, stEnd)
				continue
			}
			m.PC = stEnd
		case stAfterComp:
			// m.clast holds the data's last WQE, m.last the companion's.
			m.last, m.clast = m.clast, m.last
			if m.op.Flags&gin.OptAggregateRequests == 0 {
				m.ring(m.ch, m.last+1, stRing2)
				continue
			}
			m.PC = stEnd
		case stRing2:
			m.ring(m.ch.comp, m.clast+1, stEnd)

		case stPReserve:
			m.PC = stPReserved
			t.AtomicAdd64Then(m.pch.ctrl, offRsvd, uint64(len(m.wrs)), m.scope, m, 0)
			return
		case stPReserved:
			ch := m.pch
			m.base = t.Result()
			last := m.base + uint64(len(m.wrs)) - 1
			if m.ln.events != nil {
				m.ln.emit(t, obs.Event{Kind: obs.Reserved, Op: m.opID(), Where: ch.name, Index: m.base, Value: last})
			}
			m.i = 0
			m.PC = stPWQE
			if !m.skip && last >= ch.depth {
				m.poll(ch, last-ch.depth, "gdaki credit", stPWQE)
			}
		case stPWQE:
			if int(m.i) < len(m.wrs) {
				m.PC = stPStore
				t.CyclesThen(b.cfg.WQEBuildCycles, m, 0)
				return
			}
			m.PC = stPFenced
			t.FenceThen(gpu.ScopeDevice, m, 0)
			return
		case stPStore:
			ch := m.pch
			idx := m.base + uint64(m.i)
			m.i++
			m.PC = stPWQE
			t.WriteThen(ch.sq, (idx%ch.depth)*ch.wqeBytes, nil, sim.Bytes(ch.wqeBytes), m, 0)
			return
		case stPFenced:
			// In-order publication: wait until every earlier reservation
			// has been published, then move sq_ready_index past this one
			// (atomicCAS).
			m.PC = stPReady
			if base := m.base; m.pch.ctrl.Load64(offReady) != base {
				t.WaitWordThen(m.pch.ctrl, offReady, "gdaki publish", func(v uint64) bool { return v == base }, m, 0)
				return
			}
		case stPReady:
			m.PC = stPPublish
			t.AtomicAdd64Then(m.pch.ctrl, offReady, uint64(len(m.wrs)), m.scope, m, 0)
			return
		case stPPublish:
			ch := m.pch
			for i := range m.wrs {
				m.wrs[i].ID = m.base + uint64(i)
				if _, err := ch.qp.WriteWQE(&m.wrs[i]); err != nil {
					m.fail(fmt.Errorf("gdaki: %s: t=%v: WQE %d overran the send queue (depth %d) — "+
						"OptMaySkipCreditCheck used beyond the queue depth: %w", ch.name, t.Now(), m.base+uint64(i), ch.depth, err))
					return
				}
				m.ln.st.WQEs++
				if m.ln.events != nil {
					ch.setID(m.base+uint64(i), m.wrs[i].OpID)
				}
			}
			m.last = m.base + uint64(len(m.wrs)) - 1
			m.ln.putWRs(m.wrs)
			m.wrs = nil
			if m.ln.events != nil {
				m.ln.emit(t, obs.Event{Kind: obs.Posted, Op: m.opID(), Where: ch.name, Index: m.base, Value: m.last + 1})
			}
			m.PC = m.pret

		case stRLock:
			ch := m.rch
			if ch.ctrl.Load64(offLock) != 0 {
				t.WaitWordThen(ch.ctrl, offLock, "gdaki sq_lock", func(v uint64) bool { return v == 0 }, m, 0)
				return // and test the lock again
			}
			ch.ctrl.Store64(offLock, 1, t.Agent())
			m.PC = stRLocked
			t.ComputeThen(ch.atomicGPU, m, 0) // the acquiring atomicCAS
			return
		case stRLocked:
			m.PC = stRPI
			t.AtomicAdd64Then(m.rch.ctrl, offPI, 0, gpu.ScopeDevice, m, 0)
			return
		case stRPI:
			ch := m.rch
			m.PC = stRUnlock
			m.opi = t.Result()
			if t.Result() < m.rpi {
				ch.ctrl.Store64(offPI, m.rpi, t.Agent()) // atomicMax's effect
				m.PC = stRDoorbell
				m.arrive = t.MMIOThen(ch.dev.nic.Dev(), 8, m, 0)
				return
			}
		case stRDoorbell:
			ch := m.rch
			t.GPU().Sim().Post(m.arrive, b, uint64(ch.idx)<<piBits|m.rpi&piMask)
			m.PC = stRRecord
			t.Store64Then(ch.ctrl, offDBR, m.rpi, m, 0)
			return
		case stRRecord:
			m.PC = stRDoorbell2
			m.arrive2 = t.MMIOThen(m.rch.dev.nic.Dev(), 8, m, 0)
			return
		case stRDoorbell2:
			ch := m.rch
			t.GPU().Sim().Post(m.arrive2, b, uint64(ch.idx)<<piBits|m.rpi&piMask)
			m.ln.st.Doorbells++
			if m.ln.events != nil {
				m.ln.emitDoorbell(t, ch, m.opi, m.rpi, m.arrive)
			}
			m.PC = stRUnlock
		case stRUnlock:
			m.PC = m.rret
			t.Store64Then(m.rch.ctrl, offLock, 0, m, 0)
			return

		case stQPoll:
			ch, idx := m.qch, m.qidx
			m.PC = stQParse
			if r, off := ch.cq.WordFor(idx); r.Load64(off) < idx+1 {
				if m.ln.events != nil {
					m.ln.emit(t, obs.Event{Kind: obs.Poll, Op: m.opID(), Where: ch.name, Index: idx, Note: m.qwhy})
				}
				t.WaitWordThen(r, off, m.qwhy, func(v uint64) bool { return v >= idx+1 }, m, 0)
				return
			}
		case stQParse:
			m.PC = stQCheck
			t.CyclesThen(b.cfg.CQEParseCycles, m, 0)
			return
		case stQCheck:
			ch, idx := m.qch, m.qidx
			if e, ok := ch.cq.Entry(idx); ok && e.Status != nic.StatusSuccess {
				m.fail(fmt.Errorf("gdaki: %s: t=%v: CQE %d completed with %v (NCCL traps on error CQEs)",
					ch.name, t.Now(), idx, e.Status))
				return
			}
			ch.cq.SetConsumer(idx + 1)
			m.ln.st.CQEs++
			if m.ln.events != nil {
				m.ln.emit(t, obs.Event{Kind: obs.Consumed, Op: m.opID(), Where: ch.name, Index: idx})
			}
			m.PC = m.qret

		case stFlushNop:
			m.wrs = append(m.ln.wrList(), nic.WR{Op: nic.WRNop, Signaled: true})
			m.post(m.ch, gpu.ScopeDevice, false, stFlushRing)
		case stFlushRing:
			m.ticket = m.last + 1
			m.ring(m.ch, m.last+1, stEnd)
		case stWait:
			idx := m.ticket - 1
			if b.cfg.Mutations&MutFlushEarly != 0 && idx > 0 {
				idx--
			}
			m.poll(m.ch, idx, "gdaki flush", stWaitDone)
		case stWaitDone:
			ch := m.ch
			if g := ch.ctrl.Load64(offIssuedGet); g <= m.ticket && g > ch.ctrl.Load64(offVisGet) {
				ch.ctrl.Store64(offVisGet, g, t.Agent())
			}
			m.PC = stEnd

		case stEnd:
			m.end()
			return
		default:
			panic(fmt.Sprintf("gdaki: issuer in unknown step %d", m.PC))
		}
	}
}

// opID is the id of the operation m issues (0 for a flush).
func (m *issuer) opID() obs.OpID {
	if m.op == nil {
		return 0
	}
	return m.op.ID
}

// post starts posting m.wrs (a list of the lane's, built for the op) on
// ch; the machine continues at ret with m.last set.
func (m *issuer) post(ch *channel, scope gpu.Scope, skip bool, ret uint8) {
	m.pch, m.scope, m.skip, m.pret = ch, scope, skip, ret
	m.PC = stPReserve
}

// ring starts a doorbell of ch up to pi; the machine continues at ret.
func (m *issuer) ring(ch *channel, pi uint64, ret uint8) {
	m.rch, m.rpi, m.rret = ch, pi, ret
	m.PC = stRLock
}

// poll starts polling ch's CQE idx; the machine continues at ret.
func (m *issuer) poll(ch *channel, idx uint64, why string, ret uint8) {
	m.qch, m.qidx, m.qwhy, m.qret = ch, idx, why, ret
	m.PC = stQPoll
}

// fail fails the run: NCCL traps. The group stays where it is.
func (m *issuer) fail(err error) { m.Fail(err) }

// end recycles m and hands the group back.
func (m *issuer) end() { m.ln.free.Recycle(m, &m.Run) }
