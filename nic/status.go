package nic

import "strconv"

// Status is the completion status of a work request, the closed set of
// ibv_wc_status values the model produces. It is deliberately not an error:
// a completion status is data carried by a CQE.
type Status uint8

// Completion statuses (ibv_wc_status names).
const (
	StatusSuccess        Status = iota // IBV_WC_SUCCESS
	StatusLocLenErr                    // IBV_WC_LOC_LEN_ERR: local length error (SGE too short, inline too long, atomic not 8 B)
	StatusLocQPOpErr                   // IBV_WC_LOC_QP_OP_ERR: local QP operation error (bad opcode, WAIT without CQ)
	StatusLocProtErr                   // IBV_WC_LOC_PROT_ERR: local protection error (bad L_Key, access rights)
	StatusWRFlushErr                   // IBV_WC_WR_FLUSH_ERR: flushed because the QP is in the error state
	StatusBadRespErr                   // IBV_WC_BAD_RESP_ERR: unexpected response opcode
	StatusLocAccessErr                 // IBV_WC_LOC_ACCESS_ERR: local access error (responder: receive buffer)
	StatusRemInvReqErr                 // IBV_WC_REM_INV_REQ_ERR: remote NAK invalid request
	StatusRemAccessErr                 // IBV_WC_REM_ACCESS_ERR: remote NAK access error (R_Key, bounds, rights)
	StatusRemOpErr                     // IBV_WC_REM_OP_ERR: remote NAK operational error
	StatusRetryExcErr                  // IBV_WC_RETRY_EXC_ERR: transport retry counter exceeded
	StatusRNRRetryExcErr               // IBV_WC_RNR_RETRY_EXC_ERR: RNR retry counter exceeded
)

var statusNames = [...]string{
	"success", "local length error", "local QP operation error", "local protection error",
	"WR flush error", "bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded",
}

// String returns the ibv_wc_status_str text of s.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// WCOpcode is the opcode of a completion (ibv_wc_opcode).
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend            WCOpcode = iota // IBV_WC_SEND
	WCRDMAWrite                       // IBV_WC_RDMA_WRITE
	WCRDMARead                        // IBV_WC_RDMA_READ
	WCCompSwap                        // IBV_WC_COMP_SWAP
	WCFetchAdd                        // IBV_WC_FETCH_ADD
	WCNop                             // local NOP completion
	WCWait                            // cross-channel WAIT completion
	WCRecv                            // IBV_WC_RECV
	WCRecvRDMAWithImm                 // IBV_WC_RECV_RDMA_WITH_IMM
)

var wcNames = [...]string{"SEND", "RDMA_WRITE", "RDMA_READ", "COMP_SWAP", "FETCH_ADD", "NOP", "WAIT", "RECV", "RECV_RDMA_WITH_IMM"}

// String returns the IBV_WC_ name without its prefix.
func (o WCOpcode) String() string {
	if int(o) < len(wcNames) {
		return wcNames[o]
	}
	return "WCOpcode(" + strconv.Itoa(int(o)) + ")"
}

// WROpcode is the opcode of a send work request.
type WROpcode uint8

// Send work request opcodes.
const (
	WRWrite    WROpcode = iota // RDMA WRITE
	WRWriteImm                 // RDMA WRITE with immediate (consumes a receive WQE at the responder)
	WRSend                     // SEND
	WRSendImm                  // SEND with immediate
	WRRead                     // RDMA READ
	WRFetchAdd                 // ATOMIC FETCH_AND_ADD (8 bytes)
	WRCmpSwap                  // ATOMIC COMPARE_AND_SWAP (8 bytes)
	// WRWait is the mlx5 cross-channel WAIT: the send queue stops at this WQE
	// until CQ WaitCQ has produced (landed) CQE index >= WaitIndex.
	WRWait
	// WRNop is a local WQE that sends nothing; its completion comes after
	// every earlier WQE of the QP completed (completions are in order).
	WRNop
	numWROpcodes
)

var wrNames = [...]string{"WRITE", "WRITE_IMM", "SEND", "SEND_IMM", "READ", "FETCH_ADD", "CMP_SWAP", "WAIT", "NOP"}

// String returns the opcode's verbs name.
func (o WROpcode) String() string {
	if int(o) < len(wrNames) {
		return wrNames[o]
	}
	return "WROpcode(" + strconv.Itoa(int(o)) + ")"
}

func (o WROpcode) isAtomic() bool   { return o == WRFetchAdd || o == WRCmpSwap }
func (o WROpcode) isRdAtomic() bool { return o == WRRead || o.isAtomic() }
func (o WROpcode) isLocal() bool    { return o == WRWait || o == WRNop }
func (o WROpcode) hasPayload() bool { return o <= WRSendImm }

func (o WROpcode) wc() WCOpcode {
	switch o {
	case WRWrite, WRWriteImm:
		return WCRDMAWrite
	case WRSend, WRSendImm:
		return WCSend
	case WRRead:
		return WCRDMARead
	case WRFetchAdd:
		return WCFetchAdd
	case WRCmpSwap:
		return WCCompSwap
	case WRWait:
		return WCWait
	}
	return WCNop
}

// QPState is the state of a queue pair (ibv_qp_state).
type QPState uint8

// QP states. SQD and SQE are not modelled: a send-queue error moves the QP
// to QPSErr.
const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSErr
)

var qpsNames = [...]string{"RESET", "INIT", "RTR", "RTS", "ERR"}

// String returns the state's verbs name.
func (s QPState) String() string {
	if int(s) < len(qpsNames) {
		return qpsNames[s]
	}
	return "QPState(" + strconv.Itoa(int(s)) + ")"
}

// Access is a set of memory region access rights (ibv_access_flags).
type Access uint32

// Access rights. Local read is always allowed.
const (
	AccessLocalWrite   Access = 1 << iota // the NIC may write the region for local operations (READ/atomic results, receives)
	AccessRemoteWrite                     // remote RDMA WRITE
	AccessRemoteRead                      // remote RDMA READ
	AccessRemoteAtomic                    // remote atomics
)
