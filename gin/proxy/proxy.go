package proxy

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/internal/ibwin"
	"github.com/ginsim/ginsim/gin/internal/submit"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Handles in GFDs: window w is handle w+1; the inline buffer has its own.
const (
	handleInline = 1 << 40
)

// slotState is the CPU's per-slot record (NCCL's states[]).
type slotState struct {
	op      uint16
	counter uint32
	posted  bool
	done    bool
	counted bool
}

// pendingPost is an ibv_post_send whose doorbell MMIO is crossing PCIe.
type pendingPost struct {
	wrs [2]nic.WR
	n   int
}

// channel is one (rank, context, peer) ring and its RC connection.
type channel struct {
	idx   int
	name  string
	rank  int
	ctx   int
	peer  int
	cs    *commState
	nic   *nic.NIC    // the context's GIN connection's NIC
	nk    int         // its index in the rank's nics
	ring  *mem.Region // host pinned, QueueSize GFD slots
	qp    *nic.QP
	cq    *nic.CQ
	sis   uint64        // CPU: next slot to look at
	cisSh uint64        // CPU: consumer index shadow
	st    []slotState   // by ring slot, grown as slots come into use (slot)
	posts []pendingPost // doorbells in flight, FIFO
	ph    int
	// Watch state while the thread is parked.
	wRing, wCQ bool
	wCQOff     uint64
	cqes       uint64 // signalled WRs posted (CQEs expected)
	seen       uint64 // CQEs consumed
	// ids holds, by ring slot, the observer id of the operation whose GFD
	// sits there: the GFD's id travels beside its bytes, as a WQE's
	// content does in gdaki (nil when nobody observes).
	ids []obs.OpID
}

// setID records the operation id of GFD i (ring of q slots). ids grows
// with the slots used, up to q, as st does: most (context, peer) rings
// of a large all-to-all carry a few GFDs.
func (ch *channel) setID(i, q uint64, id obs.OpID) {
	s := i & (q - 1)
	if s >= uint64(len(ch.ids)) {
		n := min(max(s+1, 2*uint64(len(ch.ids)), 4), q)
		ids := make([]obs.OpID, n)
		copy(ids, ch.ids)
		ch.ids = ids
	}
	ch.ids[s] = id
}

// idOf returns the operation id of GFD i (0 when none was recorded).
func (ch *channel) idOf(i, q uint64) obs.OpID {
	if s := i & (q - 1); s < uint64(len(ch.ids)) {
		return ch.ids[s]
	}
	return 0
}

// slot returns the CPU's record of GFD i, in ring slot i mod q. The
// records grow as the ring's slots come into use (in order, from 0): in
// an all-to-all most rings hold a few GFDs at a time, and a full set of
// records per (rank, context, peer) was most of the proxy's memory.
func (ch *channel) slot(i, q uint64) *slotState {
	k := i & (q - 1)
	if k >= uint64(len(ch.st)) {
		st := make([]slotState, min(max(2*uint64(len(ch.st)), k+1, 4), q))
		copy(st, ch.st)
		ch.st = st
	}
	return &ch.st[k]
}

// rankState is one rank's proxy resources in one device communicator.
type rankState struct {
	gpu *gpu.GPU
	// The GIN connections' NICs, as in gdaki: connection n uses local NIC
	// n modulo the rank's NICs; nics holds each once, slot[n] indexes it.
	nics    []*nic.NIC
	slot    []int
	srv     *Server
	pis     []*mem.Region // per context: pis[peer] words, GPU memory
	cis     []*mem.Region // per context: cis[peer] words (cpuVisible)
	sig     []*mem.Region // per context: signals, GPU memory
	sigOff  []*mem.Region // per context: signalOffsets (2.30)
	ctr     []*mem.Region // per context: counters (cpuVisible)
	sigMR   []*nic.MR     // per context, on its connection's NIC
	inl     *mem.Region   // inlines: one qword per slot of every ring
	inlMR   []*nic.MR     // per NIC
	sinkMR  []*nic.MR     // per NIC
	win     [][]*nic.MR   // per NIC, by window ID
	chans   []*channel    // [ctx*nranks+peer]
	lastGet []uint64
	visGet  []uint64        // lastGet values a self Flush GFD made visible
	flushMR map[int]*nic.MR // per NIC index: the 8-byte target of Flush GFDs' READs
}

type commState struct {
	dc           *gin.DevComm
	nranks, nctx int
	nconn        int // GIN connections: context c uses connection c mod nconn
	nsig, nctr   int
	ver          GFDVersion
	resetByOff   bool
	b            *Backend
	ranks        []rankState
}

// Backend is the proxy backend (gin.Backend). It owns one Server (CPU
// progress thread) per rank.
//
// Not safe for concurrent use.
//
// On a sim.World every rank's issuers, progress thread, counters and
// events belong to the rank's partition (lane), and the self connections
// are built at Connect (on a lone Sim on first use), so that no partition
// creates resources at run time.
type Backend struct {
	cfg    Config
	comms  []*commState
	chans  []*channel
	srvs   []*Server // by world rank of the first communicator that created it
	lanes  []*lane   // by partition
	events *obs.Bus  // nil: not observed
}

// lane is the backend's state of one partition of a sim.World (the one
// partition of a lone Sim): touched only by its partition's events.
type lane struct {
	free   submit.Free[issuer]
	st     gin.BackendStats
	events *obs.Bus // the partition's bus; nil: not observed
	// gfd and enc are the GPU side's encode scratch: a writer encodes
	// and stores a GFD in one step, and the stores copy the bytes.
	gfd [128]byte
	enc [16]uint64
}

// grow gives the backend a lane per partition of its ranks' World.
func (b *Backend) grow(c *gin.Comm) {
	for n := submit.Lanes(b.Name(), c, b.events); len(b.lanes) < n; {
		b.lanes = append(b.lanes, &lane{events: b.events.Part(len(b.lanes))})
	}
}

var _ gin.ThenBackend = (*Backend)(nil)

// New returns a proxy backend; cfg must Validate.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, lanes: []*lane{{}}}, nil
}

// Config returns the backend's parameters.
func (b *Backend) Config() Config { return b.cfg }

// SetObserver makes the backend emit its GPU-side and CPU-side steps into
// bus (nil: off): obs.Fence, CreditWait, Posted (GFD stored), Pickup,
// Doorbell (ibv_post_send), Consumed (poll_cq), ConsumerIndex and Counter,
// stamped with the operation's id; the WRs the thread posts carry the id
// to the NIC. Describe renders these events as text.
//
// On a sim.World bus is a split bus (obs.Split): each partition emits
// into its own.
func (b *Backend) SetObserver(bus *obs.Bus) {
	submit.CheckBus(b.Name(), bus, len(b.lanes))
	b.events = bus
	for i, ln := range b.lanes {
		ln.events = bus.Part(i)
	}
}

// Describe renders a proxy step event as the backend's golden timelines
// print it; ok is false for kinds the backend does not emit.
func Describe(e obs.Event) (what string, ok bool) {
	switch e.Kind {
	case obs.Fence:
		return "fence.release.sys", true
	case obs.CreditWait:
		return fmt.Sprintf("%s credit wait idx=%d ci=%d", e.Where, e.Index, e.Value), true
	case obs.Posted:
		return fmt.Sprintf("%s GFD #%d op=%#x size=%d stored (lands %v)", e.Where, e.Index, e.Code, e.Bytes, e.Then), true
	case obs.Pickup:
		return fmt.Sprintf("%s took GFD #%d op=%#x size=%d", e.Where, e.Index, e.Code, e.Bytes), true
	case obs.Doorbell:
		return fmt.Sprintf("%s ibv_post_send %d WR(s) for GFD #%d (doorbell arrives %v)", e.Where, e.Value, e.Index, e.Then), true
	case obs.Consumed:
		return fmt.Sprintf("%s poll_cq: CQE for GFD #%d", e.Where, e.Index), true
	case obs.ConsumerIndex:
		return fmt.Sprintf("%s ci=%d (GDRCopy store)", e.Where, e.Value), true
	case obs.Counter:
		return fmt.Sprintf("counter c%d[%d] = %d (GDRCopy read+store)", e.Code, e.Index, e.Value), true
	}
	return "", false
}

// emit sends e, at t's time and as t's agent, to the observer (call it
// under "if ln.events != nil").
func (ln *lane) emit(t *gpu.Group, e obs.Event) {
	e.At, e.Who = t.Now(), t.Agent()
	ln.events.Emit(e)
}

// Name implements gin.Backend.
func (b *Backend) Name() string { return "proxy" }

// Servers returns the progress threads, one per GPU process.
func (b *Backend) Servers() []*Server { return b.srvs }

// Stats implements gin.Backend; CPUBusy and CPUSpan sum over the threads.
func (b *Backend) Stats() gin.BackendStats {
	st := gin.BackendStats{Name: "proxy"}
	for _, ln := range b.lanes {
		st.AddCounts(ln.st)
	}
	for _, s := range b.srvs {
		ss := s.Stats()
		st.CPUBusy += ss.Busy
		st.CPUSpan += ss.Span
		st.Extra = append(st.Extra, gin.Stat{Name: s.name + "/passes", Value: int64(ss.Passes)},
			gin.Stat{Name: s.name + "/busy_ps", Value: int64(ss.Busy)},
			gin.Stat{Name: s.name + "/span_ps", Value: int64(ss.Span)})
	}
	return st
}

func (b *Backend) state(dc *gin.DevComm) *commState {
	for _, cs := range b.comms {
		if cs.dc == dc {
			return cs
		}
	}
	panic(fmt.Sprintf("proxy: device communicator %p was not connected", dc))
}

func (cs *commState) ch(rank, ctx, peer int) *channel {
	c := cs.ranks[rank].chans[ctx*cs.nranks+peer]
	if c == nil && peer == rank && cs.dc.Connected(rank, rank) {
		var err error
		if c, err = cs.b.selfChannel(cs, rank, ctx); err != nil {
			panic(fmt.Sprintf("proxy: building the self connection of rank %d on context %d: %v", rank, ctx, err))
		}
	}
	if c == nil {
		panic(fmt.Sprintf("proxy: no channel from rank %d to peer %d on context %d", rank, peer, ctx))
	}
	return c
}

// Connect implements gin.Backend (ncclGinProxyCreateContext): per rank and
// context the pis/cis/signal/counter arrays, per (context, peer) a GFD ring
// in host memory and an RC QP with its send queue and CQ in host memory,
// and the rank's progress thread.
// cpuVisible allocates memory that both the proxy thread and the GPU
// touch, as NCCL's allocMemCPUAccessible does: GPU memory behind a
// GDRCopy mapping with Config.GDRCopy, else pinned host memory.
func (b *Backend) cpuVisible(g *gpu.GPU, name string, size sim.Bytes) *mem.Region {
	if b.cfg.GDRCopy {
		return g.Alloc(name, size, true)
	}
	return g.AllocHost(name, size, true)
}

func (b *Backend) Connect(dc *gin.DevComm) error {
	c := dc.Comm()
	b.grow(c)
	prof := dc.Profile()
	cs := &commState{dc: dc, nranks: c.Size(), nctx: max(dc.CreatedContexts(), 1), nconn: max(dc.Connections(), 1), nsig: dc.SignalCount(),
		nctr: dc.CounterCount(), ver: GFDv1, resetByOff: prof.SignalResetByOffset, b: b}
	if prof.GFDSize == 128 {
		cs.ver = GFDv2
	}
	cs.ranks = make([]rankState, cs.nranks)
	q := b.cfg.QueueSize
	for r := range cs.ranks {
		rk := c.Rank(r)
		if len(rk.NICs) == 0 {
			return fmt.Errorf("proxy: rank %d has no NIC", r)
		}
		rs := &cs.ranks[r]
		rs.gpu = rk.GPU
		rs.nics, rs.slot = ibwin.Connections(rk.NICs, cs.nconn)
		rs.win = make([][]*nic.MR, len(rs.nics))
		g := rs.gpu
		host := g.Bus().Host()
		for ctx := range cs.nctx {
			pre := fmt.Sprintf("proxy/%sr%d/c%d/", dc.RegionTag(), r, ctx)
			rs.pis = append(rs.pis, g.Alloc(pre+"pis", sim.Bytes(8*cs.nranks), true))
			rs.cis = append(rs.cis, b.cpuVisible(g, pre+"cis", sim.Bytes(8*cs.nranks)))
			sig := g.Alloc(pre+"signals", sim.Bytes(8*max(cs.nsig, 1)), true)
			rs.sig = append(rs.sig, sig)
			rs.sigOff = append(rs.sigOff, g.Alloc(pre+"signalOffsets", sim.Bytes(8*max(cs.nsig, 1)), true))
			rs.ctr = append(rs.ctr, b.cpuVisible(g, pre+"counters", sim.Bytes(8*max(cs.nctr, 1))))
			n, _ := rs.nic(cs, ctx)
			mr, err := n.RegMR(sig, 0, uint64(sig.Size()), ibwin.VA(sig), ibwin.SigAccess, g.Dev(), true)
			if err != nil {
				return fmt.Errorf("proxy: signals of rank %d: %w", r, err)
			}
			rs.sigMR = append(rs.sigMR, mr)
		}
		rs.inl = g.AllocHost(fmt.Sprintf("proxy/r%d/inlines", r), sim.Bytes(8*q*cs.nctx*cs.nranks), true)
		sink := g.AllocHost(fmt.Sprintf("proxy/r%d/scratch", r), 8, true)
		for _, n := range rs.nics {
			inl, err := n.RegMR(rs.inl, 0, uint64(rs.inl.Size()), ibwin.VA(rs.inl), nic.AccessLocalWrite, host, false)
			if err != nil {
				return fmt.Errorf("proxy: inlines of rank %d: %w", r, err)
			}
			sk, err := n.RegMR(sink, 0, 8, ibwin.VA(sink), nic.AccessLocalWrite, host, false)
			if err != nil {
				return fmt.Errorf("proxy: scratchpad of rank %d: %w", r, err)
			}
			rs.inlMR, rs.sinkMR = append(rs.inlMR, inl), append(rs.sinkMR, sk)
		}
		rs.chans = make([]*channel, cs.nctx*cs.nranks)
		rs.lastGet = make([]uint64, cs.nctx*cs.nranks)
		rs.visGet = make([]uint64, cs.nctx*cs.nranks)
		rs.srv = b.server(rk.World, g)
	}
	for ctx := range cs.nctx {
		for r := range cs.nranks {
			for p := r + 1; p < cs.nranks; p++ {
				if !dc.Connected(r, p) {
					continue
				}
				a, err := b.newChannel(cs, r, ctx, p)
				if err != nil {
					return err
				}
				z, err := b.newChannel(cs, p, ctx, r)
				if err != nil {
					return err
				}
				if err := connect(a, z, b.cfg.AckTimeout); err != nil {
					return err
				}
			}
		}
	}
	b.comms = append(b.comms, cs)
	for r := range cs.ranks {
		cs.ranks[r].srv.add(cs, r)
	}
	if c.World() != nil {
		for ctx := range cs.nctx {
			for r := range cs.nranks {
				if dc.Connected(r, r) {
					if _, err := b.selfChannel(cs, r, ctx); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, w := range c.Windows() {
		if err := b.RegisterWindow(dc, w); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) server(world int, g *gpu.GPU) *Server {
	for _, s := range b.srvs {
		if s.gpu == g {
			return s
		}
	}
	s := newServer(b, fmt.Sprintf("cpu%d/proxy", world), g)
	if b.cfg.CPUPermille != nil {
		s.scale = b.cfg.CPUPermille(world)
	}
	b.srvs = append(b.srvs, s)
	return s
}

// selfChannel builds rank's loop-back connection on context ctx: a ring
// and an RC QP connected to a responder QP on the same NIC (NCCL's IB
// proxy connects fullSendComm[rank] to itself, net_ib/gin.cc@230
// L399-414), so self traffic goes through the NIC. It is built on the
// first self operation, not at Connect, so that runs without self traffic
// keep their QP numbers, memory layout and progress-pass costs. A parked
// progress thread is told to watch the new ring.
func (b *Backend) selfChannel(cs *commState, rank, ctx int) (*channel, error) {
	a, err := b.newChannel(cs, rank, ctx, rank)
	if err != nil {
		return nil, err
	}
	cs.ranks[rank].chans[ctx*cs.nranks+rank] = nil
	z, err := b.newChannel(cs, rank, ctx, rank)
	if err != nil {
		return nil, err
	}
	z.name += "/selfloop"
	cs.ranks[rank].chans[ctx*cs.nranks+rank] = a
	if err := connect(a, z, b.cfg.AckTimeout); err != nil {
		return nil, err
	}
	rs := &cs.ranks[rank]
	if rs.flushMR[a.nk] == nil { // the target of Flush GFDs' READs (2.30 get flush)
		r := rs.gpu.AllocHost(fmt.Sprintf("proxy/r%d/n%d/flush", rank, a.nk), 8, true)
		mr, err := a.nic.RegMR(r, 0, 8, ibwin.VA(r), nic.AccessLocalWrite|nic.AccessRemoteRead, rs.gpu.Bus().Host(), false)
		if err != nil {
			return nil, err
		}
		if rs.flushMR == nil {
			rs.flushMR = map[int]*nic.MR{}
		}
		rs.flushMR[a.nk] = mr
	}
	if s := cs.ranks[rank].srv; s.parked {
		s.watch(a.ring, 0)
	}
	return a, nil
}

func (b *Backend) newChannel(cs *commState, r, ctx, p int) (*channel, error) {
	rs := &cs.ranks[r]
	name := fmt.Sprintf("proxy/r%d/c%d/p%d", r, ctx, p)
	g := rs.gpu
	n, nk := rs.nic(cs, ctx)
	q := b.cfg.QueueSize
	host := g.Bus().Host()
	// The ring's content is read (the GFDs' qwords) but only the slots in
	// flight hold any: it keeps words, not bytes.
	ring := g.AllocHost(name+"/ring", sim.Bytes(q*cs.ver.Bytes()), false)
	ring.KeepWords()
	sq := g.AllocHost(name+"/sq", sim.Bytes(q)*2*n.Config().WQEBytes, false)
	cqr := g.AllocHost(name+"/cq", sim.Bytes(q)*n.Config().CQEBytes, false)
	cq, err := n.CreateCQ(q, cqr, host)
	if err != nil {
		return nil, fmt.Errorf("proxy: %s: %w", name, err)
	}
	qp, err := n.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: 2 * q, SQRing: sq, SQWhere: host, MaxInline: 8})
	if err != nil {
		return nil, fmt.Errorf("proxy: %s: %w", name, err)
	}
	ch := &channel{idx: len(b.chans), name: name, rank: r, ctx: ctx, peer: p, cs: cs, nic: n, nk: nk, ring: ring, qp: qp, cq: cq}
	b.chans = append(b.chans, ch)
	rs.chans[ctx*cs.nranks+p] = ch
	return ch, nil
}

// connect brings the two ends of an RC connection to RTS (NCCL's IB
// defaults: MTU 4096, timeout 20 unless Config.AckTimeout says, retry 7,
// RNR retry 7).
func connect(a, z *channel, timeout uint8) error {
	if timeout == 0 {
		timeout = 20
	}
	for _, x := range [2][2]*channel{{a, z}, {z, a}} {
		me, peer := x[0], x[1]
		ep := peer.nic.Endpoint()
		if err := me.qp.Connect(ep, peer.qp.QPN(),
			nic.ConnParams{MTU: 4096, MinRNRTimer: 12, Timeout: timeout, RetryCnt: 7, RNRRetry: 7}); err != nil {
			return fmt.Errorf("proxy: %s: %w", me.name, err)
		}
	}
	return nil
}

// RegisterWindow implements gin.Backend (regMrSym on every rank).
func (b *Backend) RegisterWindow(dc *gin.DevComm, w *gin.Window) error {
	cs := b.state(dc)
	return ibwin.Register("proxy", w, len(cs.ranks), func(r int) []ibwin.Rank {
		rs := &cs.ranks[r]
		out := make([]ibwin.Rank, len(rs.nics))
		for k, n := range rs.nics {
			out[k] = ibwin.Rank{NIC: n, Dev: rs.gpu.Dev(), MRs: &rs.win[k]}
		}
		return out
	})
}

// nic returns the NIC of context ctx's connection, and its index in nics.
func (rs *rankState) nic(cs *commState, ctx int) (*nic.NIC, int) {
	k := rs.slot[ctx%cs.nconn]
	return rs.nics[k], k
}

// mr returns rank's registration behind a GFD memory handle on the NIC of
// context ctx (nil for an unknown handle).
func (cs *commState) mr(rank, ctx int, handle uint64) *nic.MR {
	rs := &cs.ranks[rank]
	_, k := rs.nic(cs, ctx)
	if handle == handleInline {
		return rs.inlMR[k]
	}
	i := int(handle) - 1
	if i < 0 || i >= len(rs.win[k]) || rs.win[k][i] == nil {
		return nil
	}
	return rs.win[k][i]
}

// SignalWord implements gin.Backend.
func (b *Backend) SignalWord(dc *gin.DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return b.state(dc).ranks[rank].sig[ctx], 8 * uint64(id)
}

// CounterWord implements gin.Backend.
func (b *Backend) CounterWord(dc *gin.DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return b.state(dc).ranks[rank].ctr[ctx], 8 * uint64(id)
}

// ResetSignal implements gin.Backend: 2.30 (backend v2) records the current
// value in signalOffsets; 2.28 stores 0.
func (b *Backend) ResetSignal(t *gpu.Group, dc *gin.DevComm, rank, ctx, id int) gin.ResetStore {
	cs := b.state(dc)
	rs := &cs.ranks[rank]
	off := 8 * uint64(id)
	if cs.resetByOff {
		v := t.Load64(rs.sig[ctx], off)
		return gin.ResetStore{Landed: t.Store64(rs.sigOff[ctx], off, v), Offset: true, Value: v}
	}
	return gin.ResetStore{Landed: t.Store64(rs.sig[ctx], off, 0)}
}

// SignalOffset implements gin.Backend.
func (b *Backend) SignalOffset(dc *gin.DevComm, rank, ctx, id int) uint64 {
	cs := b.state(dc)
	if !cs.resetByOff {
		return 0
	}
	return cs.ranks[rank].sigOff[ctx].Load64(8 * uint64(id))
}

// Issue implements gin.Backend: build the GFD(s), claim slots, wait for
// credits and store them into the host ring.
func (b *Backend) Issue(t *gpu.Group, dc *gin.DevComm, rank int, op *gin.Op) {
	b.IssueThen(t, dc, rank, op, nil, 0)
}

// IssueThen implements gin.ThenBackend: Issue for a group without a
// process; h.Handle(s, arg) runs when Issue would have returned (h nil:
// Issue, the group's process waits).
func (b *Backend) IssueThen(t *gpu.Group, dc *gin.DevComm, rank int, op *gin.Op, h sim.Handler, arg uint64) {
	cs := b.state(dc)
	m := b.newIssuer(t, cs, rank)
	m.op, m.ch = op, cs.ch(rank, op.Ctx, op.Peer)
	m.Go(stIssue, h, arg)
}

// maxGFDBytes is the largest transfer of one GFD (1 GiB).
const maxGFDBytes = 1 << 30

// FlushAsync implements gin.Backend: snapshot pis[peer].
func (b *Backend) FlushAsync(t *gpu.Group, dc *gin.DevComm, rank, ctx, peer int) gin.Request {
	cs := b.state(dc)
	if cs.ranks[rank].chans[ctx*cs.nranks+peer] == nil {
		return gin.Request{Ctx: ctx, Peer: peer} // nothing was ever posted to this peer
	}
	ch := cs.ch(rank, ctx, peer)
	v := t.Load64(cs.ranks[rank].pis[ctx], 8*uint64(ch.peer))
	return gin.Request{Ctx: ctx, Peer: peer, Ticket: v}
}

// Wait implements gin.Backend: spin until cis[peer] has caught up with the
// snapshot.
func (b *Backend) Wait(t *gpu.Group, dc *gin.DevComm, rank int, r gin.Request) {
	m := b.newIssuer(t, b.state(dc), rank)
	m.ctx, m.peer, m.ticket = r.Ctx, r.Peer, r.Ticket
	m.Go(stWait, nil, 0)
}

// FlushThen implements gin.ThenBackend: FlushAsync to peer then Wait, for
// a group without a process; h.Handle(s, arg) runs when Wait would have
// returned.
func (b *Backend) FlushThen(t *gpu.Group, dc *gin.DevComm, rank, ctx, peer int, h sim.Handler, arg uint64) {
	cs := b.state(dc)
	m := b.newIssuer(t, cs, rank)
	m.ctx, m.peer = ctx, peer
	pc := stTicket
	if cs.ranks[rank].chans[ctx*cs.nranks+peer] == nil {
		pc = stWait // nothing is ever posted to it: FlushAsync's ticket is 0
	}
	m.Go(pc, h, arg)
}

// Handle is a doorbell MMIO of the CPU arriving at the NIC: the chain
// posted by the progress thread enters the send queue (arg: channel).
func (b *Backend) Handle(_ *sim.Sim, arg uint64) {
	ch := b.chans[arg]
	p := &ch.posts[ch.ph]
	if err := ch.qp.PostSend(p.wrs[:p.n]); err != nil {
		ch.cs.ranks[ch.rank].gpu.Sim().Fail(fmt.Errorf("proxy: %s: ibv_post_send: %w", ch.name, err))
	}
	*p = pendingPost{}
	ch.ph++
	if ch.ph == len(ch.posts) {
		ch.posts, ch.ph = ch.posts[:0], 0
	}
}

// EventName implements sim.Namer.
func (b *Backend) EventName(arg uint64) string {
	if int(arg) < len(b.chans) {
		return b.chans[arg].name + "/doorbell"
	}
	return "proxy/doorbell"
}
