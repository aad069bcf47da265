package gdaki

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

// Word offsets of a channel's control block in GPU memory (the fields of
// DOCA's doca_gpu_dev_verbs_qp that device code touches).
const (
	offRsvd      = 0  // sq_rsvd_index: next WQE index to reserve
	offReady     = 8  // sq_ready_index: WQEs published in order
	offLock      = 16 // sq_lock
	offPI        = 24 // sq_wqe_pi: highest index doorbelled
	offDBR       = 32 // doorbell record (dbrec) the NIC reads on recovery
	offIssuedGet = 40 // last_issued_get
	offVisGet    = 48 // last_visible_get
	ctrlBytes    = 64
)

// channel is one (rank, context, peer) send path: a QP, its CQ, the SQ ring
// and the control block in the rank's GPU memory.
type channel struct {
	idx   int // index in Backend.chans (doorbell events)
	name  string
	qp    *nic.QP
	cq    *nic.CQ
	sq    *mem.Region
	ctrl  *mem.Region
	depth uint64
	dev   gpuDev
	comp  *channel // companion loopback channel (counters), or nil

	wqeBytes  uint64       // the NIC's WQE size
	atomicGPU sim.Duration // the GPU's device-scope atomic (sq_lock's atomicCAS)
	// ids holds, by SQ slot, the observer id of the operation whose WQE
	// sits there, so that a doorbell names every operation it covers (nil
	// when nobody observes).
	ids []obs.OpID
}

// gpuDev is where the channel's doorbells go.
type gpuDev struct{ nic *nic.NIC }

// rankState is one rank's GDAKI resources in one device communicator.
type rankState struct {
	gpu *gpu.GPU
	// The GIN connections' NICs: connection n uses local NIC n modulo the
	// rank's NICs (NCCL's localGinDevs[n % nLocalGinDevs]); nics holds
	// each NIC once, slot[n] is connection n's index in it.
	nics   []*nic.NIC
	slot   []int
	sig    []*mem.Region // per context: signals_table
	ctr    []*mem.Region // per context: counters_table
	sigMR  []*nic.MR     // per context, on its connection's NIC
	ctrMR  []*nic.MR
	sinkMR []*nic.MR   // per NIC
	win    [][]*nic.MR // per NIC, by window ID: this rank's registration of its region
	chans  []*channel  // [ctx*nranks+peer]; peer == rank: the self-loop, built on first use
}

// sink returns the sink MR (atomic results nobody reads) on context ctx's
// NIC.
func (rs *rankState) sink(cs *commState, ctx int) *nic.MR {
	_, k := rs.nic(cs, ctx)
	return rs.sinkMR[k]
}

// nic returns the NIC of context ctx's connection, and its index in nics.
func (rs *rankState) nic(cs *commState, ctx int) (*nic.NIC, int) {
	k := rs.slot[ctx%cs.nconn]
	return rs.nics[k], k
}

// commState is the backend's state for one DevComm.
type commState struct {
	dc           *gin.DevComm
	nranks, nctx int
	nconn        int // GIN connections: context c uses connection c mod nconn
	nsig, nctr   int
	depth        int
	ranks        []rankState
	built        int  // contexts [0, built) have their channels
	sealed       bool // on a World: nothing is built after Connect
	// qpns holds, per context not yet built, each NIC's first reserved
	// QP number.
	qpns []map[*nic.NIC]uint32
}

// Backend is the GDAKI backend. It implements gin.Backend and
// sim.Handler (doorbell arrivals at the NIC).
//
// Not safe for concurrent use.
//
// On a sim.World every rank's issuers, counters and events belong to the
// rank's partition (lane), and every QP a communicator can use is built
// at Connect: context by context, the self-loops after the last one (on a
// lone Sim contexts past the first, and self-loops, are built on first
// use), so that no partition creates resources at run time. Contexts past
// the requested GinContextCount are not built, only their QP numbers set
// aside.
type Backend struct {
	cfg    Config
	comms  []*commState
	chans  []*channel
	lanes  []*lane  // by partition
	events *obs.Bus // nil: not observed
}

// lane is the backend's state of one partition of a sim.World (the one
// partition of a lone Sim): touched only by its partition's events.
type lane struct {
	free submit.Free[issuer] // issuers not in use
	// wrs holds WR lists not in use. An issuer builds its op's WRs into
	// one and gives it back once the NIC has them: post blocks
	// (reservation atomic, credit poll, WQE stores, publication spin),
	// and other groups issuing meanwhile build into other lists. Kept
	// per partition, not per channel: a quarter of a million channels
	// each with a list of its own cost 60 MB at EP256.
	wrs    [][]nic.WR
	st     gin.BackendStats
	events *obs.Bus // the partition's bus; nil: not observed
}

// grow gives the backend a lane per partition of its ranks' World.
func (b *Backend) grow(c *gin.Comm) {
	for n := submit.Lanes(b.Name(), c, b.events); len(b.lanes) < n; {
		b.lanes = append(b.lanes, &lane{events: b.events.Part(len(b.lanes))})
	}
}

var _ gin.ThenBackend = (*Backend)(nil)

// New returns a GDAKI backend; cfg must Validate.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, lanes: []*lane{{}}}, nil
}

// Config returns the backend's parameters.
func (b *Backend) Config() Config { return b.cfg }

// SetObserver makes the backend emit its GPU-side steps into b (nil:
// off): obs.Fence, Reserved, Posted (WQEs published), Doorbell, Poll and
// Consumed, stamped with the operation's id; the WRs it builds carry the
// id to the NIC. Describe renders these events as text.
// On a sim.World bus is a split bus (obs.Split): each partition emits
// into its own.
func (b *Backend) SetObserver(bus *obs.Bus) {
	submit.CheckBus(b.Name(), bus, len(b.lanes))
	b.events = bus
	for i, ln := range b.lanes {
		ln.events = bus.Part(i)
	}
}

// emit sends e, at t's time and as t's agent, to the observer (call it
// under "if ln.events != nil").
//
//go:noinline
func (ln *lane) emit(t *gpu.Group, e obs.Event) {
	e.At, e.Who = t.Now(), t.Agent()
	ln.events.Emit(e)
}

// Describe renders a GDAKI step event as the backend's golden timelines
// print it; ok is false for kinds the backend does not emit.
func Describe(e obs.Event) (what string, ok bool) {
	switch e.Kind {
	case obs.Fence:
		return "fence.release.sys", true
	case obs.Reserved:
		return fmt.Sprintf("%s reserve [%d,%d]", e.Where, e.Index, e.Value), true
	case obs.Posted:
		return fmt.Sprintf("%s publish ready=%d", e.Where, e.Value), true
	case obs.Doorbell:
		return fmt.Sprintf("%s doorbell pi=%d (MMIO arrives %v)", e.Where, e.Value, e.Then), true
	case obs.Poll:
		return fmt.Sprintf("%s poll CQE %d (%s)", e.Where, e.Index, e.Note), true
	case obs.Consumed:
		return fmt.Sprintf("%s saw CQE %d", e.Where, e.Index), true
	}
	return "", false
}

// Name implements gin.Backend.
func (b *Backend) Name() string { return "gdaki" }

// Stats implements gin.Backend.
func (b *Backend) Stats() gin.BackendStats {
	st := gin.BackendStats{Name: "gdaki"}
	for _, ln := range b.lanes {
		st.AddCounts(ln.st)
	}
	return st
}

func (b *Backend) state(dc *gin.DevComm) *commState {
	for _, cs := range b.comms {
		if cs.dc == dc {
			return cs
		}
	}
	panic(fmt.Sprintf("gdaki: device communicator %p was not connected", dc))
}

func (b *Backend) ch(cs *commState, rank, ctx, peer int) *channel {
	if ctx >= cs.built && ctx < cs.nctx {
		if cs.sealed {
			panic(fmt.Sprintf("gdaki: context %d: on a sim.World only the %d requested contexts are built (GinContextCount)", ctx, cs.built))
		}
		if err := b.ensure(cs, ctx); err != nil {
			// Context 0 was built at Connect with the same parameters.
			panic(fmt.Sprintf("gdaki: building context %d: %v", ctx, err))
		}
	}
	c := cs.ranks[rank].chans[ctx*cs.nranks+peer]
	if c == nil && peer == rank && ctx < cs.built && cs.dc.Connected(rank, rank) {
		var err error
		if c, err = b.selfChannel(cs, rank, ctx); err != nil {
			panic(fmt.Sprintf("gdaki: building the self-loop of rank %d on context %d: %v", rank, ctx, err))
		}
	}
	if c == nil {
		panic(fmt.Sprintf("gdaki: no channel from rank %d to peer %d on context %d", rank, peer, ctx))
	}
	return c
}

// Connect implements gin.Backend: per rank and context a signal and a
// counter table in GPU memory (strictly ordered registrations), per (rank,
// context, peer) an RC QP connected to the peer's QP for this rank, its SQ
// and CQ rings in GPU memory, and with counters a loopback companion pair.
func (b *Backend) Connect(dc *gin.DevComm) error {
	c := dc.Comm()
	b.grow(c)
	cs := &commState{dc: dc, nranks: c.Size(), nctx: max(dc.CreatedContexts(), 1), nconn: max(dc.Connections(), 1),
		nsig: dc.SignalCount(), nctr: dc.CounterCount(), depth: b.cfg.QueueDepth}
	if q := dc.QueueDepth(); q > 0 {
		if q&(q-1) != 0 {
			return fmt.Errorf("gdaki: ginQueueDepth %d is not a power of two", q)
		}
		cs.depth = q
	}
	cs.ranks = make([]rankState, cs.nranks)
	for r := range cs.ranks {
		rk := c.Rank(r)
		if len(rk.NICs) == 0 {
			return fmt.Errorf("gdaki: rank %d has no NIC", r)
		}
		rs := &cs.ranks[r]
		rs.gpu = rk.GPU
		rs.nics, rs.slot = ibwin.Connections(rk.NICs, cs.nconn)
		rs.win = make([][]*nic.MR, len(rs.nics))
		dev := rs.gpu.Dev()
		for ctx := range cs.nctx {
			n, _ := rs.nic(cs, ctx)
			pre := fmt.Sprintf("gdaki/%sr%d/c%d/", dc.RegionTag(), r, ctx)
			sig := rs.gpu.Alloc(pre+"signals", sim.Bytes(8*max(cs.nsig, 1)), true)
			ctr := rs.gpu.Alloc(pre+"counters", sim.Bytes(8*max(cs.nctr, 1)), true)
			smr, err := n.RegMR(sig, 0, uint64(sig.Size()), ibwin.VA(sig), ibwin.SigAccess, dev, true)
			if err != nil {
				return fmt.Errorf("gdaki: signal table of rank %d: %w", r, err)
			}
			cmr, err := n.RegMR(ctr, 0, uint64(ctr.Size()), ibwin.VA(ctr), ibwin.SigAccess, dev, true)
			if err != nil {
				return fmt.Errorf("gdaki: counter table of rank %d: %w", r, err)
			}
			rs.sig, rs.ctr = append(rs.sig, sig), append(rs.ctr, ctr)
			rs.sigMR, rs.ctrMR = append(rs.sigMR, smr), append(rs.ctrMR, cmr)
		}
		sink := rs.gpu.Alloc(fmt.Sprintf("gdaki/r%d/sink", r), 8, true)
		for _, n := range rs.nics {
			mr, err := n.RegMR(sink, 0, 8, ibwin.VA(sink), nic.AccessLocalWrite, dev, false)
			if err != nil {
				return fmt.Errorf("gdaki: sink of rank %d: %w", r, err)
			}
			rs.sinkMR = append(rs.sinkMR, mr)
		}
		rs.chans = make([]*channel, cs.nctx*cs.nranks)
	}
	// Contexts are built in order; without counters only context 0 is
	// built now (so that a bad configuration fails here) and the others
	// when first used (ensure): an EP256 communicator with four contexts
	// has a quarter of a million QPs, most of them never used. NCCL
	// creates them all in ncclDevCommCreate; here a later context's QP
	// numbers are reserved now (below), so only its rings' addresses
	// depend on when it is built. Nothing times QP creation.
	//
	// On a World nothing may be built at run time, so the contexts a
	// handle may name are built now: the requested ones (a request of
	// one context gets four in 2.28 and 2.30 alike, which at EP512 is
	// three quarters of a million QPs never used). The others only set
	// their QP numbers aside, as on a lone Sim, and so do their
	// self-loops, at the numbers building them would take; a handle on
	// one of them panics (2.28 lets a kernel name a context past its
	// request: on a World, request it).
	upto := 1
	world := c.World() != nil
	switch {
	case cs.nctr > 0:
		upto = cs.nctx
	case world:
		upto = min(cs.nctx, max(dc.ContextCount(), 1))
		if req := dc.Requirements().GinContextCount; req > 0 {
			upto = min(upto, req)
		}
	}
	if err := b.ensure(cs, upto-1); err != nil {
		return err
	}
	cs.qpns = make([]map[*nic.NIC]uint32, cs.nctx)
	b.reserve(cs, upto)
	if world {
		cs.sealed = true
		for ctx := range cs.nctx {
			for r := range cs.nranks {
				if !dc.Connected(r, r) {
					continue
				}
				if ctx >= upto {
					n, _ := cs.ranks[r].nic(cs, ctx)
					n.ReserveQPNs(2) // the self-loop's pair
					continue
				}
				if _, err := b.selfChannel(cs, r, ctx); err != nil {
					return err
				}
			}
		}
	}
	b.comms = append(b.comms, cs)
	for _, w := range c.Windows() {
		if err := b.RegisterWindow(dc, w); err != nil {
			return err
		}
	}
	return nil
}

// reserve sets aside, context by context from context from on, the QP
// numbers that building the contexts now would take, for ensure to build
// them with later.
func (b *Backend) reserve(cs *commState, from int) {
	for ctx := from; ctx < cs.nctx; ctx++ {
		count := map[*nic.NIC]int{}
		var order []*nic.NIC
		cs.pairs(func(r, p int) {
			a, _ := cs.ranks[r].nic(cs, ctx)
			z, _ := cs.ranks[p].nic(cs, ctx)
			for _, n := range []*nic.NIC{a, z} {
				if count[n] == 0 {
					order = append(order, n)
				}
				count[n]++
			}
		})
		cs.qpns[ctx] = map[*nic.NIC]uint32{}
		for _, n := range order {
			cs.qpns[ctx][n] = n.ReserveQPNs(count[n])
		}
	}
}

// ensure builds contexts up to ctx: per pair of connected ranks an RC QP
// each, connected to the other, and with counters the loopback companion
// pairs of every channel of the context.
func (b *Backend) ensure(cs *commState, ctx int) error {
	for ; cs.built <= ctx; cs.built++ {
		if err := b.buildCtx(cs, cs.built); err != nil {
			return err
		}
	}
	return nil
}

// pairs calls f for every connected pair of ranks r < p, in the order
// their QPs are created.
func (cs *commState) pairs(f func(r, p int)) {
	for r := range cs.nranks {
		for p := r + 1; p < cs.nranks; p++ {
			if cs.dc.Connected(r, p) {
				f(r, p)
			}
		}
	}
}

func (b *Backend) buildCtx(cs *commState, ctx int) error {
	next := func(*nic.NIC) uint32 { return 0 }
	if ctx < len(cs.qpns) && cs.qpns[ctx] != nil {
		qpns := cs.qpns[ctx]
		cs.qpns[ctx] = nil
		next = func(n *nic.NIC) uint32 {
			q := qpns[n]
			qpns[n]++
			return q
		}
	}
	// RC connections: rank r's QP for peer p pairs with p's QP for r.
	var err error
	cs.pairs(func(r, p int) {
		if err != nil {
			return
		}
		var a, z *channel
		na, _ := cs.ranks[r].nic(cs, ctx)
		nz, _ := cs.ranks[p].nic(cs, ctx)
		if a, err = b.newChannel(cs, r, ctx, p, "", next(na)); err != nil {
			return
		}
		if z, err = b.newChannel(cs, p, ctx, r, "", next(nz)); err != nil {
			return
		}
		if err = b.connect(a, na, z, nz); err != nil {
			return
		}
		cs.ranks[r].chans[ctx*cs.nranks+p] = a
		cs.ranks[p].chans[ctx*cs.nranks+r] = z
	})
	if err != nil {
		return err
	}
	if cs.nctr == 0 || ctx < cs.nctx-1 {
		return nil
	}
	// With counters every context is built at Connect: the companions
	// come after the last context's channels, as NCCL creates them.
	for r := range cs.nranks {
		for i, ch := range cs.ranks[r].chans {
			if ch == nil {
				continue
			}
			ctx, p := i/cs.nranks, i%cs.nranks
			comp, err := b.newChannel(cs, r, ctx, p, "comp", 0)
			if err != nil {
				return err
			}
			// The loopback partner only responds; its SQ stays empty.
			back, err := b.newChannel(cs, r, ctx, p, "loop", 0)
			if err != nil {
				return err
			}
			n, _ := cs.ranks[r].nic(cs, ctx)
			if err := b.connect(comp, n, back, n); err != nil {
				return err
			}
			ch.comp = comp
		}
	}
	return nil
}

// selfChannel builds rank's loop-back channel on context ctx: a QP
// connected to a responder QP on the same NIC (NCCL's self-loop peer,
// gin_host_gdaki.cc@230 L474-483, L690-705), so self traffic goes through
// the NIC with the QP's credit, order and CQE behaviour, and with counters
// its companion pair. It is built on the first self operation, not at
// Connect, so that runs without self traffic keep their QP numbers and
// memory layout.
func (b *Backend) selfChannel(cs *commState, rank, ctx int) (*channel, error) {
	n, _ := cs.ranks[rank].nic(cs, ctx)
	a, err := b.newChannel(cs, rank, ctx, rank, "", 0)
	if err != nil {
		return nil, err
	}
	z, err := b.newChannel(cs, rank, ctx, rank, "selfloop", 0)
	if err != nil {
		return nil, err
	}
	if err := b.connect(a, n, z, n); err != nil {
		return nil, err
	}
	if cs.nctr > 0 {
		comp, err := b.newChannel(cs, rank, ctx, rank, "comp", 0)
		if err != nil {
			return nil, err
		}
		back, err := b.newChannel(cs, rank, ctx, rank, "loop", 0)
		if err != nil {
			return nil, err
		}
		if err := b.connect(comp, n, back, n); err != nil {
			return nil, err
		}
		a.comp = comp
	}
	cs.ranks[rank].chans[ctx*cs.nranks+rank] = a
	return a, nil
}

func (b *Backend) newChannel(cs *commState, r, ctx, p int, kind string, qpn uint32) (*channel, error) {
	rs := &cs.ranks[r]
	name := fmt.Sprintf("gdaki/r%d/c%d/p%d", r, ctx, p)
	if kind != "" {
		name += "/" + kind
	}
	n, _ := rs.nic(cs, ctx)
	wqe := n.Config().WQEBytes
	cqe := n.Config().CQEBytes
	sq := rs.gpu.Alloc(name+"/sq", sim.Bytes(cs.depth)*wqe, false)
	cqr := rs.gpu.Alloc(name+"/cq", sim.Bytes(cs.depth)*cqe, false)
	ctrl := rs.gpu.Alloc(name+"/ctrl", ctrlBytes, true)
	cq, err := n.CreateCQ(cs.depth, cqr, rs.gpu.Dev())
	if err != nil {
		return nil, fmt.Errorf("gdaki: %s: %w", name, err)
	}
	qp, err := n.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: cs.depth, SQRing: sq, SQWhere: rs.gpu.Dev(),
		MaxInline: 8, QPN: qpn})
	if err != nil {
		return nil, fmt.Errorf("gdaki: %s: %w", name, err)
	}
	ch := &channel{idx: len(b.chans), name: name, qp: qp, cq: cq, sq: sq, ctrl: ctrl, depth: uint64(cs.depth),
		dev: gpuDev{nic: n}, wqeBytes: uint64(wqe), atomicGPU: rs.gpu.Config().AtomicGPU}
	b.chans = append(b.chans, ch)
	return ch, nil
}

// connect brings two QPs to RTS against each other (NCCL's gdakiConnectQp
// attributes).
func (b *Backend) connect(a *channel, na *nic.NIC, z *channel, nz *nic.NIC) error {
	c := b.cfg
	for _, x := range []struct {
		ch   *channel
		peer *channel
		ep   *nic.NIC
	}{{a, z, nz}, {z, a, na}} {
		if err := x.ch.qp.Connect(x.ep.Endpoint(), x.peer.qp.QPN(), nic.ConnParams{MTU: c.MTU, MinRNRTimer: c.MinRNRTimer,
			Timeout: c.AckTimeout, RetryCnt: c.RetryCnt, RNRRetry: c.RNRRetry}); err != nil {
			return fmt.Errorf("gdaki: %s: %w", x.ch.name, err)
		}
	}
	return nil
}

// RegisterWindow implements gin.Backend: every rank registers its region
// of w with its NIC (the rkeys are what ncclCommWindowRegister
// all-gathers).
func (b *Backend) RegisterWindow(dc *gin.DevComm, w *gin.Window) error {
	cs := b.state(dc)
	return ibwin.Register("gdaki", w, len(cs.ranks), func(r int) []ibwin.Rank {
		rs := &cs.ranks[r]
		out := make([]ibwin.Rank, len(rs.nics))
		for k, n := range rs.nics {
			out[k] = ibwin.Rank{NIC: n, Dev: rs.gpu.Dev(), MRs: &rs.win[k]}
		}
		return out
	})
}

// winMR returns rank's registration of w on the NIC of context ctx.
func (cs *commState) winMR(rank, ctx int, w *gin.Window) *nic.MR {
	rs := &cs.ranks[rank]
	_, k := rs.nic(cs, ctx)
	if w == nil || w.ID() >= len(rs.win[k]) || rs.win[k][w.ID()] == nil {
		panic(fmt.Sprintf("gdaki: window %v not registered on rank %d", w, rank))
	}
	return rs.win[k][w.ID()]
}

// SignalWord implements gin.Backend.
func (b *Backend) SignalWord(dc *gin.DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return b.state(dc).ranks[rank].sig[ctx], 8 * uint64(id)
}

// CounterWord implements gin.Backend.
func (b *Backend) CounterWord(dc *gin.DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return b.state(dc).ranks[rank].ctr[ctx], 8 * uint64(id)
}

// ResetSignal implements gin.Backend: a GPU store of 0.
func (b *Backend) ResetSignal(t *gpu.Group, dc *gin.DevComm, rank, ctx, id int) gin.ResetStore {
	r, off := b.SignalWord(dc, rank, ctx, id)
	return gin.ResetStore{Landed: t.Store64(r, off, 0)}
}

// SignalOffset implements gin.Backend: GDAKI resets by storing 0.
func (b *Backend) SignalOffset(*gin.DevComm, int, int, int) uint64 { return 0 }

// Handle is a doorbell MMIO arriving at the NIC: arg is the channel index
// and the producer index it carries.
func (b *Backend) Handle(_ *sim.Sim, arg uint64) {
	b.chans[arg>>piBits].qp.Doorbell(arg & piMask)
}

const (
	piBits = 40
	piMask = 1<<piBits - 1
)

// EventName implements sim.Namer.
func (b *Backend) EventName(arg uint64) string {
	if i := int(arg >> piBits); i < len(b.chans) {
		return fmt.Sprintf("%s/doorbell pi=%d", b.chans[i].name, arg&piMask)
	}
	return "gdaki/doorbell"
}

// Issue implements gin.Backend: the submit path (issuer) with the group's
// process waiting.
func (b *Backend) Issue(t *gpu.Group, dc *gin.DevComm, rank int, op *gin.Op) {
	b.IssueThen(t, dc, rank, op, nil, 0)
}

// IssueThen implements gin.ThenBackend: Issue for a group without a
// process; h.Handle(s, arg) runs when Issue would have returned (h nil:
// Issue, the group's process waits).
func (b *Backend) IssueThen(t *gpu.Group, dc *gin.DevComm, rank int, op *gin.Op, h sim.Handler, arg uint64) {
	m := b.newIssuer(t, b.state(dc), rank)
	m.op = op
	m.Go(stIssue, h, arg)
}

// build appends op's WRs to *wrs (in place: addWR) and returns the
// channel they go on.
func (b *Backend) build(cs *commState, rank int, op *gin.Op, wrs *[]nic.WR) *channel {
	rs := &cs.ranks[rank]
	ch := b.ch(cs, rank, op.Ctx, op.Peer)
	ps := &cs.ranks[op.Peer]
	switch op.Kind {
	case gin.OpPut:
		src, dst := cs.winMR(rank, op.Ctx, op.Src), cs.winMR(op.Peer, op.Ctx, op.Dst)
		_, _, hasSig := gin.SignalOf(op.Remote)
		_, _, _, hasVA := gin.VASignalOf(op.Remote)
		if op.Bytes == 0 && (hasSig || hasVA) {
			// DOCA's put_signal with no data posts a NOP WQE, then the
			// ATOMIC (doca_gpunetio_dev_verbs_onesided.cuh as vendored
			// by NCCL; gin-semantics-review M8): 2 WQEs, 2 CQEs.
			addWR(wrs, nic.WRNop)
			break
		}
		for off := uint64(0); off < max(op.Bytes, 1); off += maxWQEBytes {
			n := min(op.Bytes-min(off, op.Bytes), maxWQEBytes)
			w := addWR(wrs, nic.WRWrite)
			w.Local = nic.SGE{MR: src, Off: op.SrcOff + off, Len: n}
			w.RemoteVA, w.RKey = dst.VA+op.DstOff+off, dst.RKey
		}
	case gin.OpPutValue:
		dst := cs.winMR(op.Peer, op.Ctx, op.Dst)
		w := addWR(wrs, nic.WRWrite)
		w.Inline, w.InlineData = true, op.Value
		w.Local = nic.SGE{Len: uint64(op.ValueSize)}
		w.RemoteVA, w.RKey = dst.VA+op.DstOff, dst.RKey
	case gin.OpSignal:
	case gin.OpGet:
		local, remote := cs.winMR(rank, op.Ctx, op.Dst), cs.winMR(op.Peer, op.Ctx, op.Src)
		for off := uint64(0); off < max(op.Bytes, 1); off += maxWQEBytes {
			n := min(op.Bytes-min(off, op.Bytes), maxWQEBytes)
			w := addWR(wrs, nic.WRRead)
			w.Local = nic.SGE{MR: local, Off: op.DstOff + off, Len: n}
			w.RemoteVA, w.RKey = remote.VA+op.SrcOff+off, remote.RKey
		}
	}
	if id, add, ok := gin.SignalOf(op.Remote); ok {
		smr := ps.sigMR[op.Ctx]
		w := addWR(wrs, nic.WRFetchAdd)
		w.CompareAdd, w.Local = add, nic.SGE{MR: rs.sink(cs, op.Ctx), Len: 8}
		w.RemoteVA, w.RKey = smr.VA+8*uint64(id), smr.RKey
	} else if win, off, add, ok := gin.VASignalOf(op.Remote); ok {
		mr := cs.winMR(op.Peer, op.Ctx, win)
		w := addWR(wrs, nic.WRFetchAdd)
		w.CompareAdd, w.Local = add, nic.SGE{MR: rs.sink(cs, op.Ctx), Len: 8}
		w.RemoteVA, w.RKey = mr.VA+off, mr.RKey
	}
	if op.ID != 0 {
		for i := range *wrs {
			(*wrs)[i].OpID = op.ID
		}
	}
	return ch
}

// wrList returns an empty WR list of the lane's, or nil (append
// allocates one).
func (ln *lane) wrList() []nic.WR {
	n := len(ln.wrs)
	if n == 0 {
		return nil
	}
	wrs := ln.wrs[n-1]
	ln.wrs = ln.wrs[:n-1]
	return wrs[:0]
}

// putWRs gives a list back to the lane once the NIC has its WRs (keeping
// as many as the lane keeps issuers).
func (ln *lane) putWRs(wrs []nic.WR) {
	if cap(wrs) > 0 && len(ln.wrs) < submit.FreeCap {
		ln.wrs = append(ln.wrs, wrs[:0])
	}
}

// addWR appends a signaled WR of opcode op to *wrs and returns it for the
// caller to fill.
func addWR(wrs *[]nic.WR, op nic.WROpcode) *nic.WR {
	*wrs = append(*wrs, nic.WR{})
	w := &(*wrs)[len(*wrs)-1]
	w.Op, w.Signaled = op, true
	return w
}

// sharingScope is the scope of the index atomics for a resource-sharing
// mode: device for GPU-wide sharing, block for CTA, thread for a private
// context.
func sharingScope(s gin.Sharing) gpu.Scope {
	switch s {
	case gin.SharingThread:
		return gpu.ScopeThread
	case gin.SharingCTA:
		return gpu.ScopeBlock
	}
	return gpu.ScopeDevice
}

// FlushAsync implements gin.Backend: snapshot sq_rsvd_index, or post a NOP
// (DOCA's DUMP WQE) when gets are outstanding and wait for its CQE.
func (b *Backend) FlushAsync(t *gpu.Group, dc *gin.DevComm, rank, ctx, peer int) gin.Request {
	cs := b.state(dc)
	if ctx >= cs.built || cs.ranks[rank].chans[ctx*cs.nranks+peer] == nil {
		return gin.Request{Ctx: ctx, Peer: peer} // nothing was ever posted to this peer
	}
	ch := b.ch(cs, rank, ctx, peer)
	if ch.ctrl.Load64(offIssuedGet) > ch.ctrl.Load64(offVisGet) {
		m := b.newIssuer(t, cs, rank)
		m.ch = ch
		m.Go(stFlushNop, nil, 0)
		return gin.Request{Ctx: ctx, Peer: peer, Ticket: m.ticket}
	}
	return gin.Request{Ctx: ctx, Peer: peer, Ticket: t.Load64(ch.ctrl, offRsvd)}
}

// FlushThen implements gin.ThenBackend: FlushAsync to peer then Wait, for
// a group without a process; h.Handle(s, arg) runs when Wait would have
// returned.
func (b *Backend) FlushThen(t *gpu.Group, dc *gin.DevComm, rank, ctx, peer int, h sim.Handler, arg uint64) {
	cs := b.state(dc)
	if ctx >= cs.built || cs.ranks[rank].chans[ctx*cs.nranks+peer] == nil {
		h.Handle(t.GPU().Sim(), arg) // no ticket: Wait returns at once
		return
	}
	f := &flushThen{b: b, t: t, cs: cs, rank: rank, ch: b.ch(cs, rank, ctx, peer), k: h, karg: arg}
	if f.ch.ctrl.Load64(offIssuedGet) > f.ch.ctrl.Load64(offVisGet) {
		m := b.newIssuer(t, cs, rank)
		m.ch = f.ch
		f.nop = m
		m.Go(stFlushNop, f, flushNopDone)
		return
	}
	t.Load64Then(f.ch.ctrl, offRsvd, f, flushLoaded)
}

// flushThen is FlushThen between FlushAsync and Wait.
type flushThen struct {
	b    *Backend
	t    *gpu.Group
	cs   *commState
	rank int
	ch   *channel
	nop  *issuer // the NOP's issuer (back on the free list, not yet reused)
	k    sim.Handler
	karg uint64
}

const (
	flushNopDone = iota
	flushLoaded
)

// Handle implements sim.Handler: FlushAsync is done (its NOP rung, or
// sq_rsvd_index loaded); Wait on its ticket.
func (f *flushThen) Handle(s *sim.Sim, arg uint64) {
	var ticket uint64
	if arg == flushNopDone {
		ticket = f.nop.ticket
	} else {
		ticket = f.t.Result()
	}
	if ticket == 0 {
		f.k.Handle(s, f.karg)
		return
	}
	m := f.b.newIssuer(f.t, f.cs, f.rank)
	m.ch, m.ticket = f.ch, ticket
	m.Go(stWait, f.k, f.karg)
}

// Wait implements gin.Backend: poll the CQ until the CQE of the request's
// last WQE has landed.
func (b *Backend) Wait(t *gpu.Group, dc *gin.DevComm, rank int, r gin.Request) {
	if r.Ticket == 0 {
		return
	}
	cs := b.state(dc)
	m := b.newIssuer(t, cs, rank)
	m.ch, m.ticket = b.ch(cs, rank, r.Ctx, r.Peer), r.Ticket
	m.Go(stWait, nil, 0)
}
