package proxy

import (
	"fmt"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Server is one GPU process's GIN progress thread ("NCCL GIN Progress"):
// a single CPU core that serves every device communicator and context of
// its rank in NCCL's loop. It is a sim process.
//
// Not safe for concurrent use.
type Server struct {
	b     *Backend
	ln    *lane // its GPU's partition's
	name  string
	gpu   *gpu.GPU
	p     *sim.Proc
	conns []connRef

	start   sim.Time
	scale   int64        // per mille of the listed CPU costs (Config.CPUPermille); 0: as listed
	busy    sim.Duration // CPU time on steps that did work
	poll    sim.Duration // CPU time polling without finding anything
	passes  uint64
	gfds    uint64
	posts   uint64
	cqes    uint64
	counter uint64

	parked    bool
	idleStart sim.Time
	period    sim.Duration
	watched   []watchRef
	// q is the thread's copy of the GFD it is reading: it sleeps between
	// qwords, so it must not share a buffer with the GPU-side writers.
	q [16]uint64
	// cqBuf receives ibv_poll_cq's completions (one channel at a time).
	cqBuf [4]nic.CQE
}

type connRef struct {
	cs   *commState
	rank int
}

type watchRef struct {
	r   *mem.Region
	off uint64
}

// ServerStats is a progress thread's accounting.
type ServerStats struct {
	// Busy is CPU time spent on steps that did work: reading and copying
	// GFDs, posting, reading CQEs, counter and ci updates.
	Busy sim.Duration
	// Poll is CPU time spent on passes that found nothing (the thread
	// still occupies its core: NCCL's loop never sleeps).
	Poll sim.Duration
	// Span is the time since the thread started.
	Span sim.Duration
	// Passes counts progress passes, idle ones included.
	Passes uint64
	// GFDs, Posts and CQEs count descriptors taken, ibv_post_send calls
	// and completions read; Counters counts counter increments.
	GFDs, Posts, CQEs, Counters uint64
}

// Utilisation is Busy/Span: the fraction of the core doing work.
func (s ServerStats) Utilisation() float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.Busy) / float64(s.Span)
}

func newServer(b *Backend, name string, g *gpu.GPU) *Server {
	s := &Server{b: b, ln: b.lanes[g.Sim().Part()], name: name, gpu: g}
	s.start = g.Sim().Now()
	s.p = g.Sim().Spawn(name, s.loop)
	return s
}

// Name returns the thread's name.
func (s *Server) Name() string { return s.name }

// Stats returns the thread's accounting so far.
func (s *Server) Stats() ServerStats {
	return ServerStats{Busy: s.busy, Poll: s.poll, Span: s.gpu.Sim().Now().Sub(s.start), Passes: s.passes,
		GFDs: s.gfds, Posts: s.posts, CQEs: s.cqes, Counters: s.counter}
}

func (s *Server) add(cs *commState, rank int) { s.conns = append(s.conns, connRef{cs, rank}) }

func (s *Server) work(d sim.Duration) {
	d = s.scaled(d)
	s.busy += d
	s.p.Sleep(d)
}

func (s *Server) spin(d sim.Duration) {
	d = s.scaled(d)
	s.poll += d
	s.p.Sleep(d)
}

// scaled applies the thread's CPU slowdown to a listed cost.
func (s *Server) scaled(d sim.Duration) sim.Duration {
	if s.scale <= 0 || s.scale == 1000 {
		return d
	}
	return d * sim.Duration(s.scale) / 1000
}

// emit sends e, now and as the thread, to the observer (call it under
// "if s.ln.events != nil").
func (s *Server) emit(e obs.Event) {
	e.At, e.Who = s.p.Now(), s.name
	s.ln.events.Emit(e)
}

// loop is ncclGinProgress: for every device communicator and context,
// a retire pass then a post pass; a yield between passes.
func (s *Server) loop(p *sim.Proc) {
	cfg := &s.b.cfg
	for {
		passStart := p.Now()
		worked := false
		for _, c := range s.conns {
			for ctx := range c.cs.nctx {
				s.spin(cfg.PassCost)
				if s.retire(c.cs, c.rank, ctx) {
					worked = true
				}
				if s.postPass(c.cs, c.rank, ctx) {
					worked = true
				}
			}
		}
		s.spin(cfg.YieldCost)
		s.passes++
		if !worked {
			s.idle(passStart)
		}
	}
}

// retire is pollCompletions: for each peer, test every seen but
// unconsumed slot, bump counters of completed ones, advance ci over the
// contiguous completed prefix.
func (s *Server) retire(cs *commState, rank, ctx int) bool {
	worked := false
	rs := &cs.ranks[rank]
	q := uint64(s.b.cfg.QueueSize)
	for peer := range cs.nranks {
		ch := rs.chans[ctx*cs.nranks+peer]
		if ch == nil {
			continue
		}
		for i := ch.cisSh; i < ch.sis; i++ {
			st := ch.slot(i, q)
			if !st.done && st.posted {
				if s.test(ch) {
					worked = true
				}
			}
			early := s.b.cfg.Mutations&MutCounterAtPost != 0 && st.posted
			if (st.done || early) && st.op&GFDWithCounter != 0 && !st.counted {
				s.bumpCounter(rs, ctx, st.counter, ch.idOf(i, q))
				st.counted = true
				worked = true
			}
			if st.done && i == ch.cisSh {
				ch.cisSh++
				*st = slotState{}
				s.cpuStore(rs.cis[ctx], 8*uint64(peer), ch.cisSh)
				if s.ln.events != nil {
					s.emit(obs.Event{Kind: obs.ConsumerIndex, Where: ch.name, Value: ch.cisSh})
				}
				worked = true
			}
		}
	}
	return worked
}

// test is rma.test: one ibv_poll_cq of up to 4 completions; every
// completion marks its slot done.
func (s *Server) test(ch *channel) bool {
	cfg := &s.b.cfg
	s.spin(cfg.PollCQCost)
	k := ch.cq.Poll(s.cqBuf[:])
	q := uint64(cfg.QueueSize)
	for _, e := range s.cqBuf[:k] {
		s.work(cfg.CQEReadCost)
		s.cqes++
		s.ln.st.CQEs++
		if e.Status != nic.StatusSuccess {
			s.gpu.Sim().Fail(fmt.Errorf("proxy: %s: t=%v: completion of GFD #%d: %v", ch.name, s.p.Now(), e.WRID, e.Status))
			s.p.Park("proxy: error completion")
		}
		ch.slot(e.WRID, q).done = true
		if s.ln.events != nil {
			s.emit(obs.Event{Kind: obs.Consumed, Op: e.OpID, Where: ch.name, Index: e.WRID})
		}
	}
	return k > 0
}

// cpuStore is the thread's store of v to a word of cpuVisible memory:
// through GDRCopy an uncached store whose write crosses PCIe to the GPU;
// else a cached store to host memory, there at once.
func (s *Server) cpuStore(r *mem.Region, off, v uint64) {
	if s.b.cfg.GDRCopy {
		s.work(s.b.cfg.GDRStoreIssue)
		s.gpu.HostStore64(s.p.Now(), r, off, v, s.name)
		return
	}
	s.work(s.b.cfg.HostStoreIssue)
	r.Store64(off, v, s.name)
}

// bumpCounter is the CPU's non-atomic counters[id] += 1: through GDRCopy
// an uncached PCIe read of GPU memory, then a posted store; else a cached
// read and store of host memory.
func (s *Server) bumpCounter(rs *rankState, ctx int, id uint32, op obs.OpID) {
	r, off := rs.ctr[ctx], 8*uint64(id)
	if s.b.cfg.GDRCopy {
		done := s.gpu.HostLoadTime(s.p.Now(), 8)
		s.work(done.Sub(s.p.Now()))
	} else {
		s.work(s.b.cfg.SlotCheckCost)
	}
	v := r.Load64(off)
	s.cpuStore(r, off, v+1)
	s.counter++
	if s.ln.events != nil {
		s.emit(obs.Event{Kind: obs.Counter, Op: op, Where: r.Name(), Addr: off, Value: v + 1, Old: v, Code: uint32(ctx), Index: uint64(id)})
	}
}

// postPass takes at most one GFD per peer and posts it.
func (s *Server) postPass(cs *commState, rank, ctx int) bool {
	cfg := &s.b.cfg
	worked := false
	rs := &cs.ranks[rank]
	q := uint64(cfg.QueueSize)
	n := cs.ver.Qwords()
	size := uint64(8 * n)
	for peer := range cs.nranks {
		ch := rs.chans[ctx*cs.nranks+peer]
		if ch == nil {
			continue
		}
		off := (ch.sis & (q - 1)) * size
		s.spin(cfg.SlotCheckCost)
		if ch.ring.Load64(off)&flag == 0 {
			continue
		}
		taken := s.p.Now()
		s.work(cfg.GFDLineCost * sim.Duration((size+63)/64))
		for k := 0; k < n; {
			if ch.ring.Load64(off+uint64(8*k))&flag == 0 {
				s.work(cfg.QwordFlagCost) // a later 16-byte store is still crossing PCIe
				continue
			}
			s.q[k] = ch.ring.Load64(off + uint64(8*k))
			s.work(cfg.QwordFlagCost)
			k++
		}
		ch.ring.Fill(off, size, 0, s.name)
		s.work(cfg.ZeroCost)
		g := Decode(cs.ver, s.q[:n])
		i := ch.sis
		ch.sis++
		*ch.slot(i, q) = slotState{op: g.Op, counter: g.CounterID}
		s.gfds++
		if s.ln.events != nil {
			s.emit(obs.Event{Kind: obs.Pickup, Op: ch.idOf(i, q), Where: ch.name, Index: i, Code: uint32(g.Op), Bytes: g.Size, Then: taken})
		}
		s.process(cs, ch, i, &g, taken)
		worked = true
	}
	return worked
}

// process is processGfd: the verbs chain of one GFD, posted with one
// ibv_post_send (only the last WR signalled) and a doorbell MMIO.
func (s *Server) process(cs *commState, ch *channel, i uint64, g *GFD, taken sim.Time) {
	cfg := &s.b.cfg
	rs, ps := &cs.ranks[ch.rank], &cs.ranks[ch.peer]
	var pp pendingPost
	bad := false
	mr := func(rank int, h uint64) *nic.MR {
		m := cs.mr(rank, ch.ctx, h)
		if m == nil {
			bad = true
			return rs.sinkMR[ch.nk]
		}
		return m
	}
	switch {
	case g.Op&GFDFlush != 0:
		f := rs.flushMR[ch.nk]
		pp.wrs[0] = nic.WR{Op: nic.WRRead, Local: nic.SGE{MR: rs.sinkMR[ch.nk], Len: 8}, RemoteVA: f.VA, RKey: f.RKey}
		pp.n = 1
	case g.Op&GFDGet != 0:
		l, r := mr(ch.rank, g.SrcHandle), mr(ch.peer, g.DstHandle)
		pp.wrs[0] = nic.WR{Op: nic.WRRead, Local: nic.SGE{MR: l, Off: g.SrcOff, Len: g.Size}, RemoteVA: r.VA + g.DstOff,
			RKey: r.RKey}
		pp.n = 1
	case g.Op&GFDVASignal != 0:
		r := mr(ch.peer, g.VASigHandle)
		pp.wrs[0] = nic.WR{Op: nic.WRFetchAdd, Local: nic.SGE{MR: rs.sinkMR[ch.nk], Len: 8}, RemoteVA: r.VA + g.VASigOff,
			RKey: r.RKey, CompareAdd: g.SignalVal}
		pp.n = 1
	default:
		sig := g.Op&(GFDWithSignalInc|GFDWithSignalAdd) != 0
		if g.Op&GFDPut != 0 && (g.Size > 0 || !sig) {
			r := mr(ch.peer, g.DstHandle)
			var local nic.SGE
			if g.Op&GFDWithInline != 0 {
				io := 8 * ((uint64(ch.ctx*cs.nranks+ch.peer))*uint64(cfg.QueueSize) + i&uint64(cfg.QueueSize-1))
				rs.inl.Store64(io, g.Inline, s.name)
				s.work(cfg.InlineCopyCost)
				local = nic.SGE{MR: rs.inlMR[ch.nk], Off: io, Len: g.Size}
			} else {
				local = nic.SGE{MR: mr(ch.rank, g.SrcHandle), Off: g.SrcOff, Len: g.Size}
			}
			pp.wrs[pp.n] = nic.WR{Op: nic.WRWrite, Local: local, RemoteVA: r.VA + g.DstOff, RKey: r.RKey}
			pp.n++
		}
		if sig {
			add := g.SignalVal
			if g.Op&GFDWithSignalInc != 0 {
				add = 1
			}
			smr := ps.sigMR[ch.ctx]
			pp.wrs[pp.n] = nic.WR{Op: nic.WRFetchAdd, Local: nic.SGE{MR: rs.sinkMR[ch.nk], Len: 8},
				RemoteVA: smr.VA + 8*uint64(g.SignalID), RKey: smr.RKey, CompareAdd: add}
			pp.n++
		}
	}
	if bad || pp.n == 0 {
		s.gpu.Sim().Fail(fmt.Errorf("proxy: %s: t=%v: GFD #%d (op %#x) names an unknown memory handle or no operation",
			ch.name, s.p.Now(), i, g.Op))
		s.p.Park("proxy: bad GFD")
	}
	if cfg.Mutations&MutAtomicFirst != 0 && pp.n == 2 {
		pp.wrs[0], pp.wrs[1] = pp.wrs[1], pp.wrs[0]
	}
	pp.wrs[pp.n-1].Signaled = true
	pp.wrs[pp.n-1].ID = i
	if id := ch.idOf(i, uint64(cfg.QueueSize)); id != 0 {
		for k := range pp.n {
			pp.wrs[k].OpID = id
		}
	}
	ch.slot(i, uint64(cfg.QueueSize)).posted = true
	if cfg.Mutations&MutCIAtPost != 0 {
		ch.slot(i, uint64(cfg.QueueSize)).done = true
	}
	s.work(cfg.PostSendBase + cfg.PostSendPerWR*sim.Duration(pp.n) + cfg.DoorbellIssue)
	arrive := ch.nic.HostDoorbell(s.p.Now(), pp.n)
	ch.posts = append(ch.posts, pp)
	s.gpu.Sim().Post(arrive, s.b, uint64(ch.idx))
	s.posts++
	s.ln.st.WQEs += uint64(pp.n)
	s.ln.st.Doorbells++
	if s.ln.events != nil {
		s.emit(obs.Event{Kind: obs.Doorbell, Op: ch.idOf(i, uint64(cfg.QueueSize)), Where: ch.name, Index: i, Value: uint64(pp.n), Then: arrive})
	}
}

// idle parks the thread after a pass that found nothing: until a GFD's
// first store lands in a ring slot it would check next, or the next CQE
// of a connection with outstanding work lands. It then resumes at the
// first pass boundary at or after that moment, as the busy loop would,
// and accounts the skipped passes as polling.
func (s *Server) idle(passStart sim.Time) {
	period := s.p.Now().Sub(passStart)
	q := uint64(s.b.cfg.QueueSize)
	for _, c := range s.conns {
		rs := &c.cs.ranks[c.rank]
		size := uint64(c.cs.ver.Bytes())
		for _, ch := range rs.chans {
			if ch == nil {
				continue
			}
			// Something that arrived while the pass was looking elsewhere
			// means the busy loop would find it on its next pass.
			if ch.ring.Load64((ch.sis&(q-1))*size)&flag != 0 ||
				(ch.cisSh < ch.sis && ch.cq.Landed() > ch.cq.Consumed()) {
				s.unwatch()
				return
			}
			s.watch(ch.ring, (ch.sis&(q-1))*size)
			if ch.cisSh < ch.sis {
				r, off := ch.cq.WordFor(ch.cq.Landed())
				s.watch(r, off)
			}
		}
	}
	s.parked, s.idleStart, s.period = true, passStart, period
	s.p.Park("proxy idle: no GFD and no completion")
}

func (s *Server) unwatch() {
	for _, w := range s.watched {
		w.r.Unwatch(w.off, s)
	}
	clear(s.watched)
	s.watched = s.watched[:0]
}

func (s *Server) watch(r *mem.Region, off uint64) {
	r.Watch(off, s)
	s.watched = append(s.watched, watchRef{r, off})
}

// WordChanged implements mem.Watcher: something the idle thread polls for
// has landed.
func (s *Server) WordChanged(*mem.Region, uint64) {
	if !s.parked {
		return
	}
	s.parked = false
	s.unwatch()
	now := s.p.Now()
	k := (now.Sub(s.idleStart) + s.period - 1) / s.period
	resume := s.idleStart.Add(k * s.period)
	// The parked pass was charged already; the k-1 passes after it found
	// nothing either.
	s.passes += uint64(k - 1)
	s.poll += (k - 1) * s.period
	s.p.WakeAt(resume)
}
