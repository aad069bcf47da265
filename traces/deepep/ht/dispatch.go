package ht

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// Dispatch launches the dispatch kernel on every rank.
func (w *Workload) Dispatch() {
	e, st := w.e, w.e.Step
	recv := make([]int, st.EP)
	for r := range st.EP {
		recv[r] = w.C * w.G
	}
	e.Begin(&e.Disp, "dispatch", recv)
	prec, _ := e.Hdr.DispatchPrecision()
	for r := range st.EP {
		e.Disp.BWBytes[r] = traces.HTBandwidthBytes(w.pairs[r], e.Hidden, prec)
	}
	w.fwdPath = make([]workload.Seen, st.EP*w.C*w.G)
	w.dch = make([]chanState, st.EP*w.C)
	for r := range st.EP {
		for c := range w.C {
			ch := &w.dch[r*w.C+c]
			ch.rel = make([][]bool, w.N)
			ch.relTail = make([]int, w.N)
			for d := range w.N {
				ch.rel[d] = make([]bool, len(w.seqOf(r, c, d)))
			}
			ch.head = make([]int, w.G*w.N)
			ch.retired = make([]bool, w.G)
		}
	}
	for r := range st.EP {
		for c := range w.C {
			w.launchDispatch(r, c)
		}
	}
}

// launchDispatch launches the warps of dispatch channel c on rank r: the
// RDMA senders and their coordinator on one SM; the forwarders, their
// coordinator and the NVLink receivers on the other.
func (w *Workload) launchDispatch(r, c int) {
	e := w.e
	g := e.M.GPUs[r]
	me, l := r/w.G, r%w.G
	N, G := w.N, w.G
	name := "ht/dispatch/c" + strconv.Itoa(c) + "/"
	lo, hi := tokenRange(e.Step.Tokens[r], w.C, c)
	for wi := range senderWarps {
		launch(g, name+"sender"+strconv.Itoa(wi), 32, newDispSender(w, r, c, wi, lo, hi))
	}
	launch(g, name+"coordinator", 32, newDispCoord(w, r, c))
	for p := range G {
		launch(g, name+"forwarder"+strconv.Itoa(p), 32, newDispForwarder(w, r, c, p))
	}
	w.launchCredits(g, name+"forward-coordinator", "ht forward coordinator", r, c, me, &w.dch[r*w.C+c], G, w.dc.RDMASend,
		w.ctl[r][c], ctlFwdProg*8, &e.Disp, &w.rst[r].DispCredits)
	for f := range G {
		n := 0 // the records forwarder f sends us
		for s := range N {
			src := w.rank(s, f)
			for _, tok := range w.seqOf(src, c, me) {
				if w.gpus[src][int(tok)*N+me]&(1<<uint(l)) != 0 {
					n++
				}
			}
		}
		launch(g, name+"receiver"+strconv.Itoa(f), 32, newDispReceiver(w, r, c, f, n))
	}
}

// dispSender is RDMA sender warp wi of dispatch channel c on rank r. It
// takes every senderWarps-th token of the channel that has a destination
// node, and writes one record per destination node into that node's send
// ring (the local node's straight into the local receive ring):
//
//	for tok in the channel's tokens:
//		if tok is not the warp's: cnt[d]++ for each destination d; continue
//	credit:	for each destination d with cnt[d] ≥ RDMARecv:
//			wait until credit signal d ≥ cnt[d] − RDMARecv + 1
//		load tok once, store one record per destination (SM bandwidth)
//	release: mark the records released; relTail[d] passes every released
//		record; cnt[d]++; bump the sender progress word (ctlSendProg)
type dispSender struct {
	w          *Workload
	t          *gpu.Group
	ch         *chanState
	ctl        *mem.Region
	sm         *gpu.SMPorts
	r, c, wi   int
	lo, tok    int
	hi         int
	cnt        []int  // per destination node: ring slots taken so far
	dst, check uint64 // the token's destinations; of which credits are left to check
	need, o    uint64 // the credit wait: the count and the signal's offset
	credited   func(v uint64) bool
	pc         uint8
}

const (
	sendToken   = iota // find the warp's next token
	sendCredit         // wait for the head credits of its destinations
	sendRelease        // its records are stored: release them
	sendNext
)

func newDispSender(w *Workload, r, c, wi, lo, hi int) *dispSender {
	m := &dispSender{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], sm: &w.sms[r][2*c+1], r: r, c: c, wi: wi,
		lo: lo, tok: lo, hi: hi, cnt: make([]int, w.N)}
	m.credited = func(v uint64) bool { return v-m.o >= m.need }
	return m
}

func (m *dispSender) bind(t *gpu.Group) { m.t = t }

// Handle implements sim.Handler.
func (m *dispSender) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	W := w.dc.RDMARecv
	for {
		switch m.pc {
		case sendToken:
			for ; m.tok < m.hi; m.tok++ {
				dst := w.nodes[m.r][m.tok]
				if (m.tok-m.lo)%senderWarps == m.wi && dst != 0 {
					break
				}
				for b := dst; b != 0; b &= b - 1 {
					m.cnt[bits.TrailingZeros64(b)]++
				}
			}
			if m.tok >= m.hi {
				t.End()
				return
			}
			m.dst = w.nodes[m.r][m.tok]
			m.check = m.dst
			m.pc = sendCredit
		case sendCredit:
			for m.check != 0 {
				d := bits.TrailingZeros64(m.check)
				m.check &= m.check - 1
				if m.cnt[d] < W {
					continue
				}
				m.need = uint64(m.cnt[d] - W + 1)
				reg, off, o := w.sigWord(m.r, m.c, d, true)
				if reg.Load64(off)-o < m.need {
					w.rst[m.r].CreditWaits++
					m.o = o
					t.WaitWordThen(reg, off, "ht dispatch credit", m.credited, m, 0)
					return
				}
			}
			m.pc = sendRelease
			if t.ComputeUntilThen(w.copyLocalEnd(t, m.sm, w.loadD, sim.Bytes(w.recD)*sim.Bytes(bits.OnesCount64(m.dst))), m, 0) {
				return
			}
		case sendRelease:
			ch := m.ch
			for b := m.dst; b != 0; b &= b - 1 {
				d := bits.TrailingZeros64(b)
				ch.rel[d][m.cnt[d]] = true
				for ch.relTail[d] < len(ch.rel[d]) && ch.rel[d][ch.relTail[d]] {
					ch.relTail[d]++
				}
				m.cnt[d]++
			}
			m.pc = sendNext
			w.bumpThen(t, m.ctl, ctlSendProg*8, m)
			return
		case sendNext:
			m.tok++
			m.pc = sendToken
		}
	}
}

// dispCoord is the sender coordinator of dispatch channel c on rank r: it
// puts chunks of released records to the rail peers, starting each round
// at a node rotated by channel and node:
//
//	while records are left:
//		seen = sender progress word (ctlSendProg)
//	scan:	for each destination node d from (c + me) % N on:
//			done = records of d released and not yet put
//			if done is all that is left of d, or at least RDMASend:
//				chunkPut of min(done, RDMASend, up to the ring's wrap) records
//		if nothing was put: wait until the progress word moves from seen
type dispCoord struct {
	w               *Workload
	t               *gpu.Group
	ch              *chanState
	ctl             *mem.Region
	r, c, me        int
	remaining, last []int // per node: records not yet put; put
	total           int
	seen            uint64
	issued          bool
	i, d, k         int // scan position; the chunk's node and records
	put             chunkPut
	changed         func(v uint64) bool
	pc              uint8
}

const (
	coLoop = iota // read the progress word
	coScan        // put a chunk to every node that has one
	coPut         // the chunk is put
)

func newDispCoord(w *Workload, r, c int) *dispCoord {
	N := w.N
	m := &dispCoord{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], r: r, c: c, me: r / w.G,
		remaining: make([]int, N), last: make([]int, N)}
	for d := range N {
		m.remaining[d] = len(w.seqOf(r, c, d))
		m.total += m.remaining[d]
	}
	m.changed = func(v uint64) bool { return v != m.seen }
	m.put = chunkPut{w: w, dc: w.dataComms[c/workload.CtxsPerComm], r: r, c: c, me: m.me, id: m.me, slots: w.dc.RDMARecv,
		send: w.dSend[c/workload.CtxsPerComm], recv: w.dRecv[c/workload.CtxsPerComm], rec: w.recD, ph: &w.e.Disp,
		firstPut: w.st.FirstPut[0], chunks: &w.rst[r].DispChunks, tails: &w.rst[r].DispTails}
	return m
}

func (m *dispCoord) bind(t *gpu.Group) { m.t = t; m.put.bind(t) }

// Handle implements sim.Handler.
func (m *dispCoord) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, W := w.N, w.dc.RDMARecv
	for {
		switch m.pc {
		case coLoop:
			if m.total == 0 {
				t.End()
				return
			}
			m.seen = m.ctl.Load64(ctlSendProg * 8)
			m.issued = false
			m.i = 0
			m.pc = coScan
		case coScan:
			for m.i < N {
				d := (m.i + m.c + m.me) % N
				m.i++
				if m.remaining[d] == 0 {
					continue
				}
				done := m.ch.relTail[d] - m.last[d]
				if done != m.remaining[d] && done < w.dc.RDMASend {
					continue
				}
				slot := m.last[d] % W
				m.d, m.k = d, min(done, w.dc.RDMASend, W-slot)
				m.put.dst, m.put.slot, m.put.k = d, slot, m.k
				m.pc = coPut
				m.put.run(m)
				return
			}
			m.pc = coLoop
			if !m.issued {
				t.WaitWordThen(m.ctl, ctlSendProg*8, "ht dispatch coordinator", m.changed, m, 0)
				return
			}
		case coPut:
			m.last[m.d] += m.k
			m.remaining[m.d] -= m.k
			m.total -= m.k
			m.issued = true
			m.pc = coScan
		}
	}
}

// dispForwarder is the forwarder warp of dispatch channel c on rank r for
// NVLink peer p: it reads every record of every source node's receive
// ring and copies those p needs into p's NVLink ring:
//
//	while records are left:
//	space:	while p's ring has no room for a chunk of NVLSend:
//			wait until p's head word (ctlDHead(p)) ≥ nvlTail + NVLSend − NVLRecv
//	find:	src = the next source node, round robin, with records left and
//			tail > head, reading the tail signal of a node whose known
//			records are all consumed;
//		if none: wait for any of those tail signals to change; find again
//	chunk:	for the records of src from head to tail, until NVLSend are sent:
//			SourceMeta loads (one L2 latency per record scanned)
//			if p needs the record: nvlCopy it into p's ring; nvlTail++
//	head:	head[src] = the next record; bump the progress word (ctlFwdProg)
//		if any was sent: store nvlTail into p's tail word (ctlDTail(l))
//	retire: mark the warp retired; bump the progress word
type dispForwarder struct {
	w     *Workload
	t     *gpu.Group
	ch    *chanState
	ctl   *mem.Region
	r, c  int
	p     int
	me, l int

	seqs             [][]int32 // per source node: its ring's tokens
	left, head, tail []int     // per source node: records left, consumed, known
	total            int
	base             uint64 // our part of p's ring
	peerCtl          *mem.Region
	tails            anyWord // the tail signals of the nodes with records left
	nvlTail, nvlHead int
	src              int
	path             workload.Seen
	need             int // the NVLink space wait's head
	k                int // sources tried in this round
	s, srcRank       int // the chunk's source node and rank
	i, sent, scanned int
	o                uint64 // the tail signal's offset
	copy             nvlCopy
	spaceOK          func(v uint64) bool
	pc               uint8
}

const (
	fwdLoop     = iota // records left?
	fwdSpace           // room for a chunk in the NVLink ring?
	fwdSpaceGot        // the head word moved
	fwdFind            // start a round over the source nodes
	fwdPick            // try the next source node
	fwdTailRead        // its tail signal is read
	fwdCheck           // records to forward?
	fwdChunk           // forward a chunk of the source node
	fwdScan            // the next record of the chunk
	fwdCopy            // copy it
	fwdCopied          // it is in the ring
	fwdChunkEnd        // the SourceMeta loads after the last copy
	fwdHead            // publish the head
	fwdBumped          // publish the NVLink tail
	fwdTailDone        // the NVLink tail is stored
	fwdRetired         // end
)

func newDispForwarder(w *Workload, r, c, p int) *dispForwarder {
	N, G := w.N, w.G
	me, l := r/G, r%G
	peer := w.rank(me, p)
	m := &dispForwarder{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], r: r, c: c, p: p, me: me, l: l,
		seqs: make([][]int32, N), left: make([]int, N), head: make([]int, N), tail: make([]int, N),
		base: uint64((c*G+l)*w.dc.NVLRecv) * w.recD, peerCtl: w.ctl[peer][c], tails: newAnyWord(N, w.poll, w.l2Lat),
		src: (2 * c) % N}
	for s := range N {
		m.seqs[s] = w.seqOf(w.rank(s, l), c, me)
		m.left[s] = len(m.seqs[s])
		m.total += m.left[s]
	}
	m.copy = nvlCopy{sm: &w.sms[r][2*c], lat: w.hbmLat, rd: w.loadD, wr: sim.Bytes(w.recD), peer: p, reg: w.nvlD[peer]}
	m.spaceOK = func(v uint64) bool { return int(v) >= m.need }
	return m
}

func (m *dispForwarder) bind(t *gpu.Group) {
	m.t, m.copy.t = t, t
	m.tails.bind(t)
}

// Handle implements sim.Handler.
func (m *dispForwarder) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, ctl := w.N, m.ctl
	for {
		switch m.pc {
		case fwdLoop:
			if m.total == 0 {
				m.ch.retired[m.p] = true
				m.pc = fwdRetired
				w.bumpThen(t, ctl, ctlFwdProg*8, m)
				return
			}
			m.pc = fwdSpace
		case fwdSpace:
			if w.dc.NVLRecv-(m.nvlTail-m.nvlHead) >= w.dc.NVLSend {
				m.pc = fwdFind
				continue
			}
			m.need = m.nvlTail + w.dc.NVLSend - w.dc.NVLRecv
			m.pc = fwdSpaceGot
			t.WaitWordThen(ctl, w.ctlDHead(m.p), "ht forwarder NVLink space", m.spaceOK, m, 0)
			return
		case fwdSpaceGot:
			m.nvlHead = int(t.Result())
			m.pc = fwdSpace
		case fwdFind:
			m.k = 0
			m.pc = fwdPick
		case fwdPick:
			if m.k == N {
				m.tails.reset()
				for s := range N {
					if m.left[s] > 0 {
						reg, off, _ := w.sigWord(m.r, m.c, s, false)
						m.tails.add(reg, off)
					}
				}
				m.pc = fwdFind
				m.tails.wait(m)
				return
			}
			m.k++
			m.src = (m.src + 1) % N
			if m.left[m.src] == 0 {
				continue
			}
			m.pc = fwdCheck
			if m.head[m.src] == m.tail[m.src] {
				reg, off, o := w.sigWord(m.r, m.c, m.src, false)
				m.o = o
				m.pc = fwdTailRead
				t.Load64Then(reg, off, m, 0)
				return
			}
		case fwdTailRead:
			src := m.src
			m.tail[src] = int(t.Result() - m.o)
			if m.tail[src] > len(m.seqs[src]) {
				panic(fmt.Sprintf("ht: t=%v rank %d channel %d: tail signal of node %d says %d records, %d were sent",
					t.Now(), m.r, m.c, src, m.tail[src], len(m.seqs[src])))
			}
			m.pc = fwdCheck
		case fwdCheck:
			m.pc = fwdPick
			if m.tail[m.src] > m.head[m.src] {
				m.pc = fwdChunk
			}
		case fwdChunk:
			m.s = m.src
			m.srcRank = w.rank(m.s, m.l)
			m.path = w.pathOf(m.r, m.srcRank, m.c, m.s)
			m.i, m.sent, m.scanned = m.head[m.s], 0, 0
			m.pc = fwdScan
		case fwdScan:
			s := m.s
			if m.i >= m.tail[s] {
				m.pc = fwdChunkEnd
				continue
			}
			tok := m.seqs[s][m.i]
			m.left[s]--
			m.total--
			m.scanned++
			if w.gpus[m.srcRank][int(tok)*N+m.me]&(1<<uint(m.p)) == 0 {
				m.i++
				continue
			}
			d := sim.Duration(m.scanned) * w.l2Lat // SourceMeta loads
			m.scanned = 0
			m.pc = fwdCopy
			if t.ComputeUntilThen(t.Now().Add(d), m, 0) {
				return
			}
		case fwdCopy:
			m.pc = fwdCopied
			m.copy.run(m.base+uint64(m.nvlTail%w.dc.NVLRecv)*w.recD, m)
			return
		case fwdCopied:
			m.nvlTail++
			m.i++
			m.sent++
			m.pc = fwdScan
			if m.sent == w.dc.NVLSend {
				m.pc = fwdChunkEnd
			}
		case fwdChunkEnd:
			m.pc = fwdHead
			if t.ComputeUntilThen(t.Now().Add(sim.Duration(m.scanned)*w.l2Lat), m, 0) {
				return
			}
		case fwdHead:
			m.head[m.s] = m.i
			m.ch.head[m.p*N+m.s] = m.i
			m.pc = fwdBumped
			w.bumpThen(t, ctl, ctlFwdProg*8, m)
			return
		case fwdBumped:
			m.pc = fwdLoop
			if m.sent > 0 {
				m.pc = fwdTailDone
				t.Store64Then(m.peerCtl, w.ctlDTail(m.l), uint64(m.nvlTail), m, 0)
				return
			}
		case fwdTailDone:
			w.fwdPath[(m.r*w.C+m.c)*w.G+m.p] = m.path
			m.pc = fwdLoop
		case fwdRetired:
			t.End()
			return
		}
	}
}

// dispReceiver is the NVLink receiver warp of dispatch channel c on rank r
// for forwarder f of its node: it drains f's ring, n records, into the
// output:
//
//	while head < n:
//		if head == tail: wait until f's tail word (ctlDTail(f)) > head
//	copy:	while head < tail: copy the record to the output; head++
//		store head into f's head word (ctlDHead(l))
//	receiver done, behind f's last RDMA tail
type dispReceiver struct {
	w          *Workload
	t          *gpu.Group
	ctl, fctl  *mem.Region
	sm         *gpu.SMPorts
	r, c, f, l int
	fr, n      int
	head, tail int
	more       func(v uint64) bool
	pc         uint8
}

const (
	drLoop   = iota // records left?
	drGot           // the tail word moved
	drCopy          // copy the next record
	drCopied        // it is copied
)

func newDispReceiver(w *Workload, r, c, f, n int) *dispReceiver {
	me, l := r/w.G, r%w.G
	fr := w.rank(me, f)
	m := &dispReceiver{w: w, ctl: w.ctl[r][c], fctl: w.ctl[fr][c], sm: &w.sms[r][2*c+1], r: r, c: c, f: f, l: l, fr: fr, n: n}
	m.more = func(v uint64) bool { return int(v) > m.head }
	return m
}

func (m *dispReceiver) bind(t *gpu.Group) { m.t = t }

// Handle implements sim.Handler.
func (m *dispReceiver) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	for {
		switch m.pc {
		case drLoop:
			if m.head >= m.n {
				w.e.ReceiverDone(m.r, w.fwdPath[(m.fr*w.C+m.c)*w.G+m.l])
				t.End()
				return
			}
			m.pc = drCopy
			if m.head == m.tail {
				m.pc = drGot
				t.WaitWordThen(m.ctl, w.ctlDTail(m.f), "ht NVLink receiver", m.more, m, 0)
				return
			}
		case drGot:
			m.tail = int(t.Result())
			m.pc = drCopy
		case drCopy:
			if m.head == m.tail {
				m.pc = drLoop
				t.Store64Then(m.fctl, w.ctlDHead(m.l), uint64(m.head), m, 0)
				return
			}
			m.pc = drCopied
			if t.ComputeUntilThen(w.copyLocalEnd(t, m.sm, w.loadD, w.loadD), m, 0) {
				return
			}
		case drCopied:
			m.head++
			m.pc = drCopy
		}
	}
}
