package nic

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Fault mixes applied by the fabric itself to every link direction: 1%
// loss, 1% corruption (the receiver's ICRC check drops it), 1% duplication,
// and jitter that reorders packets: 5 ns reorders ~5% of arrivals at
// 400 Gb/s with 1 KiB MTU, 40 ns about half.
// The third run gives responders only 2 READ/atomic resources
// (MaxDestRdAtomic) against requesters that issue up to 16, so that READs
// and atomics queue at the responder.
var propFaults = []struct {
	f       fabric.Faults
	maxDest int
}{
	{fabric.Faults{Loss: 0.01, Corrupt: 0.01, Duplicate: 0.01, Jitter: 5 * sim.Nanosecond}, 0},
	{fabric.Faults{Loss: 0.01, Corrupt: 0.01, Duplicate: 0.01, Jitter: 40 * sim.Nanosecond}, 0},
	{fabric.Faults{Loss: 0.01, Corrupt: 0.01, Duplicate: 0.01, Jitter: 5 * sim.Nanosecond}, 2},
}

// propCounts accumulates what the fault property test exercised.
type propCounts struct {
	ops           [numWROpcodes]int
	icrc, corrupt uint64 // ICRC drops counted by the NICs; corrupt packets that arrived
	lost          uint64 // packets the links lost
	dups          uint64 // duplicate requests answered
	retrans       uint64
	naks          uint64 // PSN sequence NAKs sent
	timeouts      uint64 // ACK timeouts that rewound a QP
	arrived       uint64
	queued        uint64 // READs/atomics that waited for a responder resource
	reordered     uint64 // packets that arrived after a packet of their QP sent later
	fenced        int
}

// pairRun is one QP pair's workload and oracle: the requester is on node
// req; its target region lives on the other node.
type pairRun struct {
	req       int
	qp, peer  *QP
	wrs       []WR
	oracle    []byte // expected target region
	readWant  map[int][]byte
	atomWant  map[int]uint64
	local     *mem.Region // READ results and atomic results
	target    *mem.Region
	sharedAdd map[int]uint64 // FETCH_ADDs on the shared counter: wr index -> add
}

// TestRCFabricFaultsProperty runs, over many seeds, a random mix of WRITE,
// READ, FETCH_ADD and CMP_SWAP on three QP pairs (two requesters on node 0,
// one on node 1, so both directions carry requests and responses) through
// a switch whose links lose, corrupt, duplicate and reorder packets (the
// fabric's own seeded fault injection). It checks that every WQE completes
// successfully and in order; that each target region equals an oracle that
// applies the QP's WRITEs and atomics exactly once in posting order; that
// every READ returned the oracle's bytes at its place in the order; that
// every atomic returned the oracle's original value; that FETCH_ADDs from
// all QPs on one shared counter each took effect once (the returned values
// chain); and that every corrupted packet that arrived was dropped by the
// ICRC check and counted.
func TestRCFabricFaultsProperty(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	for _, c := range propFaults {
		t.Run(fmt.Sprintf("jitter=%v/maxdest=%d", c.f.Jitter, c.maxDest), func(t *testing.T) { faultProperty(t, c.f, c.maxDest, seeds) })
	}
}

func faultProperty(t *testing.T, f fabric.Faults, maxDest, seeds int) {
	var tot propCounts
	for seed := range uint64(seeds) {
		c := runFaultProperty(t, f, maxDest, seed+1000)
		for i := range c.ops {
			tot.ops[i] += c.ops[i]
		}
		tot.icrc += c.icrc
		tot.corrupt += c.corrupt
		tot.lost += c.lost
		tot.dups += c.dups
		tot.retrans += c.retrans
		tot.naks += c.naks
		tot.timeouts += c.timeouts
		tot.reordered += c.reordered
		tot.arrived += c.arrived
		tot.queued += c.queued
		tot.fenced += c.fenced
	}
	t.Logf("%d seeds (1000..%d): WRITE %d READ %d FETCH_ADD %d CMP_SWAP %d (fenced %d); links lost %d; corrupt arrivals %d = ICRC drops %d; duplicate requests answered %d; packets arrived %d, reordered %d; retransmitted packets %d (sequence NAKs %d, timeouts %d); READ/atomic queued at responder %d",
		seeds, 1000+seeds-1, tot.ops[WRWrite], tot.ops[WRRead], tot.ops[WRFetchAdd], tot.ops[WRCmpSwap], tot.fenced, tot.lost, tot.corrupt, tot.icrc, tot.dups, tot.arrived, tot.reordered, tot.retrans, tot.naks, tot.timeouts, tot.queued)
	if tot.icrc == 0 || tot.lost == 0 || tot.dups == 0 || tot.reordered == 0 || tot.retrans == 0 || tot.naks == 0 || tot.timeouts == 0 || maxDest > 0 && tot.queued == 0 {
		t.Errorf("a fault kind was never exercised: %+v", tot)
	}
}

func runFaultProperty(t *testing.T, f fabric.Faults, maxDest int, seed uint64) propCounts {
	s := sim.New(sim.Config{Seed: seed, EventBudget: 50_000_000})
	net := fabric.New(s, fabric.Config{})
	sw := net.AddSwitch("sw", fabric.SwitchConfig{Latency: 300 * sim.Nanosecond, CutThrough: true})
	for i := range 2 {
		ep := net.AddEndpoint(fmt.Sprintf("ep%d", i))
		must2(net.Connect(net.Node(ep), sw, fabric.LinkConfig{Rate: 400 * sim.Gbps, Prop: 50 * sim.Nanosecond}))
	}
	must(net.Build())
	must(net.SetGlobalFaults(f))
	var cnt propCounts
	ms := mem.NewSystem(s)
	var nics [2]*NIC
	var cqs [2]*CQ
	var gpus [2]pcie.DevID
	for i := range 2 {
		b := pcie.NewTree(s, pcie.DefaultConfig())
		psw := b.AddSwitch("sw0")
		nd := b.AddDevice("nic0", psw)
		gpus[i] = b.AddDevice("gpu0", psw)
		nics[i] = New(s, DefaultConfig(), fmt.Sprintf("nic%d", i), net, fabric.EndpointID(i), b, nd)
		ring := ms.Alloc(fmt.Sprintf("cq%d", i), mem.Loc{Node: i, Kind: mem.Host}, 64*4096, false)
		cqs[i] = must2(nics[i].CreateCQ(4096, ring, b.Host()))
		// Count corrupted arrivals, and reordering of requests per QP.
		hi := map[uint32]sim.Time{}
		net.TapEndpoint(fabric.EndpointID(i), i, func(_ int, _ sim.Time, p *fabric.Packet) {
			if p.Dst != fabric.EndpointID(i) {
				return
			}
			cnt.arrived++
			if p.Corrupt {
				cnt.corrupt++
			}
			// A packet sent before one that already arrived on the
			// same QP was overtaken.
			if b, ok := hi[p.Hdr.DestQP]; ok && p.Born < b {
				cnt.reordered++
			} else {
				hi[p.Hdr.DestQP] = p.Born
			}
		})
	}
	rnd := sim.NewRand(seed, "nic-test/fabric-faults/workload")
	const dataLen, nctr, ops = 8192, 4, 120
	shared := ms.Alloc("shared", mem.Loc{Node: 1, Kind: mem.HBM}, 8, true)
	sharedMR := must2(nics[1].RegMR(shared, 0, 8, 0x9000000, AccessRemoteAtomic, gpus[1], true))
	var pairs []*pairRun
	for k, req := range []int{0, 0, 1} {
		tgt := 1 - req
		qa := must2(nics[req].CreateQP(QPConfig{SendCQ: cqs[req], RecvCQ: cqs[req], SQDepth: 256,
			SQRing: ms.Alloc(fmt.Sprintf("sq%d", k), mem.Loc{Node: req, Kind: mem.HBM}, 256*64, false), SQWhere: gpus[req]}))
		qb := must2(nics[tgt].CreateQP(QPConfig{SendCQ: cqs[tgt], RecvCQ: cqs[tgt], SQDepth: 4}))
		for _, e := range []struct {
			qp, peer *QP
			ep       int
		}{{qa, qb, tgt}, {qb, qa, req}} {
			must(e.qp.Modify(QPSInit, ModifyAttr{}))
			must(e.qp.Modify(QPSRTR, ModifyAttr{RemoteEP: fabric.EndpointID(e.ep), RemoteQPN: e.peer.QPN(), MTU: 1024,
				RQPSN: 0xfffff0 + uint32(k), MaxDestRdAtomic: maxDest})) // PSNs wrap around 2^24 early in the run
			must(e.qp.Modify(QPSRTS, ModifyAttr{SQPSN: 0xfffff0 + uint32(k), Timeout: 1, RetryCnt: 7, RNRRetry: 7}))
		}
		target := ms.Alloc(fmt.Sprintf("tgt%d", k), mem.Loc{Node: tgt, Kind: mem.HBM}, dataLen+nctr*8, true)
		for i := range target.Bytes() {
			target.Bytes()[i] = byte(rnd.Uint32())
		}
		src := ms.Alloc(fmt.Sprintf("src%d", k), mem.Loc{Node: req, Kind: mem.HBM}, 1<<16, true)
		for i := range src.Bytes() {
			src.Bytes()[i] = byte(rnd.Uint32())
		}
		local := ms.Alloc(fmt.Sprintf("local%d", k), mem.Loc{Node: req, Kind: mem.Host}, ops*4096, true)
		tmr := must2(nics[tgt].RegMR(target, 0, dataLen+nctr*8, 0x3000000, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic, gpus[tgt], true))
		smr := must2(nics[req].RegMR(src, 0, 1<<16, 0x1000000, 0, gpus[req], true))
		lmr := must2(nics[req].RegMR(local, 0, ops*4096, 0x2000000, AccessLocalWrite, 0, true))
		pr := &pairRun{req: req, qp: qa, peer: qb, oracle: slices.Clone(target.Bytes()), readWant: map[int][]byte{},
			atomWant: map[int]uint64{}, local: local, target: target, sharedAdd: map[int]uint64{}}
		var readRanges [][2]uint64 // READ ranges since the last fence
		for i := range ops {
			wr := WR{ID: uint64(i), Signaled: true}
			switch x := rnd.IntN(20); {
			case x < 9: // WRITE, 1 B to 3 MTUs; fenced if it overlaps an unfenced READ
				n := uint64(rnd.IntN(3*1024) + 1)
				off := uint64(rnd.IntN(dataLen - int(n) + 1))
				soff := uint64(rnd.IntN(1<<16 - int(n)))
				copy(pr.oracle[off:off+n], src.Bytes()[soff:soff+n])
				wr.Op, wr.Local, wr.RemoteVA, wr.RKey = WRWrite, SGE{MR: smr, Off: soff, Len: n}, tmr.VA+off, tmr.RKey
				for _, r := range readRanges {
					if off < r[1] && r[0] < off+n {
						wr.Fence = true
						cnt.fenced++
						readRanges = readRanges[:0]
						break
					}
				}
			case x < 14: // READ, 1 B to 4 KiB (up to 4 response packets)
				n := uint64(rnd.IntN(4096) + 1)
				off := uint64(rnd.IntN(dataLen - int(n) + 1))
				pr.readWant[i] = slices.Clone(pr.oracle[off : off+n])
				readRanges = append(readRanges, [2]uint64{off, off + n})
				wr.Op, wr.Local, wr.RemoteVA, wr.RKey = WRRead, SGE{MR: lmr, Off: uint64(i) * 4096, Len: n}, tmr.VA+off, tmr.RKey
			case x < 16: // FETCH_ADD on the QP's counters
				c := dataLen + 8*uint64(rnd.IntN(nctr))
				add := uint64(rnd.IntN(1000) + 1)
				old := binary.LittleEndian.Uint64(pr.oracle[c:])
				binary.LittleEndian.PutUint64(pr.oracle[c:], old+add)
				pr.atomWant[i] = old
				wr.Op, wr.Local, wr.RemoteVA, wr.RKey, wr.CompareAdd = WRFetchAdd, SGE{MR: lmr, Off: uint64(i) * 4096, Len: 8}, tmr.VA+c, tmr.RKey, add
			case x < 18: // CMP_SWAP on the QP's counters, hitting or missing
				c := dataLen + 8*uint64(rnd.IntN(nctr))
				old := binary.LittleEndian.Uint64(pr.oracle[c:])
				cmp := old
				if rnd.IntN(3) == 0 {
					cmp = old + 1
				}
				swap := rnd.Uint64()
				if cmp == old {
					binary.LittleEndian.PutUint64(pr.oracle[c:], swap)
				}
				pr.atomWant[i] = old
				wr.Op, wr.Local, wr.RemoteVA, wr.RKey, wr.CompareAdd, wr.Swap = WRCmpSwap, SGE{MR: lmr, Off: uint64(i) * 4096, Len: 8}, tmr.VA+c, tmr.RKey, cmp, swap
			default: // FETCH_ADD on the counter every requester shares (node 1's)
				if req != 0 {
					wr.Op, wr.Local = WRNop, SGE{}
					break
				}
				add := uint64(rnd.IntN(1000) + 1)
				pr.sharedAdd[i] = add
				wr.Op, wr.Local, wr.RemoteVA, wr.RKey, wr.CompareAdd = WRFetchAdd, SGE{MR: lmr, Off: uint64(i) * 4096, Len: 8}, sharedMR.VA, sharedMR.RKey, add
			}
			cnt.ops[wr.Op]++
			pr.wrs = append(pr.wrs, wr)
		}
		// Post in bursts, as a proxy would.
		for b := 0; b < ops; b += 16 {
			batch := pr.wrs[b:min(b+16, ops)]
			s.At(sim.Time(b)*sim.Time(150*sim.Nanosecond)+sim.Time(k)*sim.Time(sim.Nanosecond), func() { must(pr.qp.PostSend(batch)) })
		}
		pairs = append(pairs, pr)
	}
	if err := s.Run(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	// Completions: in order and successful, per QP.
	next := map[uint32]uint64{}
	for node := range 2 {
		out := make([]CQE, 4096)
		k := cqs[node].Poll(out)
		for _, c := range out[:k] {
			if c.Status != StatusSuccess || c.WRID != next[c.QPN] {
				t.Fatalf("seed %d: node %d CQE %+v, want wrid %d success", seed, node, c, next[c.QPN])
			}
			next[c.QPN]++
		}
	}
	var sharedSeen [][2]uint64 // (returned, add)
	for k, pr := range pairs {
		if got := next[pr.qp.QPN()]; got != ops {
			t.Fatalf("seed %d: pair %d completed %d of %d WQEs (QP %v)", seed, k, got, ops, pr.qp.State())
		}
		if !bytes.Equal(pr.target.Bytes(), pr.oracle) {
			i := 0
			for pr.target.Bytes()[i] == pr.oracle[i] {
				i++
			}
			t.Fatalf("seed %d: pair %d target differs from the oracle first at byte %d", seed, k, i)
		}
		for i, want := range pr.readWant {
			got := make([]byte, len(want))
			pr.local.Read(uint64(i)*4096, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d: pair %d READ #%d returned data differing from the oracle", seed, k, i)
			}
		}
		for i, want := range pr.atomWant {
			if got := pr.local.Load64(uint64(i) * 4096); got != want {
				t.Fatalf("seed %d: pair %d %v #%d returned %#x, want %#x", seed, k, pr.wrs[i].Op, i, got, want)
			}
		}
		for i, add := range pr.sharedAdd {
			sharedSeen = append(sharedSeen, [2]uint64{pr.local.Load64(uint64(i) * 4096), add})
		}
	}
	// The shared counter's FETCH_ADDs, sorted by the value each returned,
	// must chain from 0: each one saw exactly the sum of those before it.
	slices.SortFunc(sharedSeen, func(a, b [2]uint64) int { return int(int64(a[0] - b[0])) })
	var sum uint64
	for _, x := range sharedSeen {
		if x[0] != sum {
			t.Fatalf("seed %d: shared FETCH_ADDs do not chain: returned %d where %d was expected", seed, x[0], sum)
		}
		sum += x[1]
	}
	if got := shared.Load64(0); got != sum {
		t.Fatalf("seed %d: shared counter %d, want %d", seed, got, sum)
	}
	for i := range 2 {
		st := nics[i].Stats()
		cnt.icrc += st.ICRCErrors
		cnt.dups += st.DupRequests
		cnt.retrans += st.Retransmits
		cnt.naks += st.SeqNAKs
		cnt.timeouts += st.Timeouts
		cnt.queued += st.RdAtomicQueued
	}
	for p := range net.Ports() {
		cnt.lost += net.PortStats(fabric.PortID(p)).Lost
	}
	if cnt.icrc != cnt.corrupt {
		t.Fatalf("seed %d: %d corrupted packets arrived but %d were dropped by the ICRC check", seed, cnt.corrupt, cnt.icrc)
	}
	return cnt
}
