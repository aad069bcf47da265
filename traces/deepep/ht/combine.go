package ht

import (
	"math/bits"
	"strconv"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// recvWarps is the combine kernel's RDMA receiver warps per channel:
// kNumForwarders − NVLink peers, with kNumForwarders = nodes × max(24 /
// nodes, 1).
func (w *Workload) recvWarps() int {
	return max(w.N*w.fwdWarps()-w.G, 1)
}

// fwdWarps is the combine forwarder warps per destination node.
func (w *Workload) fwdWarps() int { return max(combineForwarderWarps/w.N, 1) }

// Combine launches the combine kernel on every rank.
func (w *Workload) Combine() {
	e, st := w.e, w.e.Step
	recv := make([]int, st.EP)
	for r := range st.EP {
		recv[r] = w.C * w.recvWarps()
	}
	e.Begin(&e.Comb, "combine", recv)
	for r := range st.EP {
		e.Comb.BWBytes[r] = traces.HTBandwidthBytes(w.pairs[r], e.Hidden, traces.BF16)
	}
	nr := w.recvWarps()
	w.cch = make([]chanState, 2*st.EP*w.C)
	for r := range st.EP {
		for c := range w.C {
			fw := &w.cch[2*(r*w.C+c)] // forwarder groups: head[s*G+p], position in peer p's sub-ring s
			fw.head = make([]int, w.N*w.G)
			fw.retired = make([]bool, w.N)
			rv := &w.cch[2*(r*w.C+c)+1] // receiver warps: head[wi*N+s]
			rv.head = make([]int, nr*w.N)
			rv.retired = make([]bool, nr)
		}
	}
	for r := range st.EP {
		for c := range w.C {
			w.launchCombine(r, c)
		}
	}
}

// nvlCount returns how many records of channel c from source rank (s, l)
// local GPU p of node n contributes to in combine: the records p moves
// through its sub-ring s of forwarder l.
func (w *Workload) nvlCount(l, c, n, p, s int) int {
	k := 0
	src := w.rank(s, l)
	for _, tok := range w.seqOf(src, c, n) {
		if w.gpus[src][int(tok)*w.N+n]&(1<<uint(p)) != 0 {
			k++
		}
	}
	return k
}

// launchCombine launches the warps of combine channel c on rank r: the
// NVLink senders and the RDMA receivers with their coordinator on one
// SM; the forwarders and their coordinator on the other.
func (w *Workload) launchCombine(r, c int) {
	e := w.e
	g := e.M.GPUs[r]
	me := r / w.G
	N, G := w.N, w.G
	name := "ht/combine/c" + strconv.Itoa(c) + "/"
	for f := range G {
		launch(g, name+"nvl-sender"+strconv.Itoa(f), 32, newCombSender(w, r, c, f))
	}
	kw := w.fwdWarps()
	for s := range N {
		launch(g, name+"forwarder"+strconv.Itoa(s), 32*kw, newCombForwarder(w, r, c, s, kw))
	}
	heads := &subHeads{w: w, fw: &w.cch[2*(r*w.C+c)], c: c, me: me, l: r % G}
	launch(g, name+"forward-coordinator", 32,
		newLazyCoord(w, w.ctl[r][c], ctlCFwdProg*8, "ht combine forward coordinator", N*G, heads))
	nr := w.recvWarps()
	lo, hi := tokenRange(e.Step.Tokens[r], w.C, c)
	for wi := range nr {
		launch(g, name+"receiver"+strconv.Itoa(wi), 32, newCombReceiver(w, r, c, wi, nr, lo, hi))
	}
	w.launchCredits(g, name+"recv-coordinator", "ht combine receiver coordinator", r, c, N+me, &w.cch[2*(r*w.C+c)+1], nr,
		w.cc.RDMASend, w.ctl[r][c], ctlCRecvProg*8, &e.Comb, &w.rst[r].CombCredits)
}

// combSender is the NVLink sender warp of combine channel c on rank r to
// forwarder f of its node: it pushes our expert outputs for the tokens f
// gave us, one lane per source node s, each lane in token order through
// its own sub-ring s of f's buffer (subC slots):
//
//	while records are left:
//	ready:	until a lane has records and room for a chunk of NVLSend (by
//			the heads last read):
//			reload the heads of the lanes with records (our ctlCHead(f, s)):
//			if one moved, one L2 latency; else wait for one to change
//	chunk:	for each ready lane s, round robin from the last one:
//			nvlCopy min(NVLSend, left[s]) records into sub-ring s
//	tails:	store the tail of each ready lane into f's ctlCTail(l, s)
type combSender struct {
	w     *Workload
	t     *gpu.Group
	ctl   *mem.Region
	c     int
	f, l  int
	left  []int // per source node: records left
	total int

	base       uint64 // our part of f's buffer, in records
	fctl       *mem.Region
	tail, head []int
	ready      []bool
	heads      anyWord // the head words of the lanes with records left
	cur        int
	k, n, j    int // lanes visited this round; the chunk's records, sent
	copy       nvlCopy
	pc         uint8
}

const (
	csLoop   = iota // records left?
	csReady         // a lane with records and room?
	csHeads         // reload the heads
	csChunk         // a chunk into the next ready lane
	csRec           // the next record of the chunk
	csCopied        // it is in the sub-ring
	csTails         // publish the tails of the ready lanes
)

func newCombSender(w *Workload, r, c, f int) *combSender {
	N, G := w.N, w.G
	me, l := r/G, r%G
	fr := w.rank(me, f)
	m := &combSender{w: w, ctl: w.ctl[r][c], c: c, f: f, l: l, left: make([]int, N),
		base: uint64((c*G + l) * w.cc.NVLRecv), fctl: w.ctl[fr][c],
		tail: make([]int, N), head: make([]int, N), ready: make([]bool, N),
		heads: newAnyWord(N, w.poll, w.l2Lat), cur: c % N}
	for s := range N {
		m.left[s] = w.nvlCount(f, c, me, l, s)
		m.total += m.left[s]
	}
	m.copy = nvlCopy{sm: &w.sms[r][2*c], lat: w.hbmLat, rd: w.out2H, wr: sim.Bytes(w.recC), peer: f, reg: w.nvlC[fr]}
	return m
}

func (m *combSender) bind(t *gpu.Group) {
	m.t, m.copy.t = t, t
	m.heads.bind(t)
}

// Handle implements sim.Handler.
func (m *combSender) Handle(*sim.Sim, uint64) {
	w, t, ctl := m.w, m.t, m.ctl
	N, f := w.N, m.f
	sub, chunk := w.subC, w.cc.NVLSend
	for {
		switch m.pc {
		case csLoop:
			if m.total == 0 {
				t.End()
				return
			}
			m.pc = csReady
		case csReady:
			any := false
			for s := range N {
				m.ready[s] = m.left[s] > 0 && sub-(m.tail[s]-m.head[s]) >= chunk
				any = any || m.ready[s]
			}
			if any {
				m.k = 0
				m.pc = csChunk
				continue
			}
			m.heads.reset()
			moved := false
			for s := range N {
				if m.left[s] > 0 {
					m.heads.add(ctl, w.ctlCHead(f, s))
					moved = moved || int(ctl.Load64(w.ctlCHead(f, s))) != m.head[s]
				}
			}
			m.pc = csHeads
			if moved {
				t.ComputeThen(w.l2Lat, m, 0)
				return
			}
			m.heads.wait(m)
			return
		case csHeads:
			for s := range N {
				if m.left[s] > 0 {
					m.head[s] = int(ctl.Load64(w.ctlCHead(f, s)))
				}
			}
			m.pc = csReady
		case csChunk:
			if m.k == N {
				m.k = 0
				m.pc = csTails
				continue
			}
			m.k++
			m.cur = (m.cur + 1) % N
			if !m.ready[m.cur] {
				continue
			}
			m.n, m.j = min(chunk, m.left[m.cur]), 0
			m.pc = csRec
		case csRec:
			if m.j == m.n {
				m.left[m.cur] -= m.n
				m.total -= m.n
				m.pc = csChunk
				continue
			}
			m.pc = csCopied
			m.copy.run((m.base+uint64(m.cur*sub+m.tail[m.cur]%sub))*w.recC, m)
			return
		case csCopied:
			m.tail[m.cur]++
			m.j++
			m.pc = csRec
		case csTails:
			if m.k == N {
				m.pc = csLoop
				continue
			}
			s := m.k
			m.k++
			if m.ready[s] {
				t.Store64Then(m.fctl, w.ctlCTail(m.l, s), uint64(m.tail[s]), m, 0)
				return
			}
		}
	}
}

// combForwarder is the forwarder of combine channel c on rank r for
// destination node s: kw sub-warps sum the local contributions to each
// token of source rank (s, l), read from every peer's sub-ring s, and put
// the sums back to it in chunks:
//
//	for each chunk of the source rank's tokens (at most RDMASend, not
//			across the ring's wrap):
//		if it passes the receive window: wait until credit signal N+s
//			≥ sent + k − RDMARecv
//	chunk:	for each token j of the chunk, on sub-warp j % kw:
//			for each peer p that contributes: next[p]++;
//				until p's tail word (ctlCTail(p, s)) reaches next[p]:
//					release the heads of the tokens written by now;
//					if the tail is there or no token is pending:
//						wait for it; else sleep until the next token
//						is written
//			reduce: read the contributions, write one record (SM
//				bandwidth, from when the sub-warp is free)
//		when the chunk's last record is written: release the heads,
//			bump the progress word (ctlCFwdProg)
//		chunkPut the chunk to the source rank (tail signal N + me)
//	retire: mark the forwarder retired; bump the progress word
//
// Releasing hands the sub-ring positions after the tokens written by now
// to the coordinator (subHeads) in token order: the sub-warps' shared
// memory head stores overlap their reduce.
type combForwarder struct {
	w                *Workload
	t                *gpu.Group
	fw               *chanState
	ctl              *mem.Region
	sm               *gpu.SMPorts
	r, c, s, src, kw int
	seq              []int32 // the source rank's tokens for our node
	next, seenTail   []int   // per peer: records read of its sub-ring; its tail seen
	at               []sim.Time
	doneAt           []sim.Time // per token of the chunk: when its record is written
	doneHead         []int      // per token of the chunk: next after it
	rel, j           int        // tokens of the chunk released; reduced or reducing
	creg             *mem.Region
	coff, co         uint64
	sent, k          int
	need             uint64
	end              sim.Time
	bits             uint64 // peers of the token left to check
	p                int
	reads            sim.Bytes
	put              chunkPut
	credited, tailOK func(v uint64) bool
	pc               uint8
}

const (
	cfLoop     = iota // the next chunk, once it has credits
	cfChunk           // reduce its tokens
	cfTok             // the next token
	cfPeer            // its next peer
	cfTail            // wait for the peer's tail
	cfTailGot         // the tail word moved
	cfReduce          // reduce the token
	cfChunkEnd        // wait for the chunk's last record
	cfReleased        // release, bump
	cfPut             // put the chunk
	cfSent            // it is put
	cfEnd
)

func newCombForwarder(w *Workload, r, c, s, kw int) *combForwarder {
	G := w.G
	me, l := r/G, r%G
	src := w.rank(s, l)
	m := &combForwarder{w: w, fw: &w.cch[2*(r*w.C+c)], ctl: w.ctl[r][c], sm: &w.sms[r][2*c+1], r: r, c: c, s: s, src: src,
		kw: kw, seq: w.seqOf(src, c, me), next: make([]int, G), seenTail: make([]int, G), at: make([]sim.Time, kw),
		doneAt: make([]sim.Time, w.cc.RDMASend), doneHead: make([]int, w.cc.RDMASend*G)}
	m.creg, m.coff, m.co = w.sigWord(r, c, w.N+s, true)
	m.credited = func(v uint64) bool { return v-m.co >= m.need }
	m.tailOK = func(v uint64) bool { return int(v) >= int(m.need) }
	m.put = chunkPut{w: w, dc: w.dataComms[c/workload.CtxsPerComm], r: r, c: c, me: me, dst: s, id: w.N + me,
		slots: w.cc.RDMARecv, send: w.cSend[c/workload.CtxsPerComm], recv: w.cRecv[c/workload.CtxsPerComm], rec: w.recC,
		ph: &w.e.Comb, firstPut: w.st.FirstPut[1], chunks: &w.rst[r].CombChunks, tails: &w.rst[r].CombTails}
	return m
}

func (m *combForwarder) bind(t *gpu.Group) { m.t = t; m.put.bind(t) }

// release hands the heads of the tokens written by now to the
// coordinator, in token order (its min over sub-warps).
func (m *combForwarder) release(now sim.Time) {
	if m.rel == m.j || m.doneAt[m.rel] > now {
		return
	}
	for m.rel < m.j && m.doneAt[m.rel] <= now {
		m.rel++
	}
	G := m.w.G
	copy(m.fw.head[m.s*G:(m.s+1)*G], m.doneHead[(m.rel-1)*G:m.rel*G])
	m.ctl.Store64(ctlCFwdProg*8, m.ctl.Load64(ctlCFwdProg*8)+1, m.t.Agent())
}

// Handle implements sim.Handler.
func (m *combForwarder) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, G, W := w.N, w.G, w.cc.RDMARecv
	rec := sim.Bytes(w.recC)
	for {
		switch m.pc {
		case cfLoop:
			if m.sent >= len(m.seq) {
				m.fw.retired[m.s] = true
				m.pc = cfEnd
				w.bumpThen(t, m.ctl, ctlCFwdProg*8, m)
				return
			}
			slot := m.sent % W
			m.k = min(w.cc.RDMASend, len(m.seq)-m.sent, W-slot)
			m.put.slot, m.put.k = slot, m.k
			m.pc = cfChunk
			if need := uint64(m.sent + m.k - W); m.sent+m.k > W && m.creg.Load64(m.coff)-m.co < need {
				w.rst[m.r].CreditWaits++
				m.need = need
				t.WaitWordThen(m.creg, m.coff, "ht combine credit", m.credited, m, 0)
				return
			}
		case cfChunk:
			m.end = t.Now()
			for i := range m.at {
				m.at[i] = m.end
			}
			m.rel, m.j = 0, 0
			m.pc = cfTok
		case cfTok:
			if m.j == m.k {
				m.pc = cfChunkEnd
				continue
			}
			m.bits, m.reads = w.gpus[m.src][int(m.seq[m.sent+m.j])*N+m.r/G], 0
			m.pc = cfPeer
		case cfPeer:
			if m.bits == 0 {
				m.pc = cfReduce
				continue
			}
			m.p = bits.TrailingZeros64(m.bits)
			m.bits &= m.bits - 1
			m.next[m.p]++
			m.reads += rec
			m.pc = cfTail
		case cfTail:
			p := m.p
			if m.seenTail[p] >= m.next[p] {
				m.pc = cfPeer
				continue
			}
			m.release(t.Now())
			if v := int(m.ctl.Load64(w.ctlCTail(p, m.s))); v >= m.next[p] || m.rel == m.j {
				m.need = uint64(m.next[p])
				m.pc = cfTailGot
				t.WaitWordThen(m.ctl, w.ctlCTail(p, m.s), "ht combine NVLink tail", m.tailOK, m, 0)
				return
			}
			t.SleepThen(m.doneAt[m.rel].Sub(t.Now()), m, 0)
			return
		case cfTailGot:
			m.seenTail[m.p] = int(t.Result())
			m.pc = cfPeer
		case cfReduce:
			j := m.j
			re := m.sm.Read(max(m.at[j%m.kw], t.Now()).Add(w.hbmLat), m.reads)
			we := m.sm.Write(re, rec)
			m.at[j%m.kw] = we
			m.end = max(m.end, we)
			m.doneAt[j] = we
			copy(m.doneHead[j*G:(j+1)*G], m.next)
			m.j++
			m.pc = cfTok
		case cfChunkEnd:
			m.pc = cfReleased
			if t.ComputeUntilThen(m.end, m, 0) {
				return
			}
		case cfReleased:
			m.release(t.Now())
			m.pc = cfPut
			w.bumpThen(t, m.ctl, ctlCFwdProg*8, m)
			return
		case cfPut:
			m.pc = cfSent
			m.put.run(m)
			return
		case cfSent:
			m.sent += m.k
			m.pc = cfLoop
		case cfEnd:
			t.End()
			return
		}
	}
}

// subHeads is what the combine forwarder coordinator of channel c on rank
// r returns, per (source node s, peer p) sub-ring (item s*G + p): the
// forwarders' head in peer p's sub-ring s, stored into p's head word
// ctlCHead(l, s) whenever it moved. The forwarder for s counts as running
// (at its first peer) until it retires.
type subHeads struct {
	w        *Workload
	fw       *chanState
	c, me, l int
}

func (h *subHeads) bind(*gpu.Group) {}

func (h *subHeads) due(i, last int) (v int, due, live bool) {
	G := h.w.G
	v = h.fw.head[i]
	return v, v > last, i%G == 0 && !h.fw.retired[i/G]
}

func (h *subHeads) give(t *gpu.Group, i, _, v int, next sim.Handler) {
	w := h.w
	s, p := i/w.G, i%w.G
	t.Store64Then(w.ctl[w.rank(h.me, p)][h.c], w.ctlCHead(h.l, s), uint64(v), next, 0)
}

// combReceiver is RDMA receiver warp wi of nr of combine channel c on
// rank r: it sums each of its tokens' records across the source nodes:
//
//	for tok in the channel's tokens, every nr-th from wi:
//		(the others: pos[s]++ for each of their source nodes s)
//		head[wi][s] = pos[s] for every node; bump the progress word
//			(ctlCRecvProg)
//	tails:	for each source node s of tok whose tail seen is ≤ pos[s]:
//			if tail signal N+s ≤ pos[s]: wait until it passes pos[s];
//				keep the latest such signal's path
//		reduce the records into the output (SM bandwidth); pos[s]++
//	retire: head[wi][s] = inf; bump; receiver done behind the kept path
type combReceiver struct {
	w             *Workload
	t             *gpu.Group
	rv            *chanState
	ctl           *mem.Region
	sm            *gpu.SMPorts
	r, c, l       int
	wi, nr        int
	lo, tok, hi   int
	pos, seenTail []int // per source node: the token's ring position; its tail seen
	path          workload.Seen
	src, check    uint64 // the token's source nodes; of which tails are left to check
	s             int
	need, o       uint64
	tailOK        func(v uint64) bool
	pc            uint8
}

const (
	crTok     = iota // the warp's next token
	crBumped         // its heads are published
	crTails          // wait for its records
	crGot            // a tail signal passed
	crReduced        // the token is summed
	crDone
)

func newCombReceiver(w *Workload, r, c, wi, nr, lo, hi int) *combReceiver {
	m := &combReceiver{w: w, rv: &w.cch[2*(r*w.C+c)+1], ctl: w.ctl[r][c], sm: &w.sms[r][2*c], r: r, c: c, l: r % w.G,
		wi: wi, nr: nr, lo: lo, tok: lo, hi: hi, pos: make([]int, w.N), seenTail: make([]int, w.N)}
	m.tailOK = func(v uint64) bool { return v-m.o >= m.need }
	return m
}

func (m *combReceiver) bind(t *gpu.Group) { m.t = t }

// Handle implements sim.Handler.
func (m *combReceiver) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N := w.N
	for {
		switch m.pc {
		case crTok:
			for ; m.tok < m.hi; m.tok++ {
				if (m.tok-m.lo)%m.nr == m.wi {
					break
				}
				for b := w.nodes[m.r][m.tok]; b != 0; b &= b - 1 {
					m.pos[bits.TrailingZeros64(b)]++
				}
			}
			if m.tok >= m.hi {
				for s := range N {
					m.rv.head[m.wi*N+s] = inf
				}
				m.rv.retired[m.wi] = true
				m.pc = crDone
				w.bumpThen(t, m.ctl, ctlCRecvProg*8, m)
				return
			}
			m.src = w.nodes[m.r][m.tok]
			for s := range N {
				m.rv.head[m.wi*N+s] = m.pos[s]
			}
			m.pc = crBumped
			w.bumpThen(t, m.ctl, ctlCRecvProg*8, m)
			return
		case crBumped:
			if m.src == 0 {
				m.tok++
				m.pc = crTok
				continue
			}
			m.check = m.src
			m.pc = crTails
		case crTails:
			for m.check != 0 {
				s := bits.TrailingZeros64(m.check)
				m.check &= m.check - 1
				if m.seenTail[s] > m.pos[s] {
					continue
				}
				reg, off, o := w.sigWord(m.r, m.c, N+s, false)
				m.need = uint64(m.pos[s] + 1)
				v := reg.Load64(off) - o
				if v < m.need {
					m.s, m.o = s, o
					m.pc = crGot
					t.WaitWordThen(reg, off, "ht combine RDMA tail", m.tailOK, m, 0)
					return
				}
				m.seenTail[s] = int(v)
			}
			m.pc = crReduced
			rec := sim.Bytes(w.recC)
			if t.ComputeUntilThen(w.copyLocalEnd(t, m.sm, rec*sim.Bytes(bits.OnesCount64(m.src)), w.out2H), m, 0) {
				return
			}
		case crGot:
			s := m.s
			v := t.Result() - m.o
			p := w.pathOf(m.r, w.rank(s, m.l), m.c, N+s)
			if !m.path.Valid || p.At >= m.path.At {
				m.path = p
			}
			m.seenTail[s] = int(v)
			m.pc = crTails
		case crReduced:
			for b := m.src; b != 0; b &= b - 1 {
				m.pos[bits.TrailingZeros64(b)]++
			}
			m.tok++
			m.pc = crTok
		case crDone:
			w.e.ReceiverDone(m.r, m.path)
			t.End()
			return
		}
	}
}
