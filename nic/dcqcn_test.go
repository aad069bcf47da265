package nic

import (
	"fmt"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// incastOpts configures an incast of senders to one receiver across one
// switch.
type incastOpts struct {
	senders int
	dcqcn   bool
	stagger sim.Duration // sender i starts at i*stagger
	run     sim.Duration // total simulated time
	warm    sim.Duration // measurements start here
	seed    uint64
	cc      *DCQCNConfig
	eager   bool                                 // DCQCN timers as events (as with a rate tap)
	tap     func(now sim.Time, p *fabric.Packet) // sees every packet every NIC sends
}

// incastResult holds what the incast measured in [warm, run).
type incastResult struct {
	drops, totalDrops uint64    // bottleneck drops in the window / in the whole run
	retrans           uint64    // request packets retransmitted (all senders, whole run)
	meanQ, p99Q, maxQ sim.Bytes // bottleneck egress backlog sampled every 100 ns in the window
	goodput           []float64 // per sender, Gb/s of completed WRITE payload in the window
	jain, util        float64
	cnps, cuts        uint64
	dead              int // sender QPs that went to the error state (retry counter exceeded)
	events            uint64
	rates             []sim.BitRate // each sender's current rate at the end
	ties              uint64        // NIC.ccTies, summed
}

func (r incastResult) String() string {
	return fmt.Sprintf("drops %d (whole run %d) retrans %d queue mean %d p99 %d max %d B, util %.3f, Jain %.3f, CNPs %d cuts %d, dead QPs %d, goodput %.2f Gb/s",
		r.drops, r.totalDrops, r.retrans, r.meanQ, r.p99Q, r.maxQ, r.util, r.jain, r.cnps, r.cuts, r.dead, r.goodput)
}

// Incast switch: 100 Gb/s ports, 512 KiB of buffer per egress port
// (shallow: ~42 us at line rate) and ECN marking from Kmin = 40 KiB.
const (
	incastRate = 100 * sim.Gbps
	incastKmin = 40 * sim.KiB
	incastKmax = 200 * sim.KiB
	incastBuf  = 512 * sim.KiB
	incastMsg  = 64 * 1024
)

func runIncast(t testing.TB, o incastOpts) incastResult {
	s := sim.New(sim.Config{Seed: o.seed, EventBudget: 200_000_000})
	net := fabric.New(s, fabric.Config{})
	sw := net.AddSwitch("sw", fabric.SwitchConfig{Latency: 300 * sim.Nanosecond, CutThrough: true, PortBuffer: incastBuf,
		ECN: fabric.ECNConfig{Enabled: true, Kmin: incastKmin, Kmax: incastKmax, Pmax: 0.2}})
	n := o.senders + 1
	var rxLink fabric.LinkID
	for i := range n {
		ep := net.AddEndpoint(fmt.Sprintf("ep%d", i))
		l, err := net.Connect(net.Node(ep), sw, fabric.LinkConfig{Rate: incastRate, Prop: 50 * sim.Nanosecond})
		must(err)
		if i == 0 {
			rxLink = l
		}
	}
	must(net.Build())
	_, bottleneck := net.LinkPorts(rxLink)
	cfg := DefaultConfig()
	cfg.DCQCN, cfg.ECT = o.dcqcn, true
	if o.cc != nil {
		cfg.CC = *o.cc
	}
	ms := mem.NewSystem(s)
	nics := make([]*NIC, n)
	cqs := make([]*CQ, n)
	for i := range n {
		b := pcie.NewTree(s, pcie.DefaultConfig())
		psw := b.AddSwitch("sw0")
		nd := b.AddDevice("nic0", psw)
		nics[i] = New(s, cfg, fmt.Sprintf("nic%d", i), net, fabric.EndpointID(i), b, nd)
		nics[i].setEagerCC(o.eager)
		if o.tap != nil {
			nics[i].SetTap(func(p *fabric.Packet) { o.tap(s.Now(), p) })
		}
		ring := ms.Alloc(fmt.Sprintf("cq%d", i), mem.Loc{Node: i, Kind: mem.Host}, 64*4096, false)
		cqs[i] = must2(nics[i].CreateCQ(4096, ring, b.Host()))
	}
	// Receiver: one QP and one MR per sender.
	dst := ms.Alloc("dst", mem.Loc{Node: 0, Kind: mem.Host}, incastMsg, false)
	dmr := must2(nics[0].RegMR(dst, 0, incastMsg, 0x10000, AccessRemoteWrite, 0, false))
	snd := make([]*QP, o.senders)
	var smr []*MR
	for i := 1; i < n; i++ {
		sq := ms.Alloc(fmt.Sprintf("sq%d", i), mem.Loc{Node: i, Kind: mem.Host}, 64*64, false)
		qs := must2(nics[i].CreateQP(QPConfig{SendCQ: cqs[i], RecvCQ: cqs[i], SQDepth: 64, SQRing: sq}))
		qr := must2(nics[0].CreateQP(QPConfig{SendCQ: cqs[0], RecvCQ: cqs[0], SQDepth: 4}))
		for _, c := range []struct {
			qp   *QP
			ep   int
			peer *QP
		}{{qs, 0, qr}, {qr, i, qs}} {
			must(c.qp.Modify(QPSInit, ModifyAttr{}))
			must(c.qp.Modify(QPSRTR, ModifyAttr{RemoteEP: fabric.EndpointID(c.ep), RemoteQPN: c.peer.QPN(), MTU: 4096}))
			must(c.qp.Modify(QPSRTS, ModifyAttr{Timeout: 8, RetryCnt: 7, RNRRetry: 7}))
		}
		src := ms.Alloc(fmt.Sprintf("src%d", i), mem.Loc{Node: i, Kind: mem.Host}, incastMsg, false)
		smr = append(smr, must2(nics[i].RegMR(src, 0, incastMsg, 0x20000, 0, 0, false)))
		snd[i-1] = qs
	}
	// Each sender keeps its send queue topped up with 64 KiB WRITEs (a
	// proxy reposting as completions come back), checked every 2 us.
	ok := make([]uint64, o.senders) // successful WRITE completions
	var cqe [64]CQE
	var tick func()
	tick = func() {
		now := s.Now()
		for i := range snd {
			for k := cqs[i+1].Poll(cqe[:]); k > 0; k = cqs[i+1].Poll(cqe[:]) {
				for _, c := range cqe[:k] {
					if c.Status == StatusSuccess {
						ok[i]++
					}
				}
			}
		}
		for i, qp := range snd {
			if now < sim.Time(i)*sim.Time(o.stagger) || qp.State() != QPSRTS {
				continue
			}
			var wrs []WR
			for k := qp.SQPosted() - qp.SQCompleted(); k < 32; k++ {
				wrs = append(wrs, WR{Op: WRWrite, Signaled: true, Local: SGE{MR: smr[i], Len: incastMsg}, RemoteVA: dmr.VA, RKey: dmr.RKey})
			}
			if len(wrs) > 0 {
				must(qp.PostSend(wrs))
			}
		}
		if now.Add(2*sim.Microsecond) < sim.Time(o.run) {
			s.At(now.Add(2*sim.Microsecond), tick)
		}
	}
	s.At(0, tick)
	// Sample the bottleneck queue.
	var qs []sim.Bytes
	var sample func()
	sample = func() {
		qs = append(qs, net.Backlog(bottleneck))
		if next := s.Now().Add(100 * sim.Nanosecond); next < sim.Time(o.run) {
			s.At(next, sample)
		}
	}
	var done0 []uint64
	var drops0 uint64
	s.At(sim.Time(o.warm), func() {
		done0 = append(done0, ok...)
		drops0 = net.PortStats(bottleneck).Drops
		sample()
	})
	if err := s.RunUntil(sim.Time(o.run)); err != nil {
		t.Fatal(err)
	}
	tick() // count the last completions
	var res incastResult
	st := net.PortStats(bottleneck)
	res.drops, res.totalDrops = st.Drops-drops0, st.Drops
	win := o.run - o.warm
	var sum, sum2 float64
	for i, qp := range snd {
		if qp.State() != QPSRTS {
			res.dead++
		}
		g := float64((ok[i]-done0[i])*incastMsg*8) / (float64(win) / float64(sim.Second)) / 1e9
		res.goodput = append(res.goodput, g)
		sum += g
		sum2 += g * g
		st := nics[i+1].Stats()
		res.retrans += st.Retransmits
		res.cuts += st.RateCuts
		rc, _, _ := qp.Rate()
		res.rates = append(res.rates, rc)
	}
	for _, nc := range nics {
		res.ties += nc.ccTies
	}
	res.events = s.Fired()
	res.cnps = nics[0].Stats().CNPsSent
	res.jain = sum * sum / (float64(len(snd)) * sum2)
	res.util = sum / (float64(incastRate) / 1e9)
	var qsum sim.Bytes
	for _, q := range qs {
		qsum += q
		res.maxQ = max(res.maxQ, q)
	}
	res.meanQ = qsum / sim.Bytes(len(qs))
	sorted := append([]sim.Bytes(nil), qs...)
	slices.Sort(sorted)
	res.p99Q = sorted[len(sorted)*99/100]
	return res
}

// TestDCQCNIncast runs 8 senders into one 100 Gb/s receiver port with a
// shallow buffer, with and without DCQCN, and checks what DCQCN is for:
// without it the queue overflows and go-back-N retransmits; with it, after
// convergence, the queue sits near Kmin, nothing is dropped, the link stays
// busy and the senders share it fairly.
func TestDCQCNIncast(t *testing.T) {
	for _, c := range []struct{ stagger, run sim.Duration }{
		{0, 12 * sim.Millisecond},
		// Senders joining 100 us apart: the late ones start at line rate
		// against flows already cut, and DCQCN with the paper's AI takes
		// ~20 ms to even the shares out.
		{100 * sim.Microsecond, 40 * sim.Millisecond},
	} {
		stagger := c.stagger
		base := incastOpts{senders: 8, stagger: stagger, run: c.run, warm: c.run / 2, seed: 1}
		off := base
		off.dcqcn = false
		on := base
		on.dcqcn = true
		ro, rn := runIncast(t, off), runIncast(t, on)
		t.Logf("stagger %v without DCQCN: %v", stagger, ro)
		t.Logf("stagger %v with DCQCN:    %v", stagger, rn)
		if ro.totalDrops < 10000 || ro.retrans < 10000 {
			t.Errorf("without DCQCN: %d drops, %d retransmissions; want many", ro.totalDrops, ro.retrans)
		}
		if rn.dead != 0 {
			t.Errorf("with DCQCN: %d sender QPs exceeded their retry counter", rn.dead)
		}
		if rn.drops != 0 {
			t.Errorf("with DCQCN: %d drops after convergence, want 0", rn.drops)
		}
		if rn.totalDrops*10 > ro.totalDrops {
			t.Errorf("with DCQCN: %d drops over the run, want under a tenth of %d", rn.totalDrops, ro.totalDrops)
		}
		if rn.meanQ > (incastKmin+incastKmax)/2 || rn.p99Q >= incastKmax {
			t.Errorf("with DCQCN: queue mean %d p99 %d B, want mean near Kmin %d and p99 below Kmax %d", rn.meanQ, rn.p99Q, incastKmin, incastKmax)
		}
		if rn.jain < 0.9 {
			t.Errorf("with DCQCN: Jain index %.3f, want >= 0.9 (goodput %.2f)", rn.jain, rn.goodput)
		}
		if rn.util < 0.85 {
			t.Errorf("with DCQCN: link utilisation %.3f, want >= 0.85", rn.util)
		}
		if rn.cnps == 0 || rn.cuts == 0 {
			t.Errorf("with DCQCN: %d CNPs sent, %d rate cuts", rn.cnps, rn.cuts)
		}
	}
}

// TestDCQCNConfigValidate checks that unusable DCQCN parameters are
// reported, and only when DCQCN is on.
func TestDCQCNConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*DCQCNConfig)
	}{
		{"zero alpha timer", func(c *DCQCNConfig) { c.AlphaTimer = 0 }},
		{"zero rate timer", func(c *DCQCNConfig) { c.RateTimer = 0 }},
		{"zero byte counter", func(c *DCQCNConfig) { c.ByteCounter = 0 }},
		{"alpha shift 0", func(c *DCQCNConfig) { c.AlphaShift = 0 }},
		{"alpha shift 17", func(c *DCQCNConfig) { c.AlphaShift = 17 }},
		{"negative CNP interval", func(c *DCQCNConfig) { c.CNPInterval = -1 }},
		{"zero min rate", func(c *DCQCNConfig) { c.MinRate = 0 }},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg.CC)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", c.name)
		}
		cfg.DCQCN = false
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s with DCQCN off: %v", c.name, err)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
}

// TestDCQCNIncastDeterminism runs the same incast twice with one seed and
// expects identical measurements.
func TestDCQCNIncastDeterminism(t *testing.T) {
	o := incastOpts{senders: 8, dcqcn: true, run: 3 * sim.Millisecond, warm: sim.Millisecond, seed: 7}
	a, b := runIncast(t, o), runIncast(t, o)
	if a.String() != b.String() || a.cnps == 0 {
		t.Errorf("two runs differ or saw no CNP:\n%v\n%v", a, b)
	}
}

// TestLazyDCQCNTimers checks that the lazy alpha and rate-increase timers
// give the run of the timer events: every packet of an incast sent at the
// same instant with the same header, the same cuts and the same rates at
// the end, with fewer events. Runs cover the defaults, senders joining
// late, unequal timer periods and a small byte counter (hyper increase).
func TestLazyDCQCNTimers(t *testing.T) {
	small := DefaultDCQCNConfig()
	small.ByteCounter, small.RateTimer, small.CNPInterval = 64*1024, 300*sim.Microsecond, 4*sim.Microsecond
	fast := DefaultDCQCNConfig()
	fast.RateTimer, fast.AlphaTimer = 7*sim.Microsecond, 70*sim.Microsecond
	for _, c := range []struct {
		name string
		o    incastOpts
	}{
		{"defaults", incastOpts{senders: 8, seed: 1}},
		{"staggered", incastOpts{senders: 6, stagger: 100 * sim.Microsecond, seed: 2}},
		{"byte counter", incastOpts{senders: 8, seed: 3, cc: &small}},
		{"fast rate timer", incastOpts{senders: 4, seed: 4, cc: &fast}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(eager bool) (incastResult, uint64, int) {
				o := c.o
				o.dcqcn, o.run, o.warm, o.eager = true, 3*sim.Millisecond, sim.Millisecond, eager
				h := fnv.New64a()
				pkts := 0
				o.tap = func(now sim.Time, p *fabric.Packet) {
					pkts++
					fmt.Fprintf(h, "%v %d>%d %v %d %d %d\n", now, p.Src, p.Dst, p.Hdr.Opcode, p.Hdr.PSN, p.Hdr.DestQP, p.PayloadLen)
				}
				r := runIncast(t, o)
				return r, h.Sum64(), pkts
			}
			e, eh, en := run(true)
			l, lh, ln := run(false)
			if e.cuts == 0 {
				t.Fatal("no rate cuts: the case does not exercise DCQCN")
			}
			if eh != lh || en != ln {
				t.Errorf("packets differ: eager %d (hash %#x), lazy %d (hash %#x)", en, eh, ln, lh)
			}
			if e.String() != l.String() || !slices.Equal(e.rates, l.rates) {
				t.Errorf("results differ:\neager %v rates %v\nlazy  %v rates %v", e, e.rates, l, l.rates)
			}
			if l.events >= e.events {
				t.Errorf("lazy timers fired %d events, eager %d", l.events, e.events)
			}
			t.Logf("%d packets, %d cuts; events eager %d, lazy %d; ties %d", en, e.cuts, e.events, l.events, l.ties)
		})
	}
}
