package v2

import (
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// dispWarp is a direct dispatch warp (warp wi of SM sm of rank r), which
// sends its tokens toks. Its program, with the step that runs each line:
//
//	grid sync 0                                    // kernel.launch
//	for tok in toks:                               // dToken
//	    sleep until stored                         // the TMA buffer is free
//	    loaded = TMA load of the token             // dLoad
//	    load the top-k; routing cycles             // warp.route
//	    dsts = the token's distinct ranks          // dSlots
//	    lanes: slot[d] = atomicAdd(rank d's slot counter, 1)
//	    sleep until loaded                         // dLoaded
//	    sent = TMA store into the send buffer (if any RDMA)   // dLocal
//	    lanes: TMA store into the own rank's, NVLink store into a peer's
//	        receive buffer
//	    if a destination is remote:                // dSent
//	        sleep until sent                       // tma_store_wait<1>
//	        lanes: put the record to each remote rank   // dPuts
//	sleep until stored; grid sync 1; end           // dToken
type dispWarp struct {
	warp
	w                    *Direct
	qp                   int
	sharing              gin.Sharing
	toks                 []int
	ti, tok              int
	dsts, lsa, remote    []int
	slots                []uint64
	sd                   [32]slotDone // the slot atomics' continuations, one per lane
	stored, loaded, sent sim.Time
	pc                   dispStep
}

// dispStep is where a dispWarp resumes.
type dispStep uint8

const (
	dToken  dispStep = iota // the next token, or the end
	dLoad                   // the TMA buffer is free: load the token, route it
	dSlots                  // routed: the slot atomics
	dLoaded                 // slots taken: wait for the token
	dLocal                  // the token is in: stores to the own rank and NVLink peers
	dSent                   // local stores issued: any puts?
	dPuts                   // the send buffer holds the record: puts
)

// slotDone keeps lane i's slot (the atomic's old value), then continues
// the lane.
type slotDone struct {
	m   *dispWarp
	th  *gpu.Group
	i   int
	h   sim.Handler
	arg uint64
}

// Handle implements sim.Handler.
func (sd *slotDone) Handle(s *sim.Sim, _ uint64) {
	sd.m.slots[sd.i] = sd.th.Result()
	sd.h.Handle(s, sd.arg)
}

func newDispWarp(w *Direct, r, sm, wi int, toks []int) *dispWarp {
	m := &dispWarp{warp: warp{r: r, sm: sm}, w: w, toks: toks}
	m.qp, m.sharing = qpFor(w.sms, w.qps, w.dw, sm, wi, true)
	for i := range m.sd {
		m.sd[i] = slotDone{m: m, i: i}
	}
	return m
}

// slot is lane i's slot atomic on its destination rank's counter.
func (m *dispWarp) slot(th *gpu.Group, i int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	sd := &m.sd[i]
	sd.th, sd.h, sd.arg = th, h, arg
	th.AtomicAdd64Then(w.slot[r].R, w.slot[r].Off(m.dsts[i]), 1, gpu.ScopeDevice, sd, 0)
}

// store is lane j's TMA store into the local rank or NVLink store into a
// peer's receive buffer.
func (m *dispWarp) store(th *gpu.Group, j int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	e := w.e
	i := m.lsa[j]
	d := m.dsts[i]
	off := (uint64(r)*uint64(e.Step.MaxTokens) + m.slots[i]) * uint64(w.rec)
	if d == r {
		m.stored = max(m.stored, w.write(th, r, m.sm, w.rec, th.GPU().Config().StoreLatency))
		h.Handle(e.SimOf(r), arg)
		return
	}
	at := th.NVLinkWriteThen(e.M.Ranks[d].Local, w.dWin.Region(d), off, nil, sim.Bytes(w.rec), h, arg)
	m.stored = max(m.stored, at)
}

// put is lane j's put of the record to its remote rank.
func (m *dispWarp) put(th *gpu.Group, j int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	e := w.e
	R, T, rec := e.Step.EP, e.Step.MaxTokens, w.rec
	i := m.remote[j]
	d := m.dsts[i]
	off := (uint64(r)*uint64(T) + m.slots[i]) * uint64(rec)
	e.Disp.Count(r).RDMABytes += int64(rec)
	w.dc.GinShared(th, r, m.qp, m.sharing).PutThen(h, arg, w.dc.World(r), d, w.dWin, off, w.dWin,
		(uint64(R)*uint64(T)+uint64(m.tok))*uint64(rec), uint64(rec), nil, nil)
}

// Handle implements sim.Handler.
func (m *dispWarp) Handle(*sim.Sim, uint64) {
	w, t, r := m.w, m.t, m.r
	e := w.e
	for {
		switch m.pc {
		case dToken:
			if m.ti == len(m.toks) {
				m.grid.drainEnd(m.stored, 1)
				return
			}
			m.tok = m.toks[m.ti]
			m.ti++
			// prepare_token: TMA load of the token, top-k load, dedup,
			// one slot atomic per distinct destination rank.
			m.pc = dLoad
			if sleepThen(t, m.stored, m) {
				return
			}
		case dLoad:
			m.loaded = w.read(t, r, m.sm, w.rec, t.GPU().Config().HBMLatency)
			m.pc = dSlots
			m.route(w.topk[r].R, w.vp.RouteCycles, m)
			return
		case dSlots:
			m.dsts = w.distinctRanks(r, m.tok, m.dsts)
			m.slots = m.slots[:0]
			for range m.dsts {
				m.slots = append(m.slots, 0)
			}
			m.pc = dLoaded
			t.ParallelThen(len(m.dsts), m.slot, m, 0)
			return
		case dLoaded:
			m.pc = dLocal
			if sleepThen(t, m.loaded, m) {
				return
			}
		case dLocal:
			e.Disp.Count(r).Msgs += int64(len(m.dsts))
			// TMA store into the send buffer (RDMA source).
			m.sent = 0
			if !w.nvlScale {
				m.sent = w.write(t, r, m.sm, w.rec, t.GPU().Config().StoreLatency)
				m.stored = max(m.stored, m.sent)
			}
			// TMA stores for the local rank and NVLink peers.
			m.lsa, m.remote = m.lsa[:0], m.remote[:0]
			for i, d := range m.dsts {
				if d == r || w.nvl(r, d) {
					m.lsa = append(m.lsa, i)
				} else {
					m.remote = append(m.remote, i)
				}
			}
			m.pc = dSent
			t.ParallelThen(len(m.lsa), m.store, m, 0)
			return
		case dSent:
			// tma_store_wait<1>: the send buffer copy is complete; then
			// each lane puts the record to its rank.
			m.pc = dToken
			if len(m.remote) > 0 {
				m.pc = dPuts
				if sleepThen(t, m.sent, m) {
					return
				}
			}
		case dPuts:
			m.pc = dToken
			t.ParallelThen(len(m.remote), m.put, m, 0)
			return
		}
	}
}

// combWarp is a direct combine warp (warp wi of SM sm of rank r), which
// returns the records recs to their sources. Its program, with the step
// that runs each line:
//
//	grid sync 0                                    // kernel.launch
//	for rc (token tok of rank src, c of this rank's experts) in recs:   // cRecord
//	    sleep until stored                         // the TMA buffer is free
//	    sleep until the TMA load of the c expert outputs is done   // cLoad
//	    if src is this rank: stored = TMA store into its receive buffer   // cSend
//	    elif src is an NVLink peer: stored = NVLink store into its buffer
//	    else:
//	        stored = TMA store into the send buffer
//	        sleep until stored
//	        put the record to src                  // cPut
//	sleep until stored; grid sync 1; end           // cRecord
type combWarp struct {
	warp
	w       *Direct
	qp      int
	sharing gin.Sharing
	recs    []combRecord
	i       int
	rc      combRecord // recs[i-1]
	stored  sim.Time
	pc      combStep
}

// combStep is where a combWarp resumes.
type combStep uint8

const (
	cRecord combStep = iota // the next record, or the end
	cLoad                   // the TMA buffer is free: load the expert outputs
	cSend                   // loaded: store it where its source reads it
	cPut                    // in the send buffer: put it
)

func newCombWarp(w *Direct, r, sm, wi int, recs []combRecord) *combWarp {
	m := &combWarp{warp: warp{r: r, sm: sm}, w: w, recs: recs}
	m.qp, m.sharing = qpFor(w.sms, w.qps, w.cw, sm, wi, false)
	return m
}

// Handle implements sim.Handler.
func (m *combWarp) Handle(*sim.Sim, uint64) {
	w, t, r, rc := m.w, m.t, m.r, m.rc
	e := w.e
	R, T, crec := e.Step.EP, e.Step.MaxTokens, w.crec
	// The record's slot in its source's receive buffer.
	off := (uint64(r)*uint64(T) + uint64(rc.tok)) * uint64(crec)
	for {
		switch m.pc {
		case cRecord:
			if m.i < len(m.recs) {
				m.rc = m.recs[m.i]
				m.i++
				rc = m.rc
				off = (uint64(r)*uint64(T) + uint64(rc.tok)) * uint64(crec)
				// Wait for the TMA buffer, load (or locally reduce) the
				// rank's expert outputs of the token.
				m.pc = cLoad
				if sleepThen(t, m.stored, m) {
					return
				}
				continue
			}
			m.grid.drainEnd(m.stored, 1)
			return
		case cLoad:
			m.pc = cSend
			if sleepThen(t, w.read(t, r, m.sm, rc.c*2*e.Hidden, t.GPU().Config().HBMLatency), m) {
				return
			}
		case cSend:
			e.Comb.Count(r).Msgs++
			m.pc = cRecord
			switch {
			case rc.src == r:
				m.stored = w.write(t, r, m.sm, crec, t.GPU().Config().StoreLatency)
			case w.nvl(r, rc.src):
				// A write of crec > 0 bytes takes issue time: the
				// machine continues in a later event, after stored is set.
				m.stored = t.NVLinkWriteThen(e.M.Ranks[rc.src].Local, w.cWin.Region(rc.src), off, nil, sim.Bytes(crec), m, 0)
				return
			default:
				m.stored = w.write(t, r, m.sm, crec, t.GPU().Config().StoreLatency)
				m.pc = cPut
				if sleepThen(t, m.stored, m) {
					return
				}
			}
		case cPut:
			m.pc = cRecord
			send := (uint64(R)*uint64(T) + uint64(rc.src)*uint64(T) + uint64(rc.tok)) * uint64(crec)
			e.Comb.Count(r).RDMABytes += int64(crec)
			w.dc.GinShared(t, r, m.qp, m.sharing).PutThen(m, 0, w.dc.World(r), rc.src, w.cWin, off, w.cWin, send,
				uint64(crec), nil, nil)
			return
		}
	}
}
