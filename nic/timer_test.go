package nic

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// TestAckedTimerLeavesIdleEvent pins down what a run's end time means on an
// RC QP that was armed: a write acknowledged in microseconds disarms the
// local ACK timer, but its event (posted when the first packet left) stays
// queued and fires, as a no-op, one timeout later. A run that drains its
// queue therefore ends at the QP's last arming + 4.096 us × 2^timeout, with
// no timeout counted and no packet resent: a deadlock reported at about
// 4.295 s with NCCL_IB_TIMEOUT 20 stalled microseconds in, and is no
// retransmission.
func TestAckedTimerLeavesIdleEvent(t *testing.T) {
	const code = 20
	r := newRig(1, rigOpts{mtu: 1024, timeout: code, retry: 7, rnrRetry: 7})
	dst := r.ms.Alloc("dst", mem.Loc{Node: 1, Kind: mem.HBM}, 64, true)
	dmr := must2(r.nic[1].RegMR(dst, 0, 64, 0x10000, AccessRemoteWrite, r.gpu[1], true))
	must(r.qp[0].PostSend([]WR{{ID: 1, Op: WRWrite, Signaled: true, Inline: true, Local: SGE{Len: 8},
		RemoteVA: dmr.VA, RKey: dmr.RKey, InlineData: 42}}))
	var acked sim.Time
	for acked == 0 && r.s.Step() {
		if r.cq[0].Landed() == 1 {
			acked = r.s.Now()
		}
	}
	must(r.s.Run())
	if acked == 0 || acked > sim.Time(10*sim.Microsecond) {
		t.Fatalf("write completed at %v, want within 10us", acked)
	}
	st := r.nic[0].Stats()
	if st.Timeouts != 0 || st.Retransmits != 0 {
		t.Errorf("timeouts %d, retransmits %d, want none", st.Timeouts, st.Retransmits)
	}
	rto := AckTimeout(code)
	t.Logf("write acknowledged at %v, run ended at %v", acked, r.s.Now())
	if end := r.s.Now(); end < sim.Time(rto) || end > acked.Add(rto) {
		t.Errorf("run ended at %v, want the idle timer's firing in [%v, %v]", end, sim.Time(rto), acked.Add(rto))
	}
}
