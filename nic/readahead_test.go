package nic

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// The NIC-wide read budget bounds the payload read ahead of the wire: with
// ReadAhead 4 a QP that may prefetch 32 packets keeps at most 4 in flight,
// the data still arrives intact, and a 1 MiB write takes longer than with
// the default budget (16 KiB in flight no longer covers the PCIe read
// round trip at 400 Gb/s).
func TestReadAheadBoundsPayloadReads(t *testing.T) {
	run := func(budget int) (sim.Duration, int) {
		cfg := DefaultConfig()
		cfg.ReadAhead = budget
		r := newRig(1, rigOpts{cfg: &cfg, backed: true, mtu: 4096})
		const size = 1 << 20
		src := r.ms.Alloc("src", mem.Loc{Node: 0, Kind: mem.HBM}, size, true)
		dst := r.ms.Alloc("dst", mem.Loc{Node: 1, Kind: mem.HBM}, size, true)
		for i := range src.Bytes() {
			src.Bytes()[i] = byte(i * 7)
		}
		smr := must2(r.nic[0].RegMR(src, 0, size, 0x1000000, 0, r.gpu[0], true))
		dmr := must2(r.nic[1].RegMR(dst, 0, size, 0x2000000, AccessRemoteWrite, r.gpu[1], true))
		must(r.qp[0].PostSend([]WR{{ID: 1, Op: WRWrite, Signaled: true, Local: SGE{MR: smr, Len: size},
			RemoteVA: dmr.VA, RKey: dmr.RKey}}))
		peak := 0
		var sample func()
		sample = func() {
			peak = max(peak, r.nic[0].readAhead)
			if r.cq[0].Landed() == 0 {
				r.s.At(r.s.Now().Add(10*sim.Nanosecond), sample)
			}
		}
		r.s.At(0, sample)
		if err := r.s.Run(); err != nil {
			t.Fatal(err)
		}
		out := make([]CQE, 2)
		if n := r.cq[0].Poll(out); n != 1 || out[0].Status != StatusSuccess {
			t.Fatalf("budget %d: %d CQEs %+v", budget, n, out[:n])
		}
		for i, b := range dst.Bytes() {
			if b != byte(i*7) {
				t.Fatalf("budget %d: byte %d = %d", budget, i, b)
			}
		}
		if r.nic[0].readAhead != 0 {
			t.Fatalf("budget %d: %d reads still counted", budget, r.nic[0].readAhead)
		}
		return r.s.Now().Sub(0), peak
	}
	small, peakSmall := run(4)
	full, peakFull := run(DefaultConfig().ReadAhead)
	if peakSmall > 4 || peakSmall == 0 {
		t.Errorf("budget 4: peak read-ahead %d", peakSmall)
	}
	if peakFull <= 4 || peakFull > DefaultConfig().PayloadPrefetch {
		t.Errorf("default budget: peak read-ahead %d, want in (4, %d]", peakFull, DefaultConfig().PayloadPrefetch)
	}
	if small <= full {
		t.Errorf("1 MiB with budget 4 took %v, default %v: want the small budget slower", small, full)
	}
	t.Logf("1 MiB write: budget 4 %v (peak %d), default %v (peak %d)", small, peakSmall, full, peakFull)
}
