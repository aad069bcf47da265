package perftest

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// AllToAllOptions configures AllToAll.
type AllToAllOptions struct {
	// Topo is the cluster; every NIC port is one host of the all-to-all.
	Topo topo.Spec
	NIC  nic.Config // zero: nic.DefaultConfig()
	// Bytes is what every host writes to every other host: one RDMA
	// WRITE on the RC QP of the pair.
	Bytes int64
	MTU   int // path MTU; 0 means 4096
	// AckEvery, when positive, overrides NIC.AckReqEvery: the requester
	// asks for an ACK on every AckEvery-th packet (1: every packet, as
	// htsim's RoCE sender is ACKed).
	AckEvery int
	// PostCost is the CPU's time to build and post one WR; a host posts
	// its WRs back to back from time 0, destination (i+1)%N first.
	PostCost sim.Duration
	Seed     uint64
	// Parts, when positive, runs the all-to-all on a sim.World of Parts
	// partitions (the parallel kernel), node n of Topo on partition
	// n % Parts; Topo.Nodes gives one per node. 0 runs it on one Sim,
	// the sequential kernel and the reference.
	Parts int
	// Exec runs a World's partitions in each window (nil: sim.Serial;
	// a par.Pool's Exec runs them on several cores). The result depends
	// on Parts, never on Exec.
	Exec sim.Exec
	// SerialBelow is the World's SetSerialBelow (0: every window on
	// Exec); speed only.
	SerialBelow uint64
	// Sequential runs the World of Parts partitions on the sequential
	// kernel (sim.World.SetSequential): the same result, one event at a
	// time on the caller's goroutine.
	Sequential bool
	// Tracer, if set, sees every event (sim.Sim.SetTracer); on a World
	// it is set on every partition and must be safe for concurrent use
	// under a parallel Exec.
	Tracer sim.Tracer
	// Tap, if set, sees every packet a host's NIC hands to the network,
	// on the host's partition (under a parallel Exec, hosts of different
	// partitions at the same time).
	Tap func(host int, at sim.Time, p *fabric.Packet)
}

// AllToAllResult is what one all-to-all run did.
type AllToAllResult struct {
	Hosts, Flows int
	Switches     int
	Links        int
	// Events is the number of simulation events fired.
	Events uint64
	// Traversals is the number of packets put on a link, summed over
	// every link direction: packet-hops.
	Traversals uint64
	// DataPackets are request packets sent for the first time,
	// Retransmits those sent again, ACKs every ACK/NAK and CNPs the
	// congestion notifications.
	DataPackets, Retransmits, ACKs, CNPs uint64
	// Drops are packets discarded by switch buffers.
	Drops uint64
	// ECNMarks are packets marked CE.
	ECNMarks uint64
	// Completion is the simulated time of the last completion.
	Completion sim.Time
	// FCT holds every flow's completion time: from its WR being posted to
	// its CQE landing in the requester's host memory (after the last ACK).
	FCT []sim.Duration
	// Parts is the number of partitions the run had (1 on one Sim) and
	// Windows the lookahead windows a World ran (0 on one Sim).
	Parts   int
	Windows uint64
	// Ports holds every port's counters, by fabric.PortID.
	Ports []fabric.PortStats
}

func (o *AllToAllOptions) defaults() {
	if o.MTU == 0 {
		o.MTU = 4096
	}
	if o.PostCost == 0 {
		o.PostCost = 100 * sim.Nanosecond
	}
	if o.NIC == (nic.Config{}) {
		o.NIC = nic.DefaultConfig()
	}
	if o.AckEvery > 0 {
		o.NIC.AckReqEvery = o.AckEvery
	}
}

// a2aHost is one NIC port of the all-to-all.
type a2aHost struct {
	r     *a2aRun
	s     *sim.Sim
	part  *a2aPart
	id    int
	n     *nic.NIC
	cq    *nic.CQ
	qps   []*nic.QP // by peer offset 1..N-1 (index 0 unused)
	posts []sim.Time
	cqes  []nic.CQE
	poll  bool
}

type a2aRun struct {
	w     *sim.World // nil: one Sim
	hosts []*a2aHost
	res   *AllToAllResult
	parts []*a2aPart
}

// a2aPart is what the hosts of one partition count; the run adds the
// partitions up after every window (a World) or at the end.
type a2aPart struct {
	err              error
	done             int
	last             sim.Time // latest completion
	data, acks, cnps uint64
	_                [64]byte // partitions on separate cache lines
}

// WordChanged is the host CPU noticing a new CQE: it polls them all.
func (h *a2aHost) WordChanged(*mem.Region, uint64) {
	if h.poll {
		return
	}
	h.poll = true
	h.s.Post(h.s.Now(), h, 0)
}

// Handle polls h's CQ at the instant a CQE landed.
func (h *a2aHost) Handle(s *sim.Sim, _ uint64) {
	h.poll = false
	r, pt := h.r, h.part
	for {
		k := h.cq.Poll(h.cqes)
		if k == 0 {
			return
		}
		for _, c := range h.cqes[:k] {
			if c.Status != nic.StatusSuccess {
				if pt.err == nil {
					pt.err = fmt.Errorf("perftest: alltoall host %d WR %d: %v", h.id, c.WRID, c.Status)
				}
				s.Stop()
				return
			}
			off := int(c.WRID)
			r.res.FCT[h.id*(len(r.hosts)-1)+off-1] = s.Now().Sub(h.posts[off])
			pt.done++
			pt.last = s.Now()
		}
		// One Sim stops at the last completion; a World when its
		// partitions' counts add up (windowEnd).
		if r.w == nil && pt.done == r.res.Flows {
			s.Stop()
		}
	}
}

// AllToAll runs one all-to-all: every NIC port of the cluster writes
// o.Bytes to every other over its own RC QP, all at once, and the run ends
// when every WRITE has completed at its requester. Buffers are unbacked:
// only sizes move.
func AllToAll(o AllToAllOptions) (*AllToAllResult, error) {
	o.defaults()
	if o.Bytes < 1 || o.Bytes > 1<<31 {
		return nil, fmt.Errorf("perftest: alltoall bytes %d out of [1, 2^31]", o.Bytes)
	}
	if err := o.NIC.Validate(); err != nil {
		return nil, fmt.Errorf("perftest: %w", err)
	}
	if o.Parts < 0 {
		return nil, fmt.Errorf("perftest: alltoall partitions %d must not be negative", o.Parts)
	}
	cfg := sim.Config{Seed: o.Seed, StallLimit: -1}
	var (
		s   *sim.Sim
		w   *sim.World
		c   *topo.Cluster
		err error
	)
	if o.Parts == 0 {
		s = sim.New(cfg)
		if o.Tracer != nil {
			s.SetTracer(o.Tracer)
		}
		c, err = topo.Build(s, o.Topo)
	} else {
		if err := o.Topo.Validate(); err != nil {
			return nil, fmt.Errorf("perftest: %w", err)
		}
		w = sim.NewWorld(cfg, o.Parts, o.Topo.Lookahead())
		if o.Tracer != nil {
			for i := range o.Parts {
				w.Part(i).SetTracer(o.Tracer)
			}
		}
		w.SetExec(o.Exec)
		w.SetSerialBelow(o.SerialBelow)
		w.SetSequential(o.Sequential)
		c, err = topo.BuildWorld(w, o.Topo)
	}
	if err != nil {
		return nil, fmt.Errorf("perftest: %w", err)
	}
	N := c.Net.Endpoints()
	if N < 2 {
		return nil, fmt.Errorf("perftest: alltoall needs at least 2 NIC ports, the cluster has %d", N)
	}
	res := &AllToAllResult{Hosts: N, Flows: N * (N - 1), Switches: c.Net.Switches(), Links: c.Net.Links(),
		FCT: make([]sim.Duration, N*(N-1)), Parts: c.Net.Parts()}
	r := &a2aRun{w: w, res: res}
	// One memory system per partition: regions are allocated before the
	// run, and nothing observes them.
	mss := make([]*mem.System, c.Net.Parts())
	for i := range mss {
		r.parts = append(r.parts, &a2aPart{})
		if w != nil {
			mss[i] = mem.NewSystem(w.Part(i))
		} else {
			mss[i] = mem.NewSystem(s)
		}
	}
	size := uint64(o.Bytes)
	mrs := make([]*nic.MR, N)
	for i := range N {
		node, k := c.Locate(fabric.EndpointID(i))
		bus, host := c.PCIe(node), c.HostDev(node)
		ns := c.Sim(node)
		pt, ms := r.parts[c.Net.PartOf(fabric.EndpointID(i))], mss[c.Net.PartOf(fabric.EndpointID(i))]
		name := "n" + strconv.Itoa(node) + "/nic" + strconv.Itoa(k)
		n := nic.New(ns, o.NIC, name, c.Net, fabric.EndpointID(i), bus, c.NICDev(node, k))
		n.SetTap(func(p *fabric.Packet) {
			switch {
			case p.Hdr.Opcode.IsCNP():
				pt.cnps++
			case p.Hdr.Opcode.IsRequest():
				pt.data++
			default:
				pt.acks++
			}
			if o.Tap != nil {
				o.Tap(i, ns.Now(), p)
			}
		})
		h := &a2aHost{r: r, s: ns, part: pt, id: i, n: n, qps: make([]*nic.QP, N), posts: make([]sim.Time, N), cqes: make([]nic.CQE, 64)}
		loc := mem.Loc{Node: node, Kind: mem.Host}
		ring := ms.Alloc(name+"/cq", loc, sim.Bytes(N)*o.NIC.CQEBytes, false)
		if h.cq, err = n.CreateCQ(N, ring, host); err != nil {
			return nil, fmt.Errorf("perftest: %w", err)
		}
		for k := range N {
			r, off := h.cq.WordFor(uint64(k))
			r.Watch(off, h)
		}
		for off := 1; off < N; off++ {
			qp, err := n.CreateQP(nic.QPConfig{SendCQ: h.cq, RecvCQ: h.cq, SQDepth: 1, SQWhere: host})
			if err != nil {
				return nil, fmt.Errorf("perftest: %w", err)
			}
			h.qps[off] = qp
		}
		// One buffer: the source of every WRITE and, at offset
		// peer*Bytes, the destination of the peer's.
		buf := ms.Alloc(name+"/buf", loc, sim.Bytes(size*uint64(N)), false)
		if mrs[i], err = n.RegMR(buf, 0, size*uint64(N), 0x7f0000000000, nic.AccessLocalWrite|nic.AccessRemoteWrite, host, true); err != nil {
			return nil, fmt.Errorf("perftest: %w", err)
		}
		r.hosts = append(r.hosts, h)
	}
	for i, h := range r.hosts {
		for off := 1; off < N; off++ {
			j := (i + off) % N
			peer := r.hosts[j].qps[N-off] // j's QP towards i: offset (i-j) mod N
			if err := h.qps[off].Connect(fabric.EndpointID(j), peer.QPN(), RC(o.MTU, 14)); err != nil {
				return nil, fmt.Errorf("perftest: %w", err)
			}
		}
	}
	// The CPU of every host posts its WRs back to back; each doorbell
	// crosses PCIe to the NIC.
	for i, h := range r.hosts {
		node, _ := c.Locate(fabric.EndpointID(i))
		bus, host := c.PCIe(node), c.HostDev(node)
		s := h.s
		for off := 1; off < N; off++ {
			j := (i + off) % N
			wr := nic.WR{ID: uint64(off), Op: nic.WRWrite, Signaled: true,
				Local:    nic.SGE{MR: mrs[i], Len: size},
				RemoteVA: mrs[j].VA + uint64(i)*size, RKey: mrs[j].RKey}
			at := sim.Time(0).Add(sim.Duration(off) * o.PostCost)
			h.posts[off] = at
			qp := h.qps[off]
			s.At(at, func() {
				db := bus.Write(s.Now(), host, h.n.Dev(), 64)
				s.At(db, func() {
					if err := qp.PostSend([]nic.WR{wr}); err != nil && h.part.err == nil {
						h.part.err = err
						s.Stop()
					}
				})
			})
		}
	}
	var now sim.Time
	if w != nil {
		w.OnWindow(r.windowEnd)
		if err := w.Run(); err != nil {
			return nil, err
		}
		res.Events, res.Windows, now = w.Fired(), w.Windows(), w.Now()
	} else {
		if err := s.Run(); err != nil {
			return nil, err
		}
		res.Events, now = s.Fired(), s.Now()
	}
	done := 0
	for _, pt := range r.parts {
		if pt.err != nil {
			return nil, pt.err
		}
		done += pt.done
		res.Completion = max(res.Completion, pt.last)
		res.DataPackets += pt.data
		res.ACKs += pt.acks
		res.CNPs += pt.cnps
	}
	if done != res.Flows {
		return nil, fmt.Errorf("perftest: alltoall stopped with %d of %d flows complete at %v", done, res.Flows, now)
	}
	res.Ports = make([]fabric.PortStats, c.Net.Ports())
	for p := range c.Net.Ports() {
		st := c.Net.PortStats(fabric.PortID(p))
		res.Ports[p] = st
		res.Traversals += st.Packets
		res.Drops += st.Drops
		res.ECNMarks += st.ECNMarks
	}
	for i := range N {
		res.Retransmits += r.hosts[i].n.Stats().Retransmits
	}
	res.DataPackets -= res.Retransmits
	return res, nil
}

// windowEnd stops a World once every flow has completed or a partition
// failed (after every window, with no partition running).
func (r *a2aRun) windowEnd(sim.Time) {
	done := 0
	for _, pt := range r.parts {
		if pt.err != nil {
			return // the failing partition stopped the run
		}
		done += pt.done
	}
	if done == r.res.Flows {
		r.w.Part(0).Stop()
	}
}

// FCTStats summarises flow completion times.
type FCTStats struct {
	Min, Mean, P50, P99, Max sim.Duration
}

// Stats returns the FCT summary of r.
func (r *AllToAllResult) Stats() FCTStats {
	if len(r.FCT) == 0 {
		return FCTStats{}
	}
	d := slices.Clone(r.FCT)
	slices.Sort(d)
	var sum sim.Duration
	for _, v := range d {
		sum += v
	}
	q := func(p float64) sim.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return FCTStats{Min: d[0], Mean: sum / sim.Duration(len(d)), P50: q(0.5), P99: q(0.99), Max: d[len(d)-1]}
}
