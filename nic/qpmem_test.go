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
