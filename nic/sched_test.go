package nic

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// crowdCase is one configuration of the crowded transmit scheduler test.
type crowdCase struct {
	seed      uint64
	qps       int // hub QPs, spread over the peers
	peers     int
	readAhead int
	arb       TxArbitration
	mtu       int
	blueFlame bool
	markPct   int // percent of packets each NIC receives marked CE (DCQCN on when > 0)
	lossPct   int // percent of packets each NIC receives lost
}

func (c crowdCase) String() string {
	return fmt.Sprintf("seed=%d qps=%d peers=%d readahead=%d arb=%d mtu=%d bf=%v mark=%d%% loss=%d%%",
		c.seed, c.qps, c.peers, c.readAhead, c.arb, c.mtu, c.blueFlame, c.markPct, c.lossPct)
}

// crowdResult is what a crowded run sent and how crowded its scheduler got.
type crowdResult struct {
	log     []string // every packet the hub sent: time, destination, QP, opcode, PSN, length
	packets int      // packets sent by every NIC
	digest  uint64   // FNV-64a of every NIC's sends, in order
	dups    int      // packets sent while a hub QP held two places on the active list
	waits   int      // packets sent while hub QPs waited for the read budget
	peakAct int      // most active QPs seen on the hub
}

// runCrowd runs one hub NIC with c.qps QPs to c.peers peer NICs on a
// single switch: every hub QP posts a random mix of WRITEs (some inline,
// some fenced), READs, FETCH_ADDs and NOPs in bursts over 3 us, and every
// peer QP posts WRITEs and READs to the hub, so the hub's scheduler
// arbitrates between hundreds of requests and responses under a small read
// budget. It checks that every WR completes successfully and returns the
// sends.
func runCrowd(t *testing.T, c crowdCase) crowdResult {
	t.Helper()
	s := sim.New(sim.Config{Seed: c.seed, EventBudget: 50_000_000})
	net := fabric.NewSingleSwitch(s, c.peers+1, 400*sim.Gbps, 100*sim.Nanosecond)
	ms := mem.NewSystem(s)
	cfg := DefaultConfig()
	cfg.ReadAhead, cfg.TxArb, cfg.BlueFlame = c.readAhead, c.arb, c.blueFlame
	cfg.DCQCN = c.markPct > 0
	nodes := c.peers + 1
	nics := make([]*NIC, nodes)
	gpus := make([]pcie.DevID, nodes)
	cqs := make([]*CQ, nodes)
	srcs := make([]*MR, nodes)
	dsts := make([]*MR, nodes)
	ress := make([]*MR, nodes)
	const cqDepth, regionLen = 8192, 1 << 18
	var res crowdResult
	h := fnv.New64a()
	rnd := sim.NewRand(c.seed, "nic-test/crowd")
	for i := range nodes {
		b := pcie.NewTree(s, pcie.DefaultConfig())
		sw := b.AddSwitch(fmt.Sprintf("node%d/sw0", i))
		nd := b.AddDevice(fmt.Sprintf("node%d/nic0", i), sw)
		gpus[i] = b.AddDevice(fmt.Sprintf("node%d/gpu0", i), sw)
		n := New(s, cfg, fmt.Sprintf("nic%d", i), net, fabric.EndpointID(i), b, nd)
		nics[i] = n
		ring := ms.Alloc(fmt.Sprintf("cq%d", i), mem.Loc{Node: i, Kind: mem.HBM}, cqDepth*64, false)
		cqs[i] = must2(n.CreateCQ(cqDepth, ring, gpus[i]))
		src := ms.Alloc(fmt.Sprintf("src%d", i), mem.Loc{Node: i, Kind: mem.HBM}, regionLen, false)
		dst := ms.Alloc(fmt.Sprintf("dst%d", i), mem.Loc{Node: i, Kind: mem.HBM}, regionLen, false)
		r := ms.Alloc(fmt.Sprintf("res%d", i), mem.Loc{Node: i, Kind: mem.Host}, regionLen, false)
		srcs[i] = must2(n.RegMR(src, 0, regionLen, 0x1000000, 0, gpus[i], true))
		dsts[i] = must2(n.RegMR(dst, 0, regionLen, 0x2000000, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic, gpus[i], true))
		ress[i] = must2(n.RegMR(r, 0, regionLen, 0x3000000, AccessLocalWrite, b.Host(), true))
		n.SetTap(func(p *fabric.Packet) {
			res.packets++
			line := fmt.Sprintf("%v %s>%d qp=%#x %v psn=%d len=%d", s.Now(), n.name, p.Dst, p.Hdr.DestQP, p.Hdr.Opcode, p.Hdr.PSN, p.PayloadLen)
			h.Write([]byte(line))
			h.Write([]byte{'\n'})
			if i != 0 {
				return
			}
			res.log = append(res.log, line)
			seen := map[*QP]bool{}
			live := 0
			for _, q := range n.act {
				if q == nil || !q.active {
					continue
				}
				live++
				if seen[q] {
					res.dups++
					break
				}
				seen[q] = true
			}
			res.peakAct = max(res.peakAct, live)
			if n.readWaitH < len(n.readWait) {
				res.waits++
			}
		})
		if c.markPct > 0 || c.lossPct > 0 {
			fr := sim.NewRand(c.seed, fmt.Sprintf("nic-test/crowd/faults%d", i))
			n.rxHook = func(p *fabric.Packet) bool {
				x := fr.IntN(100)
				if x < c.lossPct {
					net.Free(p)
					return false
				}
				if x < c.lossPct+c.markPct {
					p.ECN = 3
				}
				return true
			}
		}
	}
	newQP := func(i int) *QP {
		return must2(nics[i].CreateQP(QPConfig{SendCQ: cqs[i], RecvCQ: cqs[i], SQDepth: 128, RQDepth: 1,
			SQWhere: gpus[i], MaxInline: MaxInlineData}))
	}
	timeout := uint8(0)
	if c.lossPct > 0 {
		timeout = 1
	}
	connect := func(a *QP, to int, b *QP) {
		must(a.Modify(QPSInit, ModifyAttr{}))
		must(a.Modify(QPSRTR, ModifyAttr{RemoteEP: fabric.EndpointID(to), RemoteQPN: b.QPN(), MTU: c.mtu}))
		must(a.Modify(QPSRTS, ModifyAttr{Timeout: timeout, RetryCnt: 7, RNRRetry: 7}))
	}
	posted := make([]int, nodes)
	post := func(i int, qp *QP, hub bool) {
		to := 0
		if hub {
			to = 1 + (qp.idx % c.peers)
		}
		var wrs []WR
		for k := range 1 + rnd.IntN(12) {
			wr := WR{ID: uint64(k), Signaled: true, RKey: dsts[to].RKey}
			off := uint64(rnd.IntN(regionLen / 2))
			wr.RemoteVA = dsts[to].VA + off
			switch x := rnd.IntN(20); {
			case x < 2 && hub:
				wr.Op, wr.Local = WRFetchAdd, SGE{MR: ress[i], Off: off &^ 7, Len: 8}
				wr.RemoteVA &^= 7
				wr.CompareAdd = 1
			case x < 3 && hub:
				wr.Op = WRNop
			case x < 6:
				wr.Op, wr.Local = WRRead, SGE{MR: ress[i], Off: off, Len: uint64(1 + rnd.IntN(3*c.mtu))}
			case x < 8:
				wr.Op, wr.Inline, wr.InlineData = WRWrite, true, uint64(k)
				wr.Local.Len = uint64(1 + rnd.IntN(8))
			default:
				wr.Op, wr.Local = WRWrite, SGE{MR: srcs[i], Off: off, Len: uint64(1 + rnd.IntN(5*c.mtu))}
				wr.Fence = x == 19
			}
			wrs = append(wrs, wr)
		}
		posted[i] += len(wrs)
		for len(wrs) > 0 {
			k := 1 + rnd.IntN(len(wrs))
			batch := wrs[:k]
			wrs = wrs[k:]
			s.At(sim.Time(rnd.IntN(3_000))*sim.Time(sim.Nanosecond), func() { must(qp.PostSend(batch)) })
		}
	}
	for k := range c.qps {
		to := 1 + k%c.peers
		a, b := newQP(0), newQP(to)
		connect(a, to, b)
		connect(b, 0, a)
		post(0, a, true)
		if k%3 == 0 {
			post(to, b, false)
		}
	}
	if err := s.Run(); err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	for i, cq := range cqs {
		out := make([]CQE, cqDepth)
		got := cq.Poll(out)
		if got != posted[i] {
			t.Fatalf("%v: nic%d has %d CQEs, want %d", c, i, got, posted[i])
		}
		for _, e := range out[:got] {
			if e.Status != StatusSuccess {
				t.Fatalf("%v: nic%d CQE %+v", c, i, e)
			}
		}
		if nics[i].readAhead != 0 {
			t.Fatalf("%v: nic%d still counts %d reads", c, i, nics[i].readAhead)
		}
	}
	res.digest = h.Sum64()
	return res
}

// TestCrowdedRoundRobin pins the order in which a crowded NIC's transmit
// scheduler serves its QPs: the round-robin order is part of every
// simulation's output, so a faster scheduler must send the same packets
// at the same instants. testdata/crowd.golden holds, per configuration,
// the packet count and a digest of every packet every NIC sent (with its
// time), and the first configuration's hub log in full. The configurations
// exercise what makes the active list irregular: QPs waiting for the
// NIC-wide read budget, QPs dropped from the list and added back (some
// within one scan, so that a QP holds two places), per-packet and
// per-message arbitration, DCQCN rate limiting and retransmission after
// loss. Regenerate with `go test ./nic -run TestCrowdedRoundRobin -rewrite`
// only for an intended change of the model, and say why.
func TestCrowdedRoundRobin(t *testing.T) {
	cases := []crowdCase{
		{seed: 1, qps: 48, peers: 6, readAhead: 6, arb: ArbPacket, mtu: 1024, blueFlame: true},
		{seed: 2, qps: 96, peers: 8, readAhead: 12, arb: ArbPacket, mtu: 4096},
		{seed: 3, qps: 96, peers: 5, readAhead: 3, arb: ArbWQE, mtu: 1024, blueFlame: true},
		{seed: 4, qps: 64, peers: 7, readAhead: 96, arb: ArbPacket, mtu: 1024},
		{seed: 5, qps: 64, peers: 4, readAhead: 8, arb: ArbPacket, mtu: 2048, markPct: 10},
		{seed: 6, qps: 40, peers: 4, readAhead: 5, arb: ArbWQE, mtu: 1024, markPct: 5, lossPct: 1},
		{seed: 7, qps: 160, peers: 8, readAhead: 16, arb: ArbPacket, mtu: 1024, blueFlame: true},
		{seed: 8, qps: 400, peers: 8, readAhead: 48, arb: ArbPacket, mtu: 4096},
	}
	var b strings.Builder
	var dups, waits int
	for i, c := range cases {
		r := runCrowd(t, c)
		dups += r.dups
		waits += r.waits
		fmt.Fprintf(&b, "%v: packets=%d digest=%016x\n", c, r.packets, r.digest)
		if i == 0 {
			defer func(log []string) {
				b.WriteString("hub log of the first configuration:\n")
				for _, l := range log {
					b.WriteString(l)
					b.WriteByte('\n')
				}
				compareGolden(t, "testdata/crowd.golden", b.String())
			}(r.log)
		}
		t.Logf("%v: %d packets, peak %d active QPs, %d sent while a QP held two places, %d while QPs waited for reads",
			c, r.packets, r.peakAct, r.dups, r.waits)
	}
	// The cases must reach the irregular states they are meant to pin.
	if dups == 0 || waits == 0 {
		t.Errorf("no packet sent while a QP held two places (%d) or while QPs waited for the read budget (%d)", dups, waits)
	}
}

// compareGolden compares got with the golden file (rewritten with -rewrite).
func compareGolden(t *testing.T, file, got string) {
	t.Helper()
	if *rewrite {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\n got  %s\n want %s", file, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs in length: %d lines, want %d", file, len(gl), len(wl))
	}
}

// TestLeaveKeepsTheCursor checks the lazy removal of dropped QPs from the
// active list against the list compacted after every scan, the way the
// scheduler did it before: for random lists (QPs holding one or two
// places, places already gone), cursors and sets of dropped QPs, the
// places still held must keep their order and the next scan must start at
// the same QP, including the compaction's way of moving the cursor.
func TestLeaveKeepsTheCursor(t *testing.T) {
	rnd := sim.NewRand(1, "nic-test/leave")
	for trial := range 20000 {
		nq := 1 + rnd.IntN(12)
		qps := make([]*QP, nq)
		for i := range qps {
			qps[i] = &QP{idx: i, active: true}
		}
		// The list as compacted after every scan: each QP once, some twice.
		var list []*QP
		for _, q := range qps {
			list = append(list, q)
		}
		for range rnd.IntN(3) {
			list = append(list, qps[rnd.IntN(nq)])
		}
		rnd.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		rr := rnd.IntN(len(list) + 1)
		dropped := map[*QP]bool{}
		var drops []*QP
		for _, q := range qps {
			if rnd.IntN(3) == 0 {
				dropped[q] = true
				drops = append(drops, q)
			}
		}
		// The reference: the compaction the scheduler ran after every scan.
		var want []*QP
		wr := rr
		for j, q := range list {
			if !dropped[q] {
				want = append(want, q)
			} else if j < wr {
				wr--
			}
		}
		var wantNext *QP
		if len(want) > 0 {
			wantNext = want[wr%len(want)]
		}
		// The same list with gone places spread in, and the cursor
		// anywhere among the gone places before its QP.
		n := &NIC{}
		pos := -1
		for j, q := range list {
			for range rnd.IntN(2) {
				n.act, n.actWake = append(n.act, nil), append(n.actWake, gone)
				n.gone++
			}
			if j == rr {
				pos = len(n.act) - rnd.IntN(n.gone+1)
				pos = max(pos, 0)
				for k := pos; k < len(n.act); k++ {
					if n.act[k] != nil {
						pos = len(n.act)
					}
				}
			}
			q.actPos = len(n.act)
			q.places++
			n.act, n.actWake = append(n.act, q), append(n.actWake, txHint{})
		}
		if pos < 0 {
			pos = len(n.act)
		}
		n.rr = pos
		for _, q := range drops {
			q.active = false
		}
		n.dropped = drops
		n.leave()
		if n.rr >= len(n.act) {
			n.rr = 0
		}
		var got []*QP
		var gotNext *QP
		for k := range n.act {
			q := n.act[(n.rr+k)%len(n.act)]
			if q != nil && gotNext == nil {
				gotNext = q
			}
		}
		for k, q := range n.act {
			if q == nil {
				continue
			}
			got = append(got, q)
			if q.actPos < k {
				t.Fatalf("trial %d: qp %d at place %d has actPos %d", trial, q.idx, k, q.actPos)
			}
		}
		if fmt.Sprint(idxs(got)) != fmt.Sprint(idxs(want)) || gotNext != wantNext {
			t.Fatalf("trial %d: list %v cursor %d, drop %v: got %v next %v, want %v next %v",
				trial, idxs(list), rr, idxs(drops), idxs(got), idxs([]*QP{gotNext}), idxs(want), idxs([]*QP{wantNext}))
		}
		if 2*n.gone > len(n.act) {
			t.Fatalf("trial %d: %d of %d places gone after leave", trial, n.gone, len(n.act))
		}
	}
}

func idxs(qs []*QP) []int {
	var out []int
	for _, q := range qs {
		if q == nil {
			out = append(out, -1)
			continue
		}
		out = append(out, q.idx)
	}
	return out
}
