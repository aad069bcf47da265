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
	// Tracer, if set, sees every event (sim.Sim.SetTracer).
	Tracer sim.Tracer
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
	id    int
	n     *nic.NIC
	cq    *nic.CQ
	qps   []*nic.QP // by peer offset 1..N-1 (index 0 unused)
	posts []sim.Time
	cqes  []nic.CQE
	poll  bool
}

type a2aRun struct {
	s     *sim.Sim
	hosts []*a2aHost
	res   *AllToAllResult
	err   error
	done  int
}

// WordChanged is the host CPU noticing a new CQE: it polls them all.
func (h *a2aHost) WordChanged(*mem.Region, uint64) {
	if h.poll {
		return
	}
	h.poll = true
	h.r.s.Post(h.r.s.Now(), h, 0)
}

// Handle polls h's CQ at the instant a CQE landed.
func (h *a2aHost) Handle(s *sim.Sim, _ uint64) {
	h.poll = false
	r := h.r
	for {
		k := h.cq.Poll(h.cqes)
		if k == 0 {
			return
		}
		for _, c := range h.cqes[:k] {
			if c.Status != nic.StatusSuccess {
				if r.err == nil {
					r.err = fmt.Errorf("perftest: alltoall host %d WR %d: %v", h.id, c.WRID, c.Status)
				}
				s.Stop()
				return
			}
			off := int(c.WRID)
			r.res.FCT[h.id*(len(r.hosts)-1)+off-1] = s.Now().Sub(h.posts[off])
			r.done++
		}
		if r.done == r.res.Flows {
			r.res.Completion = s.Now()
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
	s := sim.New(sim.Config{Seed: o.Seed, StallLimit: -1})
	if o.Tracer != nil {
		s.SetTracer(o.Tracer)
	}
	c, err := topo.Build(s, o.Topo)
	if err != nil {
		return nil, fmt.Errorf("perftest: %w", err)
	}
	N := c.Net.Endpoints()
	if N < 2 {
		return nil, fmt.Errorf("perftest: alltoall needs at least 2 NIC ports, the cluster has %d", N)
	}
	res := &AllToAllResult{Hosts: N, Flows: N * (N - 1), Switches: c.Net.Switches(), Links: c.Net.Links(),
		FCT: make([]sim.Duration, N*(N-1))}
	r := &a2aRun{s: s, res: res}
	ms := mem.NewSystem(s)
	size := uint64(o.Bytes)
	mrs := make([]*nic.MR, N)
	for i := range N {
		node, k := c.Locate(fabric.EndpointID(i))
		bus, host := c.PCIe(node), c.HostDev(node)
		name := "n" + strconv.Itoa(node) + "/nic" + strconv.Itoa(k)
		n := nic.New(s, o.NIC, name, c.Net, fabric.EndpointID(i), bus, c.NICDev(node, k))
		n.SetTap(func(p *fabric.Packet) {
			switch {
			case p.Hdr.Opcode.IsCNP():
				res.CNPs++
			case p.Hdr.Opcode.IsRequest():
				res.DataPackets++
			default:
				res.ACKs++
			}
		})
		h := &a2aHost{r: r, id: i, n: n, qps: make([]*nic.QP, N), posts: make([]sim.Time, N), cqes: make([]nic.CQE, 64)}
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
					if err := qp.PostSend([]nic.WR{wr}); err != nil && r.err == nil {
						r.err = err
						s.Stop()
					}
				})
			})
		}
	}
	if err := s.Run(); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.done != res.Flows {
		return nil, fmt.Errorf("perftest: alltoall stopped with %d of %d flows complete at %v", r.done, res.Flows, s.Now())
	}
	res.Events = s.Fired()
	for p := range c.Net.Ports() {
		st := c.Net.PortStats(fabric.PortID(p))
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
