package nic

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// BenchmarkQPBytes reports the heap each RC QP takes, as the all-to-all
// of bench alltoall uses them (SQ depth 1, no receive queue): created
// and connected (created_B/QP), then after each side of every pair has
// written 64 KiB to the other and completed (used_B/QP).
func BenchmarkQPBytes(b *testing.B) {
	const pairs = 4096
	for b.Loop() {
		heap := func() uint64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc
		}
		s := sim.New(sim.Config{Seed: 1})
		net := fabric.NewSingleSwitch(s, 2, 400*sim.Gbps, 100*sim.Nanosecond)
		ms := mem.NewSystem(s)
		cfg := DefaultConfig()
		var nics [2]*NIC
		var cqs [2]*CQ
		var mrs [2]*MR
		var host [2]pcie.DevID
		for i := range 2 {
			bus := pcie.NewTree(s, pcie.DefaultConfig())
			sw := bus.AddSwitch("sw0")
			nd := bus.AddDevice("nic0", sw)
			host[i] = bus.Host()
			nics[i] = New(s, cfg, fmt.Sprintf("nic%d", i), net, fabric.EndpointID(i), bus, nd)
			ring := ms.Alloc(fmt.Sprintf("cq%d", i), mem.Loc{Node: i, Kind: mem.Host}, sim.Bytes(2*pairs)*cfg.CQEBytes, false)
			cqs[i] = must2(nics[i].CreateCQ(2*pairs, ring, host[i]))
			buf := ms.Alloc(fmt.Sprintf("buf%d", i), mem.Loc{Node: i, Kind: mem.Host}, 64*1024, false)
			mrs[i] = must2(nics[i].RegMR(buf, 0, 64*1024, 0x10000, AccessLocalWrite|AccessRemoteWrite, host[i], true))
		}
		h0 := heap()
		qps := make([][2]*QP, pairs)
		for k := range qps {
			for i := range 2 {
				qps[k][i] = must2(nics[i].CreateQP(QPConfig{SendCQ: cqs[i], RecvCQ: cqs[i], SQDepth: 1, SQWhere: host[i]}))
			}
			for i := range 2 {
				j := 1 - i
				must(qps[k][i].Modify(QPSInit, ModifyAttr{}))
				must(qps[k][i].Modify(QPSRTR, ModifyAttr{RemoteEP: fabric.EndpointID(j), RemoteQPN: qps[k][j].QPN(), MTU: 4096}))
				must(qps[k][i].Modify(QPSRTS, ModifyAttr{Timeout: 14, RetryCnt: 7, RNRRetry: 7}))
			}
		}
		h1 := heap()
		for k := range qps {
			for i := range 2 {
				must(qps[k][i].PostSend([]WR{{Op: WRWrite, Signaled: true, Local: SGE{MR: mrs[i], Len: 64 * 1024}, RemoteVA: mrs[1-i].VA, RKey: mrs[1-i].RKey}}))
			}
		}
		must(s.Run())
		if got := cqs[0].Landed() + cqs[1].Landed(); got != 2*pairs {
			b.Fatalf("%d of %d completions", got, 2*pairs)
		}
		h2 := heap()
		b.ReportMetric(float64(h1-h0)/(2*pairs), "created_B/QP")
		b.ReportMetric(float64(h2-h0)/(2*pairs), "used_B/QP")
		runtime.KeepAlive(qps)
	}
}

// TestSQSlotsFollowOutstanding: a QP's SQ slots follow the most WQEs it
// had outstanding at once (a power of two), not its depth nor the WQEs it
// wrote: 300 WRITEs and NOPs posted three at a time, each batch after the
// last completed, leave a QP of depth 1024 with 4 slots; a burst of 40
// then grows them to 64, and every WR completes in order.
func TestSQSlotsFollowOutstanding(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024, sqDepth: 1024, cqDepth: 1024})
	r.quiet = true
	src := r.ms.Alloc("src", mem.Loc{Node: 0, Kind: mem.HBM}, 1<<16, false)
	dst := r.ms.Alloc("dst", mem.Loc{Node: 1, Kind: mem.HBM}, 1<<16, false)
	smr := must2(r.nic[0].RegMR(src, 0, 1<<16, 0x1000000, 0, r.gpu[0], true))
	dmr := must2(r.nic[1].RegMR(dst, 0, 1<<16, 0x2000000, AccessRemoteWrite, r.gpu[1], true))
	id := uint64(0)
	batch := func(k int) []WR {
		var wrs []WR
		for range k {
			wr := WR{ID: id, Op: WRWrite, Signaled: true, Local: SGE{MR: smr, Len: 2000}, RemoteVA: dmr.VA, RKey: dmr.RKey}
			if id%3 == 1 {
				wr = WR{ID: id, Op: WRNop, Signaled: true}
			}
			wrs = append(wrs, wr)
			id++
		}
		return wrs
	}
	qp := r.qp[0]
	for range 100 {
		must(qp.PostSend(batch(3)))
		must(r.s.Run())
	}
	if got := len(qp.sq); got != 4 {
		t.Errorf("after 100 batches of 3: %d SQ slots, want 4", got)
	}
	must(qp.PostSend(batch(40)))
	must(r.s.Run())
	if got := len(qp.sq); got != 64 {
		t.Errorf("after a burst of 40: %d SQ slots, want 64", got)
	}
	out := make([]CQE, 400)
	n := r.cq[0].Poll(out)
	if n != int(id) {
		t.Fatalf("%d CQEs, want %d", n, id)
	}
	for k, c := range out[:n] {
		if c.Status != StatusSuccess || c.WRID != uint64(k) {
			t.Fatalf("CQE %d = %+v, want wrid %d success", k, c, k)
		}
	}
}
