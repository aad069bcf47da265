package nic

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/ginsim/ginsim/sim/mem"
)

// TestBadWR posts one malformed WR followed by a good one and checks the
// exact completion status of each, the QP state, and that nothing panics.
func TestBadWR(t *testing.T) {
	type tc struct {
		name    string
		wr      func(r *rig, src, dst, ro *MR) WR
		postErr error  // error from PostSend, if the verbs layer rejects it
		want    Status // status of the bad WR's CQE
	}
	cases := []tc{
		{"unregistered lkey", func(r *rig, src, dst, ro *MR) WR {
			must(r.nic[0].DeregMR(src))
			return WR{Op: WRWrite, Local: SGE{MR: src, Len: 8}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, nil, StatusLocProtErr},
		{"lkey of another NIC", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRWrite, Local: SGE{MR: dst, Len: 8}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, nil, StatusLocProtErr},
		{"local SGE out of bounds", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRWrite, Local: SGE{MR: src, Off: 4000, Len: 200}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, nil, StatusLocProtErr},
		{"READ into read-only MR", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRRead, Local: SGE{MR: ro, Len: 8}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, nil, StatusLocProtErr},
		{"atomic of 4 bytes", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRFetchAdd, Local: SGE{MR: src, Len: 4}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, nil, StatusLocLenErr},
		{"misaligned atomic", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRFetchAdd, Local: SGE{MR: src, Len: 8}, RemoteVA: dst.VA + 4, RKey: dst.RKey}
		}, nil, StatusRemInvReqErr},
		{"remote bounds", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRWrite, Local: SGE{MR: src, Len: 64}, RemoteVA: dst.VA + 4090, RKey: dst.RKey}
		}, nil, StatusRemAccessErr},
		{"remote rights", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRRead, Local: SGE{MR: src, Len: 64}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, nil, StatusRemAccessErr},
		{"SEND longer than the receive buffer", func(r *rig, src, dst, ro *MR) WR {
			must(r.qp[1].PostRecv(RecvWR{ID: 1, Local: SGE{MR: dst, Len: 16}}))
			return WR{Op: WRSend, Local: SGE{MR: src, Len: 64}}
		}, nil, StatusRemInvReqErr},
		{"WAIT without a CQ", func(r *rig, src, dst, ro *MR) WR { return WR{Op: WRWait} }, nil, StatusLocQPOpErr},
		{"inline too long", func(r *rig, src, dst, ro *MR) WR {
			return WR{Op: WRWrite, Inline: true, Local: SGE{Len: MaxInlineData + 1}, RemoteVA: dst.VA, RKey: dst.RKey}
		}, ErrInvalid, 0},
		{"unknown opcode", func(r *rig, src, dst, ro *MR) WR { return WR{Op: 99} }, ErrInvalid, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(1, rigOpts{mtu: 1024, timeout: 10, retry: 3, rnrRetry: 3})
			src := must2(r.nic[0].RegMR(r.ms.Alloc("src", mem.Loc{}, 4096, true), 0, 4096, 0x1000, AccessLocalWrite, r.gpu[0], true))
			ro := must2(r.nic[0].RegMR(r.ms.Alloc("ro", mem.Loc{}, 4096, true), 0, 4096, 0x9000, 0, r.gpu[0], true))
			dst := must2(r.nic[1].RegMR(r.ms.Alloc("dst", mem.Loc{Node: 1}, 4096, true), 0, 4096, 0x5000,
				AccessLocalWrite|AccessRemoteWrite|AccessRemoteAtomic, r.gpu[1], true))
			bad := c.wr(r, src, dst, ro)
			bad.ID, bad.Signaled = 1, false
			good := WR{ID: 2, Op: WRWrite, Signaled: true, Local: SGE{MR: src, Len: 8}, RemoteVA: dst.VA, RKey: dst.RKey}
			err := r.qp[0].PostSend([]WR{bad, good})
			if c.postErr != nil {
				if !errors.Is(err, c.postErr) {
					t.Fatalf("PostSend error %v, want %v", err, c.postErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := r.s.Run(); err != nil {
				t.Fatal(err)
			}
			out := make([]CQE, 4)
			if n := r.cq[0].Poll(out); n != 2 {
				t.Fatalf("%d CQEs, want 2: %+v", n, out[:n])
			}
			if out[0].WRID != 1 || out[0].Status != c.want {
				t.Errorf("bad WR completed %+v (%v), want status %v", out[0], out[0].Status, c.want)
			}
			if out[1].WRID != 2 || out[1].Status != StatusWRFlushErr {
				t.Errorf("next WR completed %+v, want WR flush error", out[1])
			}
			if r.qp[0].State() != QPSErr {
				t.Errorf("QP state %v, want ERR", r.qp[0].State())
			}
		})
	}
}

// TestStateErrors checks verbs-level state errors and transitions.
func TestStateErrors(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024})
	if err := r.qp[0].Modify(QPSRTR, ModifyAttr{}); !errors.Is(err, ErrTransit) {
		t.Errorf("RTS->RTR: %v, want ErrTransit", err)
	}
	must(r.qp[0].Modify(QPSReset, ModifyAttr{}))
	if _, err := r.qp[0].WriteWQE(&WR{Op: WRNop}); !errors.Is(err, ErrQPState) {
		t.Errorf("post in RESET: %v, want ErrQPState", err)
	}
	if err := r.qp[0].Modify(QPSInit, ModifyAttr{}); err != nil {
		t.Fatal(err)
	}
	if err := r.qp[0].Modify(QPSRTR, ModifyAttr{MTU: 1000}); !errors.Is(err, ErrInvalid) {
		t.Errorf("MTU 1000: %v, want ErrInvalid", err)
	}
}

// TestQPStateSize reports the bytes of state per QP.
func TestQPStateSize(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 4096, sqDepth: 128})
	qp := r.qp[0]
	rings := uintptr(len(qp.sq))*unsafe.Sizeof(swqe{}) + uintptr(len(qp.rq))*unsafe.Sizeof(RecvWR{}) +
		uintptr(len(qp.rdy)+len(qp.rrdy))*8 + uintptr(len(qp.atom))*unsafe.Sizeof(atomEntry{})
	t.Logf("QP struct %d B; SWQE %d B; SQ depth 128 + RQ depth 64 + prefetch rings + atomic cache: %d B; total %d B",
		unsafe.Sizeof(QP{}), unsafe.Sizeof(swqe{}), rings, unsafe.Sizeof(QP{})+rings)
}
