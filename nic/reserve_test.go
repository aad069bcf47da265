package nic

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// QP numbers set aside by ReserveQPNs go to the QPs created with them,
// later and in any order; numbers taken after the reservation continue
// past it; a number cannot be taken twice or taken unreserved.
func TestReserveQPNs(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024})
	n := r.nic[0]
	cfg := func(qpn uint32) QPConfig {
		sq := r.ms.Alloc("sq", mem.Loc{Node: 0, Kind: mem.HBM}, 64*64, false)
		return QPConfig{SendCQ: r.cq[0], RecvCQ: r.cq[0], SQDepth: 64, SQRing: sq, SQWhere: r.gpu[0], QPN: qpn}
	}
	first := n.ReserveQPNs(3)
	require.Equal(t, r.qp[0].QPN()+1, first, "the reservation starts after the rig's QP")
	after, err := n.CreateQP(cfg(0))
	require.NoError(t, err)
	require.Equal(t, first+3, after.QPN(), "an unnumbered QP takes the next number past the reservation")
	late, err := n.CreateQP(cfg(first + 2))
	require.NoError(t, err)
	require.Equal(t, first+2, late.QPN())
	early, err := n.CreateQP(cfg(first))
	require.NoError(t, err)
	require.Equal(t, first, early.QPN())
	for _, bad := range []uint32{first, first + 2, after.QPN(), first + 9, 1} {
		_, err := n.CreateQP(cfg(bad))
		require.True(t, errors.Is(err, ErrInvalid), "QPN %#x: %v", bad, err)
	}
}

// A packet to a reserved number whose QP does not exist yet is dropped as
// for an unknown QPN, and a CQ error skips the empty slots.
func TestReservedQPNWithoutQP(t *testing.T) {
	r := newRig(1, rigOpts{mtu: 1024})
	hole := r.nic[1].ReserveQPNs(1)
	sq := r.ms.Alloc("sq", mem.Loc{Node: 0, Kind: mem.HBM}, 64*64, false)
	qp := must2(r.nic[0].CreateQP(QPConfig{SendCQ: r.cq[0], RecvCQ: r.cq[0], SQDepth: 64, SQRing: sq, SQWhere: r.gpu[0]}))
	must(qp.Modify(QPSInit, ModifyAttr{}))
	must(qp.Modify(QPSRTR, ModifyAttr{RemoteEP: 1, RemoteQPN: hole, MTU: 1024}))
	must(qp.Modify(QPSRTS, ModifyAttr{Timeout: 14, RetryCnt: 1}))
	src := must2(r.nic[0].RegMR(r.ms.Alloc("src", mem.Loc{}, 4096, false), 0, 4096, 0x1000, AccessLocalWrite, r.gpu[0], false))
	require.NoError(t, qp.PostSend([]WR{{ID: 1, Op: WRWrite, Signaled: true, Local: SGE{MR: src, Len: 64}, RemoteVA: 0x5000, RKey: 1}}))
	require.NoError(t, r.s.RunUntil(r.s.Now().Add(20*sim.Microsecond)))
	require.Positive(t, r.nic[1].Stats().UnknownQP, "the write to the reserved QPN was not dropped as unknown")
	r.cq[1].fatal(r.s.Now()) // must not trip over the empty slot
}
