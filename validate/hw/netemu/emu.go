package netemu

import (
	"errors"
	"fmt"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/nic/perftest"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// RingSlots is how many messages of one ordered rank pair may be in flight
// at once: the target memory of a pair is RingSlots slots of MaxBytes, and
// request Seq writes slot Seq mod RingSlots (the plugin's ring has 32).
const RingSlots = 256

// sqDepth is the send queue of each QP; posts beyond it wait for
// completions (a backlog in the emulator, as a full ring in the plugin).
const sqDepth = 128

// Options configures an Emulator.
type Options struct {
	Spec  machine.Spec // the cluster
	Ranks int          // ranks, one per node: GPU 0 of node r and its first NIC
	Loss  float64      // probability every link direction loses a packet
	Seed  uint64
	MTU   int // path MTU; 0 means 4096
	// IBTimeout is the QPs' local ACK timeout exponent (4.096 us *
	// 2^IBTimeout before a retransmission after a tail loss); 0 means 14
	// (67 ms; NCCL_IB_TIMEOUT's default, 20, is 4.3 s).
	IBTimeout uint8
}

// Delivery is a request the model has landed in the target's memory.
type Delivery struct {
	Src, Dst int
	Seq      uint64
	At       sim.Time
}

// Stats counts what an Emulator did.
type Stats struct {
	Requests    uint64 `json:"requests"`
	Delivered   uint64 `json:"delivered"`
	Late        uint64 `json:"late"`        // injected after their instant (at the simulation's now)
	Refused     uint64 `json:"refused"`     // bad ranks
	Retransmits uint64 `json:"retransmits"` // request packets sent again
	Drops       uint64 `json:"drops"`       // packets the network discarded (loss, full buffers)
	Backlogged  uint64 `json:"backlogged"`  // posts that waited for a send queue slot
	MaxLateNs   int64  `json:"max_late_ns"` // the latest injection, behind its instant
	Events      uint64 `json:"sim_events"`  // simulation events fired
	SimTimeNs   int64  `json:"sim_time_ns"` // the simulation's clock at the end
}

// Emulator is the model of the ranks' NICs and network.
type Emulator struct {
	s       *sim.Sim
	m       *machine.Machine
	ranks   int
	nics    []*nic.NIC // by rank
	pairs   []*pair    // src*ranks+dst
	byQPN   map[*nic.CQ]map[uint32]*pair
	cqs     []*nic.CQ
	cqes    []nic.CQE
	deliver func(Delivery)
	stats   Stats
	err     error
}

// pair is the RC QP of one ordered rank pair and its target slots.
type pair struct {
	e        *Emulator
	src, dst int
	qp       *nic.QP
	local    *nic.MR // the source's buffer
	remote   *nic.MR // the target's slots
	target   *mem.Region
	pending  map[uint64]uint64 // watched word offset -> Seq
	backlog  []nic.WR
	inflight int
}

// New builds the model: Options.Ranks nodes of Options.Spec, with a QP per
// ordered pair connected and ready. deliver is called, inside the
// simulation, at every delivery.
func New(o Options, deliver func(Delivery)) (*Emulator, error) {
	if o.Ranks < 2 {
		return nil, fmt.Errorf("netemu: %d ranks; want at least 2", o.Ranks)
	}
	if o.Loss < 0 || o.Loss >= 1 {
		return nil, fmt.Errorf("netemu: loss %g must be in [0, 1)", o.Loss)
	}
	if o.MTU == 0 {
		o.MTU = 4096
	}
	if o.IBTimeout == 0 {
		o.IBTimeout = 14
	}
	if o.IBTimeout > 31 {
		return nil, fmt.Errorf("netemu: IB timeout %d out of [1, 31]", o.IBTimeout)
	}
	s := sim.New(sim.Config{Seed: o.Seed, StallLimit: -1})
	m, err := machine.Build(s, o.Spec, o.Ranks)
	if err != nil {
		return nil, fmt.Errorf("netemu: %w", err)
	}
	if o.Loss > 0 {
		if err := m.Net.SetGlobalFaults(fabric.Faults{Loss: o.Loss}); err != nil {
			return nil, fmt.Errorf("netemu: %w", err)
		}
	}
	e := &Emulator{s: s, m: m, ranks: o.Ranks, pairs: make([]*pair, o.Ranks*o.Ranks),
		byQPN: map[*nic.CQ]map[uint32]*pair{}, cqes: make([]nic.CQE, 64), deliver: deliver}
	m.Net.SetDropHook(func(fabric.PortID, sim.Time, *fabric.Packet, fabric.DropReason) { e.stats.Drops++ })
	g := o.Spec.GPUsPerNode
	nics := make([]*nic.NIC, o.Ranks)
	e.nics = nics
	srcMR := make([]*nic.MR, o.Ranks)
	for r := range o.Ranks {
		rk := m.Rank(r * g)
		n := rk.NICs[0]
		nics[r] = n
		depth := sqDepth * o.Ranks
		ring := m.Mem.Alloc(fmt.Sprintf("r%d/cq", r), mem.Loc{Node: r, Kind: mem.Host}, sim.Bytes(depth)*m.Profile.NIC.CQEBytes, false)
		cq, err := n.CreateCQ(depth, ring, rk.Host)
		if err != nil {
			return nil, fmt.Errorf("netemu: %w", err)
		}
		e.cqs = append(e.cqs, cq)
		e.byQPN[cq] = map[uint32]*pair{}
		w := &cqWatch{e: e, cq: cq}
		for i := range depth {
			reg, off := cq.WordFor(uint64(i))
			reg.Watch(off, w)
		}
		buf := m.Mem.Alloc(fmt.Sprintf("r%d/src", r), mem.Loc{Node: r, Kind: mem.HBM}, MaxBytes, false)
		if srcMR[r], err = n.RegMR(buf, 0, MaxBytes, 0x7f0000000000, nic.AccessLocalWrite, m.Topo.GPUDev(r, 0), true); err != nil {
			return nil, fmt.Errorf("netemu: %w", err)
		}
	}
	for src := range o.Ranks {
		for dst := range o.Ranks {
			if src == dst {
				continue
			}
			n := nics[src]
			sq := m.Mem.Alloc(fmt.Sprintf("r%d/sq%d", src, dst), mem.Loc{Node: src, Kind: mem.Host}, sim.Bytes(sqDepth)*m.Profile.NIC.WQEBytes, false)
			cq := e.cqs[src]
			qp, err := n.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: sqDepth, RQDepth: 1, SQRing: sq,
				SQWhere: m.Rank(src * g).Host})
			if err != nil {
				return nil, fmt.Errorf("netemu: %w", err)
			}
			size := uint64(RingSlots * MaxBytes)
			tgt := m.Mem.Alloc(fmt.Sprintf("r%d/from%d", dst, src), mem.Loc{Node: dst, Kind: mem.HBM}, sim.Bytes(size), false)
			rmr, err := nics[dst].RegMR(tgt, 0, size, 0x7e0000000000+uint64(src)<<32, nic.AccessLocalWrite|nic.AccessRemoteWrite,
				m.Topo.GPUDev(dst, 0), true)
			if err != nil {
				return nil, fmt.Errorf("netemu: %w", err)
			}
			p := &pair{e: e, src: src, dst: dst, qp: qp, local: srcMR[src], remote: rmr, target: tgt, pending: map[uint64]uint64{}}
			e.pairs[src*o.Ranks+dst] = p
			e.byQPN[cq][qp.QPN()] = p
		}
	}
	for src := range o.Ranks {
		for dst := range o.Ranks {
			if src == dst {
				continue
			}
			a, b := e.pairs[src*o.Ranks+dst], e.pairs[dst*o.Ranks+src]
			if err := a.qp.Connect(m.Topo.Endpoint(dst, 0), b.qp.QPN(), perftest.RC(o.MTU, o.IBTimeout)); err != nil {
				return nil, fmt.Errorf("netemu: QP %d->%d: %w", src, dst, err)
			}
		}
	}
	return e, nil
}

// Now is the simulation's clock.
func (e *Emulator) Now() sim.Time { return e.s.Now() }

// Stats returns the counters so far.
func (e *Emulator) Stats() Stats {
	st := e.stats
	for _, n := range e.nics {
		st.Retransmits += n.Stats().Retransmits
	}
	st.Events = e.s.Fired()
	st.SimTimeNs = int64(e.s.Now() / sim.Time(sim.Nanosecond))
	return st
}

// ErrRank is returned by Inject for a rank out of range or src == dst.
var ErrRank = errors.New("netemu: bad rank")

// Inject posts r's WRITE at simulated time at, or at the simulation's now
// if at has passed (counted late). It must be called between runs.
func (e *Emulator) Inject(r Request, at sim.Time) error {
	e.stats.Requests++
	if int(r.Src) >= e.ranks || int(r.Dst) >= e.ranks || r.Src == r.Dst {
		e.stats.Refused++
		return fmt.Errorf("%w: %d -> %d of %d ranks", ErrRank, r.Src, r.Dst, e.ranks)
	}
	if r.Bytes < 1 || r.Bytes > MaxBytes {
		e.stats.Refused++
		return fmt.Errorf("netemu: %d bytes out of [1, %d]", r.Bytes, MaxBytes)
	}
	if now := e.s.Now(); at < now {
		e.stats.Late++
		e.stats.MaxLateNs = max(e.stats.MaxLateNs, int64(now.Sub(at)/sim.Nanosecond))
		at = now
	}
	p := e.pairs[int(r.Src)*e.ranks+int(r.Dst)]
	base := (r.Seq % RingSlots) * MaxBytes
	word := base + (r.Bytes-1)&^7
	wr := nic.WR{ID: r.Seq, Op: nic.WRWrite, Signaled: true, Local: nic.SGE{MR: p.local, Len: r.Bytes},
		RemoteVA: p.remote.VA + base, RKey: p.remote.RKey}
	e.s.At(at, func() {
		p.pending[word] = r.Seq
		p.target.Watch(word, p)
		db := e.nics[p.src].HostDoorbell(e.s.Now(), 1)
		e.s.At(db, func() { p.post(wr) })
	})
	return nil
}

// post hands wr to the NIC, or queues it while the send queue is full.
func (p *pair) post(wr nic.WR) {
	if p.inflight >= sqDepth || len(p.backlog) > 0 {
		p.e.stats.Backlogged++
		p.backlog = append(p.backlog, wr)
		return
	}
	p.inflight++
	if err := p.qp.PostSend([]nic.WR{wr}); err != nil {
		p.e.fail(fmt.Errorf("netemu: post %d -> %d seq %d: %w", p.src, p.dst, wr.ID, err))
	}
}

// WordChanged is the last word of a message landing at the target.
func (p *pair) WordChanged(r *mem.Region, off uint64) {
	seq, ok := p.pending[off]
	if !ok {
		return
	}
	delete(p.pending, off)
	r.Unwatch(off, p)
	p.e.stats.Delivered++
	if p.e.deliver != nil {
		p.e.deliver(Delivery{Src: p.src, Dst: p.dst, Seq: seq, At: p.e.s.Now()})
	}
}

// cqWatch polls a rank's CQ when a completion lands: it frees the send
// queue slots and posts the backlog.
type cqWatch struct {
	e    *Emulator
	cq   *nic.CQ
	busy bool
}

func (w *cqWatch) WordChanged(*mem.Region, uint64) {
	if w.busy {
		return
	}
	w.busy = true
	w.e.s.Post(w.e.s.Now(), w, 0)
}

func (w *cqWatch) Handle(s *sim.Sim, _ uint64) {
	w.busy = false
	e := w.e
	for {
		k := w.cq.Poll(e.cqes)
		if k == 0 {
			return
		}
		for _, c := range e.cqes[:k] {
			p := e.byQPN[w.cq][c.QPN]
			if c.Status != nic.StatusSuccess {
				e.fail(fmt.Errorf("netemu: WRITE %d -> %d seq %d: %v", p.src, p.dst, c.WRID, c.Status))
				return
			}
			p.inflight--
			for len(p.backlog) > 0 && p.inflight < sqDepth {
				wr := p.backlog[0]
				p.backlog = p.backlog[1:]
				p.inflight++
				if err := p.qp.PostSend([]nic.WR{wr}); err != nil {
					e.fail(fmt.Errorf("netemu: post %d -> %d seq %d: %w", p.src, p.dst, wr.ID, err))
					return
				}
			}
		}
	}
}

func (e *Emulator) fail(err error) {
	if e.err == nil {
		e.err = err
	}
	e.s.Stop()
}

// RunUntil fires every event up to t and leaves the clock at t (if later
// than now). It returns the model's first error.
func (e *Emulator) RunUntil(t sim.Time) error {
	if e.err != nil {
		return e.err
	}
	if err := e.s.RunUntil(t); err != nil {
		return err
	}
	return e.err
}

// Run fires every event to quiescence: the offline run.
func (e *Emulator) Run() error {
	if e.err != nil {
		return e.err
	}
	if err := e.s.Run(); err != nil {
		return err
	}
	return e.err
}
