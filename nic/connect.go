package nic

import "github.com/ginsim/ginsim/fabric"

// ConnParams are the attributes a connection recipe sets on an RC QP:
// RTR's path MTU and advertised RNR NAK timer, RTS's ACK timeout and
// retry counts. PSNs start at 0 on both sides.
type ConnParams struct {
	MTU         int
	MinRNRTimer uint8
	Timeout     uint8
	RetryCnt    uint8
	RNRRetry    uint8
}

// Connect takes a QP in RESET through INIT, RTR (to QP peerQPN at
// endpoint peer) and RTS, as a host does with three ibv_modify_qp calls
// once the peers have exchanged QP numbers.
func (qp *QP) Connect(peer fabric.EndpointID, peerQPN uint32, p ConnParams) error {
	if err := qp.Modify(QPSInit, ModifyAttr{}); err != nil {
		return err
	}
	if err := qp.Modify(QPSRTR, ModifyAttr{RemoteEP: peer, RemoteQPN: peerQPN, MTU: p.MTU, MinRNRTimer: p.MinRNRTimer}); err != nil {
		return err
	}
	return qp.Modify(QPSRTS, ModifyAttr{Timeout: p.Timeout, RetryCnt: p.RetryCnt, RNRRetry: p.RNRRetry})
}
