package moe

import (
	"fmt"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// The busiest HT warps as state machines over the groups' Then operations
// (launched with gpu.GPU.LaunchHandler, no process): each is the body of
// its g.Launch closure in ht.go, with the same steps at the same instants,
// so that a record costs no coroutine switch. Options.noThen runs the
// closures instead (TestHTWarpsWithoutProcess compares the two).

// htThen reports whether the HT warps that have a state machine run as
// one.
func (w *htWorkload) htThen() bool { return !w.e.opt.noThen }

// htFwd is a dispatch forwarder warp (channel c of rank r, NVLink peer p):
// launchDispatch's forwarder closure as a state machine.
type htFwd struct {
	w     *htWorkload
	t     *gpu.Group
	ch    *htChan
	ctl   *mem.Region
	sm    *htSM
	r, c  int
	p     int
	me, l int

	seqs             [][]int32
	left, head, tail []int
	total            int
	ring             *mem.Region
	base             uint64
	peerCtl          *mem.Region
	aw               htAny
	regs             []*mem.Region
	offs             []uint64
	nvlTail, nvlHead int
	src              int
	path             sigPath
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

func newHTFwd(w *htWorkload, r, c, p int) *htFwd {
	N, G := w.N, w.G
	me, l := r/G, r%G
	peer := w.rank(me, p)
	m := &htFwd{w: w, ch: &w.dch[r*w.C+c], ctl: w.ctl[r][c], sm: &w.sms[r][2*c], r: r, c: c, p: p, me: me, l: l,
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
func (m *htFwd) Handle(*sim.Sim, uint64) {
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
				m.aw.waitThen(m.regs, m.offs, w.poll, m, 0)
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
				panic(fmt.Sprintf("moe: ht: t=%v rank %d channel %d: tail signal of node %d says %d records, %d were sent",
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
			m.aw.waitDoneThen(m.regs, m.offs, w.l2Lat, m, 0)
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
			_, end := m.sm.rd.Reserve(t.Now().Add(w.hbmLat), w.loadD)
			m.pc = hfStore
			if d := end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case hfStore:
			n := sim.Bytes(w.recD)
			_, m.end = m.sm.wr.Reserve(t.Now(), n)
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
func (w *htWorkload) bumpThen(t *gpu.Group, reg *mem.Region, off uint64, h sim.Handler) {
	reg.Store64(off, reg.Load64(off)+1, t.Agent())
	t.ComputeThen(w.e.m.Profile.GPU.AtomicBlock, h, 0)
}

// htNVLSender is a combine NVLink sender warp (channel c of rank r, to
// forwarder f): launchCombine's nvl-sender closure as a state machine.
type htNVLSender struct {
	w     *htWorkload
	t     *gpu.Group
	ctl   *mem.Region
	sm    *htSM
	c     int
	f, l  int
	left  []int
	total int

	ring       *mem.Region
	base       uint64
	fctl       *mem.Region
	tail, head []int
	ready      []bool
	aw         htAny
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

func newHTNVLSender(w *htWorkload, r, c, f int, left []int, total int) *htNVLSender {
	N, G := w.N, w.G
	me, l := r/G, r%G
	fr := w.rank(me, f)
	return &htNVLSender{w: w, ctl: w.ctl[r][c], sm: &w.sms[r][2*c], c: c, f: f, l: l, left: left, total: total,
		ring: w.nvlC[fr], base: uint64((c*G + l) * w.cc.NVLRecv), fctl: w.ctl[fr][c],
		tail: make([]int, N), head: make([]int, N), ready: make([]bool, N),
		regs: make([]*mem.Region, 0, N), offs: make([]uint64, 0, N), cur: c % N}
}

// Handle implements sim.Handler.
func (m *htNVLSender) Handle(*sim.Sim, uint64) {
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
			m.aw.waitThen(m.regs, m.offs, w.poll, m, 0)
			return
		case nsWoke:
			m.pc = nsHeads
			m.aw.waitDoneThen(m.regs, m.offs, w.l2Lat, m, 0)
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
			_, end := m.sm.rd.Reserve(t.Now().Add(w.hbmLat), w.out2H)
			m.pc = nsStore
			if d := end.Sub(t.Now()); d > 0 {
				t.ComputeThen(d, m, 0)
				return
			}
		case nsStore:
			slot := m.base + uint64(m.cur*sub+m.tail[m.cur]%sub)
			rec := sim.Bytes(w.recC)
			_, m.end = m.sm.wr.Reserve(t.Now(), rec)
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
