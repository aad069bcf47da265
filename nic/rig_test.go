package nic

import (
	"fmt"
	"strings"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// rig is two nodes, each with a PCIe tree (host, one switch holding a NIC
// and a GPU), joined by a single switch; one RC QP pair connects them.
type rig struct {
	s     *sim.Sim
	net   *fabric.Network
	ms    *mem.System
	bus   [2]*pcie.Tree
	gpu   [2]pcie.DevID
	nic   [2]*NIC
	cq    [2]*CQ
	qp    [2]*QP
	mrs   map[string]*MR
	log   *strings.Builder
	quiet bool
}

type rigOpts struct {
	mtu                      int
	timeout, retry, rnrRetry uint8
	minRNR                   uint8
	backed                   bool
	sqDepth                  int
	cqDepth                  int
	maxDest                  int // responder MaxDestRdAtomic (0: default)
	cfg                      *Config
}

func newRig(seed uint64, o rigOpts) *rig {
	s := sim.New(sim.Config{Seed: seed, EventBudget: 50_000_000})
	r := &rig{s: s, ms: mem.NewSystem(s), mrs: map[string]*MR{}, log: &strings.Builder{}}
	r.net = fabric.NewSingleSwitch(s, 2, 400*sim.Gbps, 100*sim.Nanosecond)
	cfg := DefaultConfig()
	if o.cfg != nil {
		cfg = *o.cfg
	}
	if o.sqDepth == 0 {
		o.sqDepth = 256
	}
	if o.cqDepth == 0 {
		o.cqDepth = 1024
	}
	for i := range 2 {
		b := pcie.NewTree(s, pcie.DefaultConfig())
		sw := b.AddSwitch(fmt.Sprintf("node%d/sw0", i))
		nd := b.AddDevice(fmt.Sprintf("node%d/nic0", i), sw)
		r.gpu[i] = b.AddDevice(fmt.Sprintf("node%d/gpu0", i), sw)
		r.bus[i] = b
		n := New(s, cfg, fmt.Sprintf("nic%d", i), r.net, fabric.EndpointID(i), b, nd)
		r.nic[i] = n
		ring := r.ms.Alloc(fmt.Sprintf("cq%d", i), mem.Loc{Node: i, Kind: mem.HBM}, 64*1024, false)
		cq, err := n.CreateCQ(o.cqDepth, ring, r.gpu[i])
		if err != nil {
			panic(err)
		}
		r.cq[i] = cq
		sq := r.ms.Alloc(fmt.Sprintf("sq%d", i), mem.Loc{Node: i, Kind: mem.HBM}, sim.Bytes(o.sqDepth)*64, false)
		qp, err := n.CreateQP(QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: o.sqDepth, RQDepth: 64, SQRing: sq, SQWhere: r.gpu[i], MaxInline: MaxInlineData})
		if err != nil {
			panic(err)
		}
		r.qp[i] = qp
	}
	for i := range 2 {
		j := 1 - i
		must(r.qp[i].Modify(QPSInit, ModifyAttr{}))
		must(r.qp[i].Modify(QPSRTR, ModifyAttr{RemoteEP: fabric.EndpointID(j), RemoteQPN: r.qp[j].QPN(), RQPSN: 100 * uint32(j+1),
			MTU: o.mtu, MinRNRTimer: o.minRNR, MaxDestRdAtomic: o.maxDest}))
		must(r.qp[i].Modify(QPSRTS, ModifyAttr{SQPSN: 100 * uint32(i+1), Timeout: o.timeout, RetryCnt: o.retry, RNRRetry: o.rnrRetry}))
	}
	return r
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (r *rig) logf(format string, args ...any) {
	if r.quiet {
		return
	}
	fmt.Fprintf(r.log, "%-12v ", r.s.Now())
	fmt.Fprintf(r.log, format, args...)
	r.log.WriteByte('\n')
}

// trace installs the packet tap and memory observer that write the log.
func (r *rig) trace() {
	for i := range 2 {
		n := r.nic[i]
		n.SetTap(func(p *fabric.Packet) { r.logf("%s > %s", n.name, pktString(p)) })
	}
	bus := obs.NewBus(obs.Func(func(e obs.Event) {
		if e.Kind == obs.Rate {
			r.logf("%s rate %v rc=%v rt=%v", e.Who, RateEvent(e.Code), sim.BitRate(e.Value), sim.BitRate(e.Old))
		}
	}))
	for i := range 2 {
		r.nic[i].SetObserver(bus)
	}
	r.ms.SetObserver(obsFunc(func(e *mem.Effect) {
		for i := range 2 {
			if e.Region == r.cq[i].ring {
				idx := e.New - 1
				c, _ := r.cq[i].Entry(idx)
				r.logf("nic%d cqe #%d wrid=%d %v status=%q len=%d qpn=%#x imm=%#x idx=%d", i, idx, c.WRID, c.Opcode, c.Status.String(), c.ByteLen, c.QPN, c.Imm, c.WQEIndex)
				return
			}
		}
		switch e.Op {
		case mem.OpWrite:
			r.logf("mem %s write [%d,+%d) by %s", e.Region.Name(), e.Off, e.Len, e.Agent)
		default:
			r.logf("mem %s %v [%d] %#x -> %#x by %s", e.Region.Name(), e.Op, e.Off, e.Old, e.New, e.Agent)
		}
	}))
}

type obsFunc func(e *mem.Effect)

func (f obsFunc) Observe(e *mem.Effect) { f(e) }

func pktString(p *fabric.Packet) string {
	h := &p.Hdr
	var b strings.Builder
	if h.Opcode.IsCNP() {
		fmt.Fprintf(&b, "%s destqp=%#x", h.Opcode, h.DestQP)
		return b.String()
	}
	fmt.Fprintf(&b, "%s psn=%d", h.Opcode, h.PSN)
	if h.Opcode.HasPayload() {
		fmt.Fprintf(&b, " len=%d", p.PayloadLen)
	}
	if h.AckReq {
		b.WriteString(" ackreq")
	}
	if h.Opcode.HasRETH() {
		fmt.Fprintf(&b, " va=%#x rkey=%#x dmalen=%d", h.VA, h.RKey, h.DMALen)
	}
	if h.Opcode.HasAtomicETH() {
		fmt.Fprintf(&b, " va=%#x rkey=%#x swapadd=%#x cmp=%#x", h.VA, h.RKey, h.SwapAdd, h.Compare)
	}
	if h.Opcode.HasAETH() {
		fmt.Fprintf(&b, " [%s msn=%d]", roce.SyndromeString(h.Syndrome), h.MSN)
	}
	if h.Opcode.HasAtomicAckETH() {
		fmt.Fprintf(&b, " orig=%#x", h.OrigData)
	}
	if h.Opcode.HasImm() {
		fmt.Fprintf(&b, " imm=%#x", h.Imm)
	}
	return b.String()
}

func sim_Bytes(n uint64) sim.Bytes { return sim.Bytes(n) }
