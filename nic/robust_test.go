package nic

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// TestInlineUpToMax writes inline payloads of 1 to MaxInlineData bytes
// (InlineData for up to 8, InlineBytes beyond) and checks the target
// bytes; one byte more is rejected by WriteWQE.
func TestInlineUpToMax(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024, timeout: 14, retry: 7, rnrRetry: 7})
	dst := r.ms.Alloc("dst", mem.Loc{Node: 1, Kind: mem.HBM}, 64*MaxInlineData, true)
	dmr := must2(r.nic[1].RegMR(dst, 0, 64*MaxInlineData, 0x10000, AccessRemoteWrite, r.gpu[1], true))
	want := make([]byte, 64*MaxInlineData)
	var wrs []WR
	for n := 1; n <= MaxInlineData; n++ {
		wr := WR{ID: uint64(n), Op: WRWrite, Signaled: true, Inline: true, Local: SGE{Len: uint64(n)},
			RemoteVA: dmr.VA + uint64(n)*64, RKey: dmr.RKey, InlineData: 0x0807060504030201}
		for i := range wr.InlineBytes {
			wr.InlineBytes[i] = byte(0xa0 + i)
		}
		src := wr.InlineBytes[:n]
		if n <= 8 {
			src = []byte{1, 2, 3, 4, 5, 6, 7, 8}[:n]
		}
		copy(want[n*64:], src)
		wrs = append(wrs, wr)
	}
	must(r.qp[0].PostSend(wrs))
	must(r.s.Run())
	if !bytes.Equal(dst.Bytes(), want) {
		t.Errorf("target bytes differ:\n got %x\nwant %x", dst.Bytes(), want)
	}
	if got := r.cq[0].Landed(); got != MaxInlineData {
		t.Errorf("%d CQEs, want %d", got, MaxInlineData)
	}
	_, err := r.qp[0].WriteWQE(&WR{Op: WRWrite, Inline: true, Local: SGE{Len: MaxInlineData + 1}, RemoteVA: dmr.VA, RKey: dmr.RKey})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("inline of %d bytes: %v, want ErrInvalid", MaxInlineData+1, err)
	}
}

// TestCQOverrun fills a 4-entry CQ with signaled completions nobody polls:
// the fifth CQE overruns it. The run must go on; the CQ reports the error
// and the QP that completes into it goes to the error state, each with an
// asynchronous event; the peer is unaffected.
func TestCQOverrun(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024, timeout: 14, retry: 7, rnrRetry: 7, cqDepth: 4})
	dst := r.ms.Alloc("dst", mem.Loc{Node: 1, Kind: mem.HBM}, 4096, true)
	dmr := must2(r.nic[1].RegMR(dst, 0, 4096, 0x10000, AccessRemoteWrite, r.gpu[1], true))
	var evs []obs.Event
	r.nic[0].SetObserver(obs.NewBus(obs.Func(func(ev obs.Event) {
		if ev.Kind == obs.Async {
			evs = append(evs, ev)
		}
	})))
	var wrs []WR
	for i := range 8 {
		wrs = append(wrs, WR{ID: uint64(i), Op: WRWrite, Signaled: true, Inline: true, Local: SGE{Len: 8}, InlineData: uint64(i),
			RemoteVA: dmr.VA + uint64(i)*8, RKey: dmr.RKey})
	}
	must(r.qp[0].PostSend(wrs))
	if err := r.s.Run(); err != nil {
		t.Fatalf("run failed on a CQ overrun: %v", err)
	}
	cq := r.cq[0]
	if !cq.Err() || cq.Landed() != 4 || cq.Dropped() == 0 {
		t.Errorf("CQ err=%v landed=%d dropped=%d; want error, 4 landed, some dropped", cq.Err(), cq.Landed(), cq.Dropped())
	}
	if r.qp[0].State() != QPSErr || r.qp[1].State() != QPSRTS {
		t.Errorf("QP states %v / %v, want ERR / RTS", r.qp[0].State(), r.qp[1].State())
	}
	if len(evs) != 2 || evs[0].Code != uint32(AsyncCQErr) || evs[0].Where != cq.ring.Name() ||
		evs[1].Code != uint32(AsyncQPFatal) || evs[1].Where != cq.ring.Name() || evs[1].QP != r.qp[0].qpn {
		t.Errorf("async events %+v, want CQ error then QP fatal", evs)
	}
	if st := r.nic[0].Stats(); st.CQOverruns != 1 {
		t.Errorf("CQOverruns %d, want 1", st.CQOverruns)
	}
}

// TestRdAtomicQueuedAtResponder posts 12 READs and FETCH_ADDs against a
// responder with 2 READ/atomic resources (MaxDestRdAtomic) while the
// requester may have 16 outstanding: the responder holds the excess and
// answers them in order, each correctly.
func TestRdAtomicQueuedAtResponder(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024, timeout: 14, retry: 7, rnrRetry: 7, maxDest: 2})
	src := r.ms.Alloc("src", mem.Loc{Node: 1, Kind: mem.HBM}, 8192, true)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	smr := must2(r.nic[1].RegMR(src, 0, 8192, 0x10000, AccessRemoteRead|AccessRemoteAtomic, r.gpu[1], true))
	loc := r.ms.Alloc("loc", mem.Loc{Node: 0, Kind: mem.HBM}, 12*4096, true)
	lmr := must2(r.nic[0].RegMR(loc, 0, 12*4096, 0x20000, AccessLocalWrite, r.gpu[0], true))
	var wrs []WR
	ctr := src.Load64(4096)
	var wantAdd []uint64
	for i := range 12 {
		if i%3 == 2 {
			wantAdd = append(wantAdd, ctr)
			ctr += uint64(i)
			wrs = append(wrs, WR{ID: uint64(i), Op: WRFetchAdd, Signaled: true, Local: SGE{MR: lmr, Off: uint64(i) * 4096, Len: 8},
				RemoteVA: smr.VA + 4096, RKey: smr.RKey, CompareAdd: uint64(i)})
			continue
		}
		wrs = append(wrs, WR{ID: uint64(i), Op: WRRead, Signaled: true, Local: SGE{MR: lmr, Off: uint64(i) * 4096, Len: 3000},
			RemoteVA: smr.VA + uint64(i)*100, RKey: smr.RKey})
	}
	must(r.qp[0].PostSend(wrs))
	must(r.s.Run())
	if r.cq[0].Landed() != 12 {
		t.Fatalf("%d CQEs, want 12", r.cq[0].Landed())
	}
	k := 0
	for i, wr := range wrs {
		if wr.Op == WRFetchAdd {
			if got := loc.Load64(uint64(i) * 4096); got != wantAdd[k] {
				t.Errorf("FETCH_ADD #%d returned %d, want %d", i, got, wantAdd[k])
			}
			k++
			continue
		}
		got := make([]byte, 3000)
		loc.Read(uint64(i)*4096, got)
		if !bytes.Equal(got, src.Bytes()[i*100:i*100+3000]) {
			t.Errorf("READ #%d data differs", i)
		}
	}
	if st := r.nic[1].Stats(); st.RdAtomicQueued == 0 {
		t.Errorf("no READ/atomic waited for a responder resource")
	}
	if r.qp[1].rdAct != 0 {
		t.Errorf("responder still counts %d READs/atomics in progress", r.qp[1].rdAct)
	}
}
