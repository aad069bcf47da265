package gdaki

import "fmt"

// Config holds the GDAKI backend's parameters. GPU instruction costs come
// from gpu.Config; the fields here are the GDAKI-specific ones.
type Config struct {
	// Mutations break documented guarantees on purpose (gin/verify's
	// mutants); zero in every real run.
	Mutations Mutations
	// QueueDepth is the SQ depth in WQEs of every QP when
	// Requirements.GinQueueDepth is 0: NCCL_GIN_GDAKI_QP_DEPTH's default,
	// 128.
	QueueDepth int
	// WQEBuildCycles is the SM work to fill one 64-byte WQE before storing
	// it: control segment, remote address/rkey, local address/lkey/length,
	// each byte-swapped to big endian (DOCA's wqe_prepare_* helpers,
	// roughly 60 instructions at ~1 IPC).
	WQEBuildCycles int64
	// CQEParseCycles is the SM work after a poll saw a CQE's owner bit:
	// reading opcode/syndrome and wqe_counter and the atomicMax on
	// cq.cqe_ci (~20 instructions plus the atomic's issue).
	CQEParseCycles int64
	// MTU is the path MTU of every QP (NCCL's gdakiConnectQp uses 4096).
	MTU int
	// AckTimeout is the IBTA local ACK timeout code (NCCL_IB_TIMEOUT,
	// default 20: 4.096 us * 2^20 ~ 4.3 s).
	AckTimeout uint8
	// RetryCnt is the transport retry count (NCCL_IB_RETRY_CNT, 7).
	RetryCnt uint8
	// RNRRetry is the RNR retry count (7: infinite), MinRNRTimer the RNR
	// timer code NCCL sets (12).
	RNRRetry, MinRNRTimer uint8
}

// DefaultConfig returns NCCL 2.30's GDAKI settings.
func DefaultConfig() Config {
	return Config{
		QueueDepth:     128, // NCCL_GIN_GDAKI_QP_DEPTH default
		WQEBuildCycles: 60,  // ~60 SASS instructions per WQE in DOCA's prepare helpers
		CQEParseCycles: 20,  // CQE field reads and the cqe_ci atomicMax issue
		MTU:            4096,
		AckTimeout:     20,
		RetryCnt:       7,
		RNRRetry:       7,
		MinRNRTimer:    12,
	}
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case c.QueueDepth < 1 || c.QueueDepth&(c.QueueDepth-1) != 0:
		return fmt.Errorf("gdaki: QueueDepth %d must be a power of two", c.QueueDepth)
	case c.WQEBuildCycles < 0 || c.CQEParseCycles < 0:
		return fmt.Errorf("gdaki: negative cycle counts")
	case c.MTU < 256 || c.MTU > 4096 || c.MTU&(c.MTU-1) != 0:
		return fmt.Errorf("gdaki: MTU %d", c.MTU)
	case c.AckTimeout > 31 || c.RetryCnt > 7 || c.RNRRetry > 7 || c.MinRNRTimer > 31:
		return fmt.Errorf("gdaki: QP retry/timeout attributes out of range")
	}
	return nil
}

// maxWQEBytes is the largest transfer of one WQE (DOCA: 2^30 bytes); NCCL
// splits larger puts and gets into 1-GiB WQEs.
const maxWQEBytes = 1 << 30

// Mutations are deliberately broken GDAKI behaviours (bit flags).
type Mutations uint32

// The GDAKI mutants.
const (
	// MutFlushEarly: flush waits for the CQE before the last WQE of its
	// snapshot, not the last.
	MutFlushEarly Mutations = 1 << iota
	// MutCounterNoWait: the counter companion omits its WAIT, so the
	// counter counts at post time, not at completion.
	MutCounterNoWait
)
