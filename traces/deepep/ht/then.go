package ht

import (
	"fmt"
	"math/bits"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/traces/workload"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// The busiest HT warps as state machines over the groups' Then operations
// (launched with gpu.GPU.LaunchHandler, no process): each is the body of
// its g.Launch closure in ht.go, with the same steps at the same instants,
// so that a record costs no coroutine switch. Options.noThen runs the
// closures instead (TestHTWarpsWithoutProcess compares the two).

// useThen reports whether the HT warps that have a state machine run as
// one.
func (w *Workload) useThen() bool { return !w.e.Cfg.NoThen }

// fwdMachine is a dispatch forwarder warp (channel c of rank r, NVLink peer p):
// launchDispatch's forwarder closure as a state machine.
type fwdMachine struct {
	w     *Workload
	t     *gpu.Group
	ch    *chanState
	ctl   *mem.Region
	sm    *gpu.SMPorts
	r, c  int
	p     int
	me, l int

	seqs             [][]int32
	left, head, tail []int
	total            int
	ring             *mem.Region
	base             uint64
	peerCtl          *mem.Region
	aw               gpu.WaitAny
	regs             []*mem.Region
	offs             []uint64
	nvlTail, nvlHead int
	src              int
	path             workload.Seen
	need             int // the NVLink space wait's head
	k                int // sources tried in this round
	s, srcRank       int // the chunk's source node and rank
	i, sent, scanned int
	end              sim.Time // the NVLink store's SM bandwidth end
	o                uint64   // the tail signal's offset
	spaceOK          func(v uint64) bool
	pc               uint8
}

const (
	hfTop = iota
	hfSpace
	hfSpaceGot
	hfFindInit
	hfFind
	hfTailRead
	hfCheck
	hfWoke
	hfChunk
	hfScan
	hfLoad
	hfStore
	hfStored
	hfNext
	hfChunkEnd
	hfHead
	hfBumped
	hfTailStored
	hfRetired
)

func newHTFwd(w *Workload, r, c, p int) *fwdMachine {
	N, G := w.N, w.G
	me, l := r/G, r%G
	peer := w.rank(me, p)
	m := &fwdMachine{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], sm: &w.sms[r][2*c], r: r, c: c, p: p, me: me, l: l,
		seqs: make([][]int32, N), left: make([]int, N), head: make([]int, N), tail: make([]int, N),
		ring: w.nvlD[peer], base: uint64((c*G+l)*w.dc.NVLRecv) * w.recD, peerCtl: w.ctl[peer][c],
		regs: make([]*mem.Region, 0, N), offs: make([]uint64, 0, N), src: (2 * c) % N}
	for s := range N {
		m.seqs[s] = w.seqOf(w.rank(s, l), c, me)
		m.left[s] = len(m.seqs[s])
		m.total += m.left[s]
	}
	m.spaceOK = func(v uint64) bool { return int(v) >= m.need }
	return m
}

// Handle implements sim.Handler.
func (m *fwdMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, ctl := w.N, m.ctl
	for {
		switch m.pc {
		case hfTop:
			if m.total == 0 {
				m.ch.retired[m.p] = true
				m.pc = hfRetired
				w.bumpThen(t, ctl, ctlFwdProg*8, m)
				return
			}
			m.pc = hfSpace
		case hfSpace:
			if w.dc.NVLRecv-(m.nvlTail-m.nvlHead) >= w.dc.NVLSend {
				m.pc = hfFindInit
				continue
			}
			m.need = m.nvlTail + w.dc.NVLSend - w.dc.NVLRecv
			m.pc = hfSpaceGot
			t.WaitWordThen(ctl, w.ctlDHead(m.p), "ht forwarder NVLink space", m.spaceOK, m, 0)
			return
		case hfSpaceGot:
			m.nvlHead = int(t.Result())
			m.pc = hfSpace
		case hfFindInit:
			m.k = 0
			m.pc = hfFind
		case hfFind:
			if m.k == N {
				m.regs, m.offs = m.regs[:0], m.offs[:0]
				for s := range N {
					if m.left[s] > 0 {
						reg, off, _ := w.sigWord(m.r, m.c, s, false)
						m.regs, m.offs = append(m.regs, reg), append(m.offs, off)
					}
				}
				m.pc = hfWoke
				m.aw.WaitThen(m.regs, m.offs, w.poll, m, 0)
				return
			}
			m.k++
			m.src = (m.src + 1) % N
			if m.left[m.src] == 0 {
				continue
			}
			m.pc = hfCheck
			if m.head[m.src] == m.tail[m.src] {
				reg, off, o := w.sigWord(m.r, m.c, m.src, false)
				m.o = o
				m.pc = hfTailRead
				t.Load64Then(reg, off, m, 0)
				return
			}
		case hfTailRead:
			src := m.src
			m.tail[src] = int(t.Result() - m.o)
			if m.tail[src] > len(m.seqs[src]) {
				panic(fmt.Sprintf("ht: ht: t=%v rank %d channel %d: tail signal of node %d says %d records, %d were sent",
					t.Now(), m.r, m.c, src, m.tail[src], len(m.seqs[src])))
			}
			m.pc = hfCheck
		case hfCheck:
			if m.tail[m.src] > m.head[m.src] {
				m.pc = hfChunk
				continue
			}
			m.pc = hfFind
		case hfWoke:
			m.pc = hfFindInit
			m.aw.WaitDoneThen(m.regs, m.offs, w.l2Lat, m, 0)
			return
		case hfChunk:
			m.s = m.src
			m.srcRank = w.rank(m.s, m.l)
			m.path = w.pathOf(t, m.r, m.srcRank, m.c, m.s, w.landAt(m.r, m.c, m.s))
			m.i, m.sent, m.scanned = m.head[m.s], 0, 0
			m.pc = hfScan
		case hfScan:
			s := m.s
			if m.i >= m.tail[s] {
				m.pc = hfChunkEnd
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
			m.pc = hfLoad
			if d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case hfLoad:
			end := m.sm.Read(t.Now().Add(w.hbmLat), w.loadD)
			m.pc = hfStore
			if d := end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case hfStore:
			n := sim.Bytes(w.recD)
			m.end = m.sm.Write(t.Now(), n)
			m.pc = hfStored
			t.NVLinkWriteThen(m.p, m.ring, m.base+uint64(m.nvlTail%w.dc.NVLRecv)*w.recD, nil, n, m, 0)
			return
		case hfStored:
			m.pc = hfNext
			if d := m.end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case hfNext:
			m.nvlTail++
			m.i++
			m.sent++
			m.pc = hfScan
			if m.sent == w.dc.NVLSend {
				m.pc = hfChunkEnd
			}
		case hfChunkEnd:
			m.pc = hfHead
			if d := sim.Duration(m.scanned) * w.l2Lat; d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case hfHead:
			m.head[m.s] = m.i
			m.ch.head[m.p*N+m.s] = m.i
			m.pc = hfBumped
			w.bumpThen(t, ctl, ctlFwdProg*8, m)
			return
		case hfBumped:
			m.pc = hfTop
			if m.sent > 0 {
				m.pc = hfTailStored
				t.Store64Then(m.peerCtl, w.ctlDTail(m.l), uint64(m.nvlTail), m, 0)
				return
			}
		case hfTailStored:
			w.fwdPath[(m.r*w.C+m.c)*w.G+m.p] = m.path
			m.pc = hfTop
		case hfRetired:
			t.End()
			return
		}
	}
}

// bumpThen is bump for a group without a process.
func (w *Workload) bumpThen(t *gpu.Group, reg *mem.Region, off uint64, h sim.Handler) {
	reg.Store64(off, reg.Load64(off)+1, t.Agent())
	t.ComputeThen(w.e.M.Profile.GPU.AtomicBlock, h, 0)
}

// nvlSenderMachine is a combine NVLink sender warp (channel c of rank r, to
// forwarder f): launchCombine's nvl-sender closure as a state machine.
type nvlSenderMachine struct {
	w     *Workload
	t     *gpu.Group
	ctl   *mem.Region
	sm    *gpu.SMPorts
	c     int
	f, l  int
	left  []int
	total int

	ring       *mem.Region
	base       uint64
	fctl       *mem.Region
	tail, head []int
	ready      []bool
	aw         gpu.WaitAny
	regs       []*mem.Region
	offs       []uint64
	cur        int
	k, n, j    int // lanes visited this round; the chunk's records, sent
	end        sim.Time
	pc         uint8
}

const (
	nsTop = iota
	nsReady
	nsWoke
	nsHeads
	nsChunk
	nsRec
	nsStore
	nsStored
	nsRecDone
	nsTails
)

func newHTNVLSender(w *Workload, r, c, f int, left []int, total int) *nvlSenderMachine {
	N, G := w.N, w.G
	me, l := r/G, r%G
	fr := w.rank(me, f)
	return &nvlSenderMachine{w: w, ctl: w.ctl[r][c], sm: &w.sms[r][2*c], c: c, f: f, l: l, left: left, total: total,
		ring: w.nvlC[fr], base: uint64((c*G + l) * w.cc.NVLRecv), fctl: w.ctl[fr][c],
		tail: make([]int, N), head: make([]int, N), ready: make([]bool, N),
		regs: make([]*mem.Region, 0, N), offs: make([]uint64, 0, N), cur: c % N}
}

// Handle implements sim.Handler.
func (m *nvlSenderMachine) Handle(*sim.Sim, uint64) {
	w, t, ctl := m.w, m.t, m.ctl
	N, f := w.N, m.f
	sub, chunk := w.subC, w.cc.NVLSend
	for {
		switch m.pc {
		case nsTop:
			if m.total == 0 {
				t.End()
				return
			}
			m.pc = nsReady
		case nsReady:
			// Until a lane has records and a chunk of room (cached
			// heads), reload the heads of the lanes with records.
			any := false
			for s := range N {
				m.ready[s] = m.left[s] > 0 && sub-(m.tail[s]-m.head[s]) >= chunk
				any = any || m.ready[s]
			}
			if any {
				m.k = 0
				m.pc = nsChunk
				continue
			}
			m.regs, m.offs = m.regs[:0], m.offs[:0]
			moved := false
			for s := range N {
				if m.left[s] > 0 {
					m.regs, m.offs = append(m.regs, ctl), append(m.offs, w.ctlCHead(f, s))
					moved = moved || int(ctl.Load64(w.ctlCHead(f, s))) != m.head[s]
				}
			}
			if moved {
				m.pc = nsHeads
				t.ComputeThen(w.l2Lat, m, 0)
				return
			}
			m.pc = nsWoke
			m.aw.WaitThen(m.regs, m.offs, w.poll, m, 0)
			return
		case nsWoke:
			m.pc = nsHeads
			m.aw.WaitDoneThen(m.regs, m.offs, w.l2Lat, m, 0)
			return
		case nsHeads:
			for s := range N {
				if m.left[s] > 0 {
					m.head[s] = int(ctl.Load64(w.ctlCHead(f, s)))
				}
			}
			m.pc = nsReady
		case nsChunk: // one chunk into every ready sub-ring, round-robin
			if m.k == N {
				m.k = 0
				m.pc = nsTails
				continue
			}
			m.k++
			m.cur = (m.cur + 1) % N
			if !m.ready[m.cur] {
				continue
			}
			m.n, m.j = min(chunk, m.left[m.cur]), 0
			m.pc = nsRec
		case nsRec:
			if m.j == m.n {
				m.left[m.cur] -= m.n
				m.total -= m.n
				m.pc = nsChunk
				continue
			}
			end := m.sm.Read(t.Now().Add(w.hbmLat), w.out2H)
			m.pc = nsStore
			if d := end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case nsStore:
			slot := m.base + uint64(m.cur*sub+m.tail[m.cur]%sub)
			rec := sim.Bytes(w.recC)
			m.end = m.sm.Write(t.Now(), rec)
			m.pc = nsStored
			t.NVLinkWriteThen(f, m.ring, slot*w.recC, nil, rec, m, 0)
			return
		case nsStored:
			m.pc = nsRecDone
			if d := m.end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case nsRecDone:
			m.tail[m.cur]++
			m.j++
			m.pc = nsRec
		case nsTails:
			if m.k == N {
				m.pc = nsTop
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

// copyLocalTime is copyLocal's SM time from now (it reserves the SM's
// bandwidth).
func (w *Workload) copyLocalTime(t *gpu.Group, sm *gpu.SMPorts, rd, wr sim.Bytes) sim.Duration {
	end := sm.Read(t.Now().Add(w.hbmLat), rd)
	if wr > 0 {
		end = sm.Write(end, wr)
	}
	return end.Sub(t.Now()) + w.e.M.Profile.GPU.StoreIssue
}

// recvMachine is a dispatch NVLink receiver warp (channel c of rank r, from
// forwarder f): launchDispatch's receiver closure as a state machine.
type recvMachine struct {
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
	drTop = iota
	drGot
	drCopy
	drCopied
)

func newHTRecv(w *Workload, r, c, f, n int) *recvMachine {
	me, l := r/w.G, r%w.G
	fr := w.rank(me, f)
	m := &recvMachine{w: w, ctl: w.ctl[r][c], fctl: w.ctl[fr][c], sm: &w.sms[r][2*c+1], r: r, c: c, f: f, l: l, fr: fr, n: n}
	m.more = func(v uint64) bool { return int(v) > m.head }
	return m
}

// Handle implements sim.Handler.
func (m *recvMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	for {
		switch m.pc {
		case drTop:
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
				m.pc = drTop
				t.Store64Then(m.fctl, w.ctlDHead(m.l), uint64(m.head), m, 0)
				return
			}
			m.pc = drCopied
			if d := w.copyLocalTime(t, m.sm, w.loadD, w.loadD); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case drCopied:
			m.head++
			m.pc = drCopy
		}
	}
}

// senderMachine is a dispatch RDMA sender warp (channel c of rank r, warp wi):
// launchDispatch's sender closure as a state machine.
type senderMachine struct {
	w      *Workload
	t      *gpu.Group
	ch     *chanState
	ctl    *mem.Region
	sm     *gpu.SMPorts
	r, c   int
	wi     int
	tok    int
	hi     int
	cnt    []int
	bits   uint64 // destinations of the token whose credits are left to check
	m      uint64 // the token's destinations
	need   uint64
	o      uint64
	credit func(v uint64) bool
	pc     uint8
}

const (
	dsTok = iota
	dsCredit
	dsRelease
	dsNext
)

func newHTSender(w *Workload, r, c, wi, lo, hi int) *senderMachine {
	m := &senderMachine{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], sm: &w.sms[r][2*c+1], r: r, c: c, wi: wi,
		tok: lo, hi: hi, cnt: make([]int, w.N)}
	m.credit = func(v uint64) bool { return v-m.o >= m.need }
	return m
}

// Handle implements sim.Handler.
func (m *senderMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	W := w.dc.RDMARecv
	lo, _ := tokenRange(w.e.Step.Tokens[m.r], w.C, m.c)
	for {
		switch m.pc {
		case dsTok:
			for ; m.tok < m.hi; m.tok++ {
				nm := w.nodes[m.r][m.tok]
				if (m.tok-lo)%senderWarps != m.wi || nm == 0 {
					for b := nm; b != 0; b &= b - 1 {
						m.cnt[bits.TrailingZeros64(b)]++
					}
					continue
				}
				m.m, m.bits = nm, nm
				break
			}
			if m.tok >= m.hi {
				t.End()
				return
			}
			m.pc = dsCredit
		case dsCredit: // wait for head credits of every destination ring
			for m.bits != 0 {
				d := bits.TrailingZeros64(m.bits)
				m.bits &= m.bits - 1
				if m.cnt[d] < W {
					continue
				}
				m.need = uint64(m.cnt[d] - W + 1)
				reg, off, o := w.sigWord(m.r, m.c, d, true)
				if reg.Load64(off)-o < m.need {
					w.st.CreditWaits++
					m.o = o
					t.WaitWordThen(reg, off, "ht dispatch credit", m.credit, m, 0)
					return
				}
			}
			// Read the token once, store one record per node.
			m.pc = dsRelease
			if d := w.copyLocalTime(t, m.sm, w.loadD, sim.Bytes(w.recD)*sim.Bytes(bits.OnesCount64(m.m))); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case dsRelease:
			ch := m.ch
			for b := m.m; b != 0; b &= b - 1 {
				d := bits.TrailingZeros64(b)
				ch.rel[d][m.cnt[d]] = true
				for ch.relTail[d] < len(ch.rel[d]) && ch.rel[d][ch.relTail[d]] {
					ch.relTail[d]++
				}
				m.cnt[d]++
			}
			m.pc = dsNext
			w.bumpThen(t, m.ctl, ctlSendProg*8, m)
			return
		case dsNext:
			m.tok++
			m.pc = dsTok
		}
	}
}

// combRecvMachine is a combine RDMA receiver warp (channel c of rank r, warp wi):
// launchCombine's receiver closure as a state machine.
type combRecvMachine struct {
	w             *Workload
	t             *gpu.Group
	rv            *chanState
	ctl           *mem.Region
	sm            *gpu.SMPorts
	r, c, l       int
	wi, nr        int
	lo, tok, hi   int
	pos, seenTail []int
	path          workload.Seen
	m, bits       uint64
	s             int
	need, o       uint64
	tail          func(v uint64) bool
	pc            uint8
}

const (
	crTok = iota
	crBumped
	crTails
	crGot
	crCopied
	crDone
)

func newHTCRecv(w *Workload, r, c, wi, nr, lo, hi int) *combRecvMachine {
	m := &combRecvMachine{w: w, rv: &w.cch[2*(r*w.C+c)+1], ctl: w.ctl[r][c], sm: &w.sms[r][2*c], r: r, c: c, l: r % w.G,
		wi: wi, nr: nr, lo: lo, tok: lo, hi: hi, pos: make([]int, w.N), seenTail: make([]int, w.N)}
	m.tail = func(v uint64) bool { return v-m.o >= m.need }
	return m
}

// Handle implements sim.Handler.
func (m *combRecvMachine) Handle(*sim.Sim, uint64) {
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
			m.m = w.nodes[m.r][m.tok]
			for s := range N {
				m.rv.head[m.wi*N+s] = m.pos[s]
			}
			m.pc = crBumped
			w.bumpThen(t, m.ctl, ctlCRecvProg*8, m)
			return
		case crBumped:
			if m.m == 0 {
				m.tok++
				m.pc = crTok
				continue
			}
			m.bits = m.m
			m.pc = crTails
		case crTails:
			for m.bits != 0 {
				s := bits.TrailingZeros64(m.bits)
				m.bits &= m.bits - 1
				if m.seenTail[s] > m.pos[s] {
					continue
				}
				reg, off, o := w.sigWord(m.r, m.c, N+s, false)
				m.need = uint64(m.pos[s] + 1)
				v := reg.Load64(off) - o
				if v < m.need {
					m.s, m.o = s, o
					m.pc = crGot
					t.WaitWordThen(reg, off, "ht combine RDMA tail", m.tail, m, 0)
					return
				}
				m.seenTail[s] = int(v)
			}
			m.pc = crCopied
			rec := sim.Bytes(w.recC)
			if d := w.copyLocalTime(t, m.sm, rec*sim.Bytes(bits.OnesCount64(m.m)), w.out2H); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case crGot:
			s := m.s
			v := t.Result() - m.o
			p := w.pathOf(t, m.r, w.rank(s, m.l), m.c, N+s, w.landAt(m.r, m.c, s))
			if !m.path.Valid || p.At >= m.path.At {
				m.path = p
			}
			m.seenTail[s] = int(v)
			m.pc = crTails
		case crCopied:
			for b := m.m; b != 0; b &= b - 1 {
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

// combCoordMachine is a combine forwarder coordinator (channel c of rank r):
// launchCombine's forward-coordinator closure as a state machine.
type combCoordMachine struct {
	w       *Workload
	t       *gpu.Group
	fw      *chanState
	ctl     *mem.Region
	c       int
	me, l   int
	last    []int
	seen    uint64
	all     bool
	i, h    int
	changed func(v uint64) bool
	pc      uint8
}

const (
	fcTop = iota
	fcScan
	fcStored
	fcSlept
)

func newHTCFwdCoord(w *Workload, r, c int) *combCoordMachine {
	m := &combCoordMachine{w: w, fw: &w.cch[2*(r*w.C+c)], ctl: w.ctl[r][c], c: c, me: r / w.G, l: r % w.G,
		last: make([]int, w.N*w.G)}
	m.changed = func(v uint64) bool { return v != m.seen }
	return m
}

// Handle implements sim.Handler.
func (m *combCoordMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, G := w.N, w.G
	for {
		switch m.pc {
		case fcTop:
			m.seen = m.ctl.Load64(ctlCFwdProg * 8)
			m.all = true
			m.i = 0
			m.pc = fcScan
		case fcScan:
			for m.i < N*G {
				i := m.i
				s, p := i/G, i%G
				m.i++
				if p == 0 && !m.fw.retired[s] {
					m.all = false
				}
				if h := m.fw.head[i]; h > m.last[i] {
					m.h = h
					m.pc = fcStored
					t.Store64Then(w.ctl[w.rank(m.me, p)][m.c], w.ctlCHead(m.l, s), uint64(h), m, 0)
					return
				}
			}
			if m.all {
				t.End()
				return
			}
			m.pc = fcSlept
			t.SleepThen(w.e.P.HTCoordSleep, m, 0)
			return
		case fcStored:
			m.last[m.i-1] = m.h
			m.pc = fcScan
		case fcSlept:
			m.pc = fcTop
			if m.ctl.Load64(ctlCFwdProg*8) == m.seen {
				t.WaitWordThen(m.ctl, ctlCFwdProg*8, "ht combine forward coordinator", m.changed, m, 0)
				return
			}
		}
	}
}

// thenGin reports whether the HT warps that issue GIN operations run
// as state machines: over a backend that can issue without a process.
func (w *Workload) thenGin() bool {
	_, ok := w.dataComms[0].Backend().(gin.ThenBackend)
	return ok && w.useThen()
}

// chunkPutMachine is putChunk as a state machine, for a group without a
// process: set the arguments, then start; it continues at h.
type chunkPutMachine struct {
	w                  *Workload
	t                  *gpu.Group
	gn                 *gin.Gin
	dc                 *gin.DevComm
	r, c, me, dst      int
	slot, k, id, slots int
	send, recv         *gin.Window
	rec                uint64
	ph                 *workload.Phase
	chunks, tails      *int64
	h                  sim.Handler
	start              sim.Time
	peer               int
	pc                 uint8
}

const (
	pcLocalFenced = iota
	pcLocalAdded
	pcPut
	pcSignalled
)

// run puts the chunk set in m's fields, then continues at h.
func (m *chunkPutMachine) run(h sim.Handler) {
	w, t := m.w, m.t
	e := w.e
	m.h = h
	m.start = t.Now()
	if m.dst == m.me {
		m.pc = pcLocalFenced
		t.FenceThen(gpu.ScopeDevice, m, 0)
		return
	}
	m.peer = w.rank(m.dst, m.r%w.G)
	n := uint64(m.k) * m.rec
	fp := &w.st.FirstPut[0][m.r]
	if m.ph == &e.Comb {
		fp = &w.st.FirstPut[1][m.r]
	}
	if *fp == 0 {
		*fp = m.start
	}
	m.pc = pcPut
	m.gn.PutThen(m, 0, m.dc.World(m.r), m.peer, m.recv, ringOff(m.c, m.me, w.N, m.slots, m.slot, m.rec), m.send,
		ringOff(m.c, m.dst, w.N, m.slots, m.slot, m.rec), n, nil, nil)
}

// Handle implements sim.Handler.
func (m *chunkPutMachine) Handle(s *sim.Sim, _ uint64) {
	w, t := m.w, m.t
	switch m.pc {
	case pcLocalFenced:
		reg, off, _ := w.sigWord(m.r, m.c, m.id, false)
		m.pc = pcLocalAdded
		t.AtomicAdd64Then(reg, off, uint64(m.k), gpu.ScopeDevice, m, 0)
	case pcLocalAdded:
		w.st.LocalChunks++
		m.h.Handle(s, 0)
	case pcPut:
		m.pc = pcSignalled
		m.gn.SignalThen(m, 0, m.dc.World(m.r), m.peer, gin.SignalAdd{Signal: m.id, Value: uint64(m.k)})
	case pcSignalled:
		n := uint64(m.k) * m.rec
		m.ph.Msgs++
		m.ph.Sigs++
		m.ph.RDMABytes += int64(n)
		*m.chunks++
		*m.tails++
		m.h.Handle(s, 0)
	}
}

// coordMachine is a dispatch sender coordinator (channel c of rank r):
// launchDispatch's coordinator closure as a state machine.
type coordMachine struct {
	w               *Workload
	t               *gpu.Group
	ch              *chanState
	ctl             *mem.Region
	r, c, me        int
	remaining, last []int
	total           int
	seen            uint64
	issued          bool
	i, d, k         int
	put             chunkPutMachine
	changed         func(v uint64) bool
	pc              uint8
}

const (
	coTop = iota
	coScan
	coPut
)

func newHTCoord(w *Workload, r, c int) *coordMachine {
	N := w.N
	m := &coordMachine{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], r: r, c: c, me: r / w.G,
		remaining: make([]int, N), last: make([]int, N)}
	for d := range N {
		m.remaining[d] = len(w.seqOf(r, c, d))
		m.total += m.remaining[d]
	}
	m.changed = func(v uint64) bool { return v != m.seen }
	m.put = chunkPutMachine{w: w, dc: w.dataComms[c/workload.CtxsPerComm], r: r, c: c, me: m.me, slots: w.dc.RDMARecv,
		send: w.dSend[c/workload.CtxsPerComm], recv: w.dRecv[c/workload.CtxsPerComm], rec: w.recD, ph: &w.e.Disp,
		chunks: &w.st.DispChunks, tails: &w.st.DispTails}
	return m
}

// Handle implements sim.Handler.
func (m *coordMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, W := w.N, w.dc.RDMARecv
	if m.put.gn == nil {
		m.put.t = t
		m.put.gn = m.put.dc.Gin(t, m.r, m.c%workload.CtxsPerComm)
	}
	for {
		switch m.pc {
		case coTop:
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
				m.put.dst, m.put.slot, m.put.k, m.put.id = d, slot, m.k, m.me
				m.pc = coPut
				m.put.run(m)
				return
			}
			m.pc = coTop
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

// creditsMachine is a coordinator that returns RDMA head credits
// (launchCredits) as a state machine.
type creditsMachine struct {
	w            *Workload
	t            *gpu.Group
	ch           *chanState
	ctl          *mem.Region
	off          uint64
	why          string
	r, c, id     int
	warps, chunk int
	ph           *workload.Phase
	count        *int64
	dc           *gin.DevComm
	gn           *gin.Gin
	last         []int
	seen         uint64
	all          bool
	s, minH      int
	changed      func(v uint64) bool
	pc           uint8
}

const (
	ccTop = iota
	ccScan
	ccSignalled
	ccCredited
	ccSlept
)

// Handle implements sim.Handler.
func (m *creditsMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N := w.N
	if m.gn == nil {
		m.gn = m.dc.Gin(t, m.r, m.c%workload.CtxsPerComm)
	}
	for {
		switch m.pc {
		case ccTop:
			m.seen = m.ctl.Load64(m.off)
			m.all = true
			m.s = 0
			m.pc = ccScan
		case ccScan:
			for m.s < N {
				s := m.s
				m.s++
				minH := inf
				for p := range m.warps {
					if !m.ch.retired[p] {
						m.all = false
						minH = min(minH, m.ch.head[p*N+s])
					}
				}
				if minH == inf || minH < m.last[s]+m.chunk {
					continue
				}
				m.minH = minH
				v := uint64(minH - m.last[s])
				if s == m.r/w.G {
					reg, off, _ := w.sigWord(m.r, m.c, m.id, true)
					m.pc = ccCredited
					t.AtomicAdd64Then(reg, off, v, gpu.ScopeDevice, m, 0)
					return
				}
				m.pc = ccSignalled
				m.gn.SignalThen(m, 0, m.dc.World(m.r), w.rank(s, m.r%w.G), gin.SignalAdd{Signal: m.id, Value: v})
				return
			}
			if m.all {
				t.End()
				return
			}
			m.pc = ccSlept
			t.SleepThen(w.e.P.HTCoordSleep, m, 0)
			return
		case ccSignalled:
			m.ph.Sigs++
			*m.count++
			m.pc = ccCredited
		case ccCredited:
			m.last[m.s-1] = m.minH
			m.pc = ccScan
		case ccSlept:
			m.pc = ccTop
			if m.ctl.Load64(m.off) == m.seen {
				t.WaitWordThen(m.ctl, m.off, m.why, m.changed, m, 0)
				return
			}
		}
	}
}

// combFwdMachine is a combine forwarder (channel c of rank r, destination node
// s): launchCombine's forwarder closure as a state machine.
type combFwdMachine struct {
	w                *Workload
	t                *gpu.Group
	fw               *chanState
	ctl              *mem.Region
	sm               *gpu.SMPorts
	r, c, s, src, kw int
	seq              []int32
	next, seenTail   []int
	at               []sim.Time
	doneAt           []sim.Time
	doneHead         []int
	rel, j           int
	creg             *mem.Region
	coff, co         uint64
	sent, k          int
	need             uint64
	now, end         sim.Time
	mask, bits       uint64
	p                int
	reads            sim.Bytes
	put              chunkPutMachine
	credit, tail     func(v uint64) bool
	pc               uint8
}

const (
	cfTop = iota
	cfChunk
	cfTok
	cfBit
	cfTail
	cfTailGot
	cfReserve
	cfChunkEnd
	cfReleased
	cfPut
	cfSent
	cfEnd
)

func newHTCFwd(w *Workload, r, c, s, kw int) *combFwdMachine {
	G := w.G
	me, l := r/G, r%G
	src := w.rank(s, l)
	m := &combFwdMachine{w: w, fw: &w.cch[2*(r*w.C+c)], ctl: w.ctl[r][c], sm: &w.sms[r][2*c+1], r: r, c: c, s: s, src: src,
		kw: kw, seq: w.seqOf(src, c, me), next: make([]int, G), seenTail: make([]int, G), at: make([]sim.Time, kw),
		doneAt: make([]sim.Time, w.cc.RDMASend), doneHead: make([]int, w.cc.RDMASend*G)}
	m.creg, m.coff, m.co = w.sigWord(r, c, w.N+s, true)
	m.credit = func(v uint64) bool { return v-m.co >= m.need }
	m.tail = func(v uint64) bool { return int(v) >= int(m.need) }
	m.put = chunkPutMachine{w: w, dc: w.dataComms[c/workload.CtxsPerComm], r: r, c: c, me: me, dst: s, id: w.N + me,
		slots: w.cc.RDMARecv, send: w.cSend[c/workload.CtxsPerComm], recv: w.cRecv[c/workload.CtxsPerComm], rec: w.recC, ph: &w.e.Comb,
		chunks: &w.st.CombChunks, tails: &w.st.CombTails}
	return m
}

// release hands the heads of the tokens written by now to the
// coordinator, in token order (its min over sub-warps).
func (m *combFwdMachine) release(now sim.Time) {
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
func (m *combFwdMachine) Handle(*sim.Sim, uint64) {
	w, t := m.w, m.t
	N, G, W := w.N, w.G, w.cc.RDMARecv
	if m.put.gn == nil {
		m.put.t = t
		m.put.gn = m.put.dc.Gin(t, m.r, m.c%workload.CtxsPerComm)
	}
	rec := sim.Bytes(w.recC)
	for {
		switch m.pc {
		case cfTop:
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
				w.st.CreditWaits++
				m.need = need
				t.WaitWordThen(m.creg, m.coff, "ht combine credit", m.credit, m, 0)
				return
			}
		case cfChunk:
			m.now = t.Now()
			m.end = m.now
			for i := range m.at {
				m.at[i] = m.now
			}
			m.rel, m.j = 0, 0
			m.pc = cfTok
		case cfTok:
			if m.j == m.k {
				m.pc = cfChunkEnd
				continue
			}
			m.mask = w.gpus[m.src][int(m.seq[m.sent+m.j])*N+m.r/G]
			m.bits, m.reads = m.mask, 0
			m.pc = cfBit
		case cfBit:
			if m.bits == 0 {
				m.pc = cfReserve
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
				m.pc = cfBit
				continue
			}
			m.release(t.Now())
			if v := int(m.ctl.Load64(w.ctlCTail(p, m.s))); v >= m.next[p] || m.rel == m.j {
				m.need = uint64(m.next[p])
				m.pc = cfTailGot
				t.WaitWordThen(m.ctl, w.ctlCTail(p, m.s), "ht combine NVLink tail", m.tail, m, 0)
				return
			}
			t.SleepThen(m.doneAt[m.rel].Sub(t.Now()), m, 0)
			return
		case cfTailGot:
			m.seenTail[m.p] = int(t.Result())
			m.pc = cfBit
		case cfReserve:
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
			if d := m.end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
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
			m.pc = cfTop
		case cfEnd:
			t.End()
			return
		}
	}
}
