package ht

import (
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces/workload"
)

// Every HT warp is a state machine over its group's Then operations,
// launched with gpu.GPU.LaunchHandler: no process, no coroutine switch per
// record. Each machine's doc comment gives the warp's program in order;
// its step constants name the places in that program where it resumes.
// Handle runs steps until one starts an operation (and returns, to resume
// at m.pc when the operation is done) or the warp ends. The warps issue
// GIN operations with PutThen and SignalThen, which every backend that HT
// runs on (GDAKI, Proxy) provides.

// warp is a machine that a launch binds to its group.
type warp interface {
	sim.Handler
	bind(t *gpu.Group)
}

// launch starts m as a group of threads threads named name on g.
func launch(g *gpu.GPU, name string, threads int, m warp) {
	m.bind(g.LaunchHandler(name, threads, m, 0))
}

// bumpThen advances a shared-memory progress word that a coordinator
// polls (a st.release.cta under the channel lock, visible to the SM at
// once), then continues at h.
func (w *Workload) bumpThen(t *gpu.Group, reg *mem.Region, off uint64, h sim.Handler) {
	reg.Store64(off, reg.Load64(off)+1, t.Agent())
	t.ComputeThen(w.e.M.Profile.GPU.AtomicBlock, h, 0)
}

// copyLocalEnd is when a warp's TMA load of rd bytes of local HBM followed
// by the store of wr bytes to local HBM ends, from now (it reserves the
// SM's shared bandwidth).
func (w *Workload) copyLocalEnd(t *gpu.Group, sm *gpu.SMPorts, rd, wr sim.Bytes) sim.Time {
	end := sm.Read(t.Now().Add(w.hbmLat), rd)
	if wr > 0 {
		end = sm.Write(end, wr)
	}
	return end.Add(w.e.M.Profile.GPU.StoreIssue)
}

// nvlCopy is a warp's copy of one record to a GPU of its node: the TMA
// load of rd bytes of local HBM (one HBM latency, then the SM's shared
// read bandwidth), then the TMA store of wr bytes into reg of local GPU
// peer over NVLink, through the SM's shared write bandwidth. The owner
// sets the fields; run copies to offset off and continues at h.
type nvlCopy struct {
	t      *gpu.Group
	sm     *gpu.SMPorts
	lat    sim.Duration // HBM latency
	rd, wr sim.Bytes
	peer   int
	reg    *mem.Region
	off    uint64
	end    sim.Time // the store's SM bandwidth end
	h      sim.Handler
	pc     uint8
}

const (
	copyStore  = iota // the record is loaded: store it
	copyStored        // the store is issued: wait for the SM bandwidth
	copyDone
)

// run copies one record to offset off of reg, then continues at h.
func (c *nvlCopy) run(off uint64, h sim.Handler) {
	c.off, c.h = off, h
	c.pc = copyStore
	if !c.t.ComputeUntilThen(c.sm.Read(c.t.Now().Add(c.lat), c.rd), c, 0) {
		c.store()
	}
}

func (c *nvlCopy) store() {
	c.end = c.sm.Write(c.t.Now(), c.wr)
	c.pc = copyStored
	c.t.NVLinkWriteThen(c.peer, c.reg, c.off, nil, c.wr, c, 0)
}

// Handle implements sim.Handler.
func (c *nvlCopy) Handle(s *sim.Sim, _ uint64) {
	switch c.pc {
	case copyStore:
		c.store()
	case copyStored:
		c.pc = copyDone
		if !c.t.ComputeUntilThen(c.end, c, 0) {
			c.h.Handle(s, 0)
		}
	case copyDone:
		c.h.Handle(s, 0)
	}
}

// chunkPut is a coordinator's chunk: k records from slot of the send ring
// for node dst go to the rail peer's receive ring for node me, then k is
// added to the peer's tail signal id on the same context. A chunk for the
// local node only publishes the tail with a local atomic (its records were
// written into the local receive ring):
//
//	if dst == me:
//		fence (device scope); atomicAdd(tail signal id, k)
//	else:
//		put(peer, recv ring[me][slot..], send ring[dst][slot..], k records)
//		signalAdd(peer, id, k)
//
// The owner sets the fields of the chunk; run puts it and continues at h.
type chunkPut struct {
	w                  *Workload
	t                  *gpu.Group
	gn                 *gin.Gin
	dc                 *gin.DevComm
	r, c, me, dst      int
	slot, k, id, slots int
	send, recv         *gin.Window
	rec                uint64
	ph                 *workload.Phase
	firstPut           []sim.Time // per rank: the phase's first put to another node
	chunks, tails      *int64
	h                  sim.Handler
	start              sim.Time
	peer               int
	pc                 uint8
}

const (
	putLocalFenced = iota // the local chunk's fence is done: publish the tail
	putLocalAdded         // the local tail is published
	putPut                // the put is issued: signal the tail
	putSignalled          // the tail signal is issued
)

// bind makes t the chunk's group, with a GIN handle on the chunk's context.
func (m *chunkPut) bind(t *gpu.Group) {
	m.t, m.gn = t, m.dc.Gin(t, m.r, m.c%workload.CtxsPerComm)
}

// run puts the chunk set in m's fields, then continues at h.
func (m *chunkPut) run(h sim.Handler) {
	w, t := m.w, m.t
	m.h = h
	m.start = t.Now()
	if m.dst == m.me {
		m.pc = putLocalFenced
		t.FenceThen(gpu.ScopeDevice, m, 0)
		return
	}
	m.peer = w.rank(m.dst, m.r%w.G)
	if m.firstPut[m.r] == 0 {
		m.firstPut[m.r] = m.start
	}
	m.pc = putPut
	m.gn.PutThen(m, 0, m.dc.World(m.r), m.peer, m.recv, ringOff(m.c, m.me, w.N, m.slots, m.slot, m.rec), m.send,
		ringOff(m.c, m.dst, w.N, m.slots, m.slot, m.rec), uint64(m.k)*m.rec, nil, nil)
}

// Handle implements sim.Handler.
func (m *chunkPut) Handle(s *sim.Sim, _ uint64) {
	w, t := m.w, m.t
	switch m.pc {
	case putLocalFenced:
		reg, off, _ := w.sigWord(m.r, m.c, m.id, false)
		m.pc = putLocalAdded
		t.AtomicAdd64Then(reg, off, uint64(m.k), gpu.ScopeDevice, m, 0)
	case putLocalAdded:
		w.rst[m.r].LocalChunks++
		m.h.Handle(s, 0)
	case putPut:
		m.pc = putSignalled
		m.gn.SignalThen(m, 0, m.dc.World(m.r), m.peer, gin.SignalAdd{Signal: m.id, Value: uint64(m.k)})
	case putSignalled:
		n := m.ph.Count(m.r)
		n.Msgs++
		n.Sigs++
		n.RDMABytes += int64(uint64(m.k) * m.rec)
		*m.chunks++
		*m.tails++
		m.h.Handle(s, 0)
	}
}

// lazyCoord is a coordinator warp that hands its warps' progress back
// lazily, item by item (a source node's ring, a peer's sub-ring):
//
//	loop:
//		seen = progress word (ctl at off)
//	scan:	for each item i:
//			v, due = ret.due(i, last[i])
//			if due: ret.give(i, last[i], v); last[i] = v
//		if no warp behind any item still runs: end
//		sleep HTCoordSleep
//		if progress word == seen: wait until it changes
//
// The dispatch forwarder coordinator and the combine receiver coordinator
// return RDMA head credits (credits); the combine forwarder coordinator
// returns NVLink sub-ring heads (subHeads).
type lazyCoord struct {
	t       *gpu.Group
	ctl     *mem.Region
	off     uint64 // the warps' progress word
	why     string
	sleep   sim.Duration
	ret     returner
	last    []int // per item: what went back
	seen    uint64
	all     bool // every warp scanned so far has retired
	i, v    int
	changed func(v uint64) bool
	pc      uint8
}

// returner is what a lazyCoord hands back.
type returner interface {
	// due returns item i's progress v, whether it is due to go back
	// (last: what went back before), and whether a warp behind it still
	// runs.
	due(i, last int) (v int, due, live bool)
	// give starts handing back v for item i (last before) on t and
	// continues at h.
	give(t *gpu.Group, i, last, v int, h sim.Handler)
	// bind makes t the coordinator's group.
	bind(t *gpu.Group)
}

const (
	coordLoop  = iota // read the progress word
	coordScan         // hand back every item that is due
	coordGiven        // item i-1 went back
	coordSlept        // wait for progress unless some was made
)

func newLazyCoord(w *Workload, ctl *mem.Region, off uint64, why string, items int, ret returner) *lazyCoord {
	m := &lazyCoord{ctl: ctl, off: off, why: why, sleep: w.e.P.HTCoordSleep, ret: ret, last: make([]int, items)}
	m.changed = func(v uint64) bool { return v != m.seen }
	return m
}

func (m *lazyCoord) bind(t *gpu.Group) {
	m.t = t
	m.ret.bind(t)
}

// Handle implements sim.Handler.
func (m *lazyCoord) Handle(*sim.Sim, uint64) {
	t := m.t
	for {
		switch m.pc {
		case coordLoop:
			m.seen = m.ctl.Load64(m.off)
			m.all = true
			m.i = 0
			m.pc = coordScan
		case coordScan:
			for m.i < len(m.last) {
				i := m.i
				m.i++
				v, due, live := m.ret.due(i, m.last[i])
				if live {
					m.all = false
				}
				if due {
					m.v = v
					m.pc = coordGiven
					m.ret.give(t, i, m.last[i], v, m)
					return
				}
			}
			if m.all {
				t.End()
				return
			}
			m.pc = coordSlept
			t.SleepThen(m.sleep, m, 0)
			return
		case coordGiven:
			m.last[m.i-1] = m.v
			m.pc = coordScan
		case coordSlept:
			m.pc = coordLoop
			if m.ctl.Load64(m.off) == m.seen {
				t.WaitWordThen(m.ctl, m.off, m.why, m.changed, m, 0)
				return
			}
		}
	}
}

// credits returns RDMA head credits of channel c on rank r, per source
// node (the items): the least head over ch's warps that have not retired,
// once it has moved by a chunk since the last credit; the difference goes
// back to that node as signal id on the credit context (SignalAdd), or by
// a local atomic for the local node.
type credits struct {
	w            *Workload
	ch           *chanState
	r, c, id     int
	warps, chunk int
	ph           *workload.Phase
	count        *int64 // credit signals sent
	dc           *gin.DevComm
	gn           *gin.Gin
	next         sim.Handler // the coordinator, while a credit signal issues
}

func (cr *credits) bind(t *gpu.Group) { cr.gn = cr.dc.Gin(t, cr.r, cr.c%workload.CtxsPerComm) }

func (cr *credits) due(s, last int) (v int, due, live bool) {
	N := cr.w.N
	v = inf
	for p := range cr.warps {
		if !cr.ch.retired[p] {
			live = true
			v = min(v, cr.ch.head[p*N+s])
		}
	}
	return v, v != inf && v >= last+cr.chunk, live
}

func (cr *credits) give(t *gpu.Group, s, last, v int, h sim.Handler) {
	w := cr.w
	if s == cr.r/w.G {
		reg, off, _ := w.sigWord(cr.r, cr.c, cr.id, true)
		t.AtomicAdd64Then(reg, off, uint64(v-last), gpu.ScopeDevice, h, 0)
		return
	}
	cr.next = h
	cr.gn.SignalThen(cr, 0, cr.dc.World(cr.r), w.rank(s, cr.r%w.G), gin.SignalAdd{Signal: cr.id, Value: uint64(v - last)})
}

// Handle implements sim.Handler: the credit signal is issued (a signal
// still issuing when the run ends is not counted).
func (cr *credits) Handle(s *sim.Sim, _ uint64) {
	cr.ph.Count(cr.r).Sigs++
	*cr.count++
	cr.next.Handle(s, 0)
}

// launchCredits starts the coordinator that returns the RDMA head credits
// of channel c on rank r (credits) to each source node as signal id.
func (w *Workload) launchCredits(g *gpu.GPU, name, why string, r, c, id int, ch *chanState, warps, chunk int,
	ctl *mem.Region, off uint64, ph *workload.Phase, count *int64) {
	cr := &credits{w: w, ch: ch, r: r, c: c, id: id, warps: warps, chunk: chunk, ph: ph, count: count,
		dc: w.credComms[c/workload.CtxsPerComm]}
	launch(g, name, 32, newLazyCoord(w, ctl, off, why, w.N, cr))
}

// anyWord is a warp's wait until any of several words changes
// (gpu.WaitAny for a group without a process): its lanes poll one word
// each every per, and once one moved the warp pays lat. The owner lists
// the words with add after reset; wait waits and continues at h.
type anyWord struct {
	aw       gpu.WaitAny
	regs     []*mem.Region
	offs     []uint64
	per, lat sim.Duration
	h        sim.Handler
	woke     bool
}

func newAnyWord(n int, per, lat sim.Duration) anyWord {
	return anyWord{regs: make([]*mem.Region, 0, n), offs: make([]uint64, 0, n), per: per, lat: lat}
}

func (a *anyWord) bind(t *gpu.Group) { a.aw = gpu.NewWaitAny(t) }

func (a *anyWord) reset() { a.regs, a.offs = a.regs[:0], a.offs[:0] }

func (a *anyWord) add(reg *mem.Region, off uint64) {
	a.regs, a.offs = append(a.regs, reg), append(a.offs, off)
}

// wait waits until one of the words changes, then continues at h.
func (a *anyWord) wait(h sim.Handler) {
	a.h, a.woke = h, false
	a.aw.WaitThen(a.regs, a.offs, a.per, a, 0)
}

// Handle implements sim.Handler.
func (a *anyWord) Handle(s *sim.Sim, _ uint64) {
	if !a.woke {
		a.woke = true
		a.aw.WaitDoneThen(a.regs, a.offs, a.lat, a, 0)
		return
	}
	a.h.Handle(s, 0)
}
