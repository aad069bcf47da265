package nic

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// faultHook returns an rxHook that drops, duplicates and delays (reorders)
// each packet with probability pct percent, from the run's seeded stream.
func faultHook(r *rig, i int, pct float64) func(p *fabric.Packet) bool {
	n := r.nic[i]
	rnd := r.s.Rand("nic-test/faults/" + n.name)
	return func(p *fabric.Packet) bool {
		x := rnd.Float64() * 100
		switch {
		case x < pct: // loss
			r.net.Free(p)
			return false
		case x < 2*pct: // duplicate
			q := r.net.NewPacket(p.PayloadLen, p.Payload != nil)
			q.Src, q.Dst, q.SrcPort, q.ECN, q.Hdr, q.Tag = p.Src, p.Dst, p.SrcPort, p.ECN, p.Hdr, p.Tag
			copy(q.Payload, p.Payload)
			n.deliver(q)
			return true
		case x < 3*pct: // reorder: deliver later
			d := sim.Duration(rnd.IntN(3000)) * sim.Nanosecond
			r.s.At(r.s.Now().Add(d), func() { n.deliver(p) })
			return false
		}
		return true
	}
}

// TestRCExactlyOnceUnderFaults posts a random mix of WRITEs (1 B to 5 MTUs)
// and FETCH_ADDs on one QP while 1% of packets in each direction are lost,
// 1% duplicated and 1% reordered, and checks that the target memory equals
// an oracle applying the operations once each in posting order, that every
// FETCH_ADD returned the oracle's prefix value, and that every WQE completed
// successfully and in order.
func TestRCExactlyOnceUnderFaults(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		r := newRig(seed, rigOpts{mtu: 1024, timeout: 1, retry: 7, rnrRetry: 7, backed: true, sqDepth: 512})
		r.quiet = true
		for i := range 2 {
			r.nic[i].rxHook = faultHook(r, i, 1)
		}
		const dstLen, nctr, ops = 16384, 4, 300
		src := r.ms.Alloc("src", mem.Loc{Node: 0, Kind: mem.HBM}, 1<<20, true)
		res := r.ms.Alloc("res", mem.Loc{Node: 0, Kind: mem.Host}, ops*8, true)
		dst := r.ms.Alloc("dst", mem.Loc{Node: 1, Kind: mem.HBM}, dstLen+nctr*8, true)
		rnd := sim.NewRand(seed, "nic-test/workload")
		for i := range src.Bytes() {
			src.Bytes()[i] = byte(rnd.Uint32())
		}
		smr := must2(r.nic[0].RegMR(src, 0, 1<<20, 0x1000000, 0, r.gpu[0], true))
		rmr := must2(r.nic[0].RegMR(res, 0, ops*8, 0x2000000, AccessLocalWrite, r.bus[0].Host(), true))
		dmr := must2(r.nic[1].RegMR(dst, 0, dstLen+nctr*8, 0x3000000, AccessRemoteWrite|AccessRemoteAtomic, r.gpu[1], true))
		oracle := make([]byte, dstLen+nctr*8)
		wantRes := make([]uint64, ops)
		isAdd := make([]bool, ops)
		var wrs []WR
		for k := range ops {
			if rnd.IntN(10) < 3 {
				c := uint64(rnd.IntN(nctr))
				add := uint64(rnd.IntN(1000) + 1)
				off := dstLen + 8*c
				old := binary.LittleEndian.Uint64(oracle[off:])
				binary.LittleEndian.PutUint64(oracle[off:], old+add)
				wantRes[k], isAdd[k] = old, true
				wrs = append(wrs, WR{ID: uint64(k), Op: WRFetchAdd, Signaled: true, Local: SGE{MR: rmr, Off: uint64(k) * 8, Len: 8},
					RemoteVA: dmr.VA + off, RKey: dmr.RKey, CompareAdd: add})
				continue
			}
			n := uint64(rnd.IntN(5*1024) + 1)
			off := uint64(rnd.IntN(dstLen - int(n) + 1))
			soff := uint64(rnd.IntN(1<<20 - int(n)))
			copy(oracle[off:off+n], src.Bytes()[soff:soff+n])
			wrs = append(wrs, WR{ID: uint64(k), Op: WRWrite, Signaled: true, Local: SGE{MR: smr, Off: soff, Len: n},
				RemoteVA: dmr.VA + off, RKey: dmr.RKey})
		}
		// Post in bursts over time, as a proxy would.
		for b := 0; b < ops; b += 30 {
			batch := wrs[b:min(b+30, ops)]
			r.s.At(sim.Time(b)*200*sim.Time(sim.Nanosecond), func() { must(r.qp[0].PostSend(batch)) })
		}
		if err := r.s.Run(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for i, n := range r.nic {
			if n.readAhead != 0 {
				t.Fatalf("seed %d: nic%d read-ahead count %d after every WR completed, want 0", seed, i, n.readAhead)
			}
		}
		out := make([]CQE, ops+1)
		got := r.cq[0].Poll(out)
		if got != ops {
			q := r.qp[0]
			w := q.slot(q.head)
			t.Fatalf("seed %d: %d CQEs, want %d (qp %v, completed %d) head=%d sw=%d sp=%d fetched=%d db=%d pi=%d next=%d acked=%d rdOut=%d timer=%v rnr=%v epsn1=%d head wqe %+v rseq=%d sseq=%d rw=%d",
				seed, got, ops, q.State(), q.SQCompleted(), q.head, q.sw, q.sp, q.fetched, q.db, q.pi, q.nextPSN, q.ackedPSN, q.rdOut, q.timerArmed, q.rnrArmed, r.qp[1].epsn, *w, q.rseq, q.sseq, q.rw)
		}
		for k, c := range out[:got] {
			if c.Status != StatusSuccess || c.WRID != uint64(k) {
				t.Fatalf("seed %d: CQE %d = %+v, want wrid %d success", seed, k, c, k)
			}
		}
		if !bytes.Equal(dst.Bytes(), oracle) {
			for i := range oracle {
				if oracle[i] != dst.Bytes()[i] {
					t.Fatalf("seed %d: target memory differs from the oracle first at byte %d", seed, i)
				}
			}
		}
		for k := range ops {
			if isAdd[k] {
				if v := res.Load64(uint64(k) * 8); v != wantRes[k] {
					t.Fatalf("seed %d: FETCH_ADD #%d returned %d, want %d", seed, k, v, wantRes[k])
				}
			}
		}
	}
}

func must2[T any](v T, err error) T {
	must(err)
	return v
}
