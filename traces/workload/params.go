package workload

import (
	"github.com/ginsim/ginsim/sim"
)

// Params are the workload-side GPU costs that are not communication: the
// compute a DeepEP kernel does around its GIN operations. Every field has a
// default and the fact it stands for.
type Params struct {
	// CastCycles is the SM cycles a sending warp spends per token on the
	// cooperative FP8 cast (per-128-channel amax, scale, convert) and the
	// store into the staging buffer: H/(threads of k warps) ≈ 28 elements
	// per thread at ~10 cycles each for H=7168 → ~300 cycles; BF16 sends
	// skip the cast but still stage.
	CastCycles int64
	// ReduceRate is the whole grid's read bandwidth while reducing the k
	// combine contributions per token after the flags: HBM3 at ~3 TB/s
	// peak, ~2 TB/s achieved by a memory-bound kernel.
	ReduceRate sim.BitRate

	// HTSMs is DeepEP's Buffer.num_sms for the high-throughput (normal)
	// kernels: channels = HTSMs/2, each a pair of SMs. 24 is what
	// tests/test_internode.py sets (the library default is 20).
	HTSMs int
	// HTDispatch and HTCombine are the normal kernels' chunking
	// (deep_ep.Config's nvl_send, nvl_recv, rdma_send, rdma_recv); a zero
	// field takes DeepEP's default for the EP size (legacy.py
	// get_dispatch_config / get_combine_config).
	HTDispatch, HTCombine HTChunks
	// SMReadRate and SMWriteRate are one SM's load and store bandwidth,
	// shared by every warp on it (TMA and LSU copies of token records):
	// DeepEP V2's analytic SM model (elastic.py, get_theoretical_num_sms)
	// uses 200 GB/s read and 50 GB/s write per SM.
	SMReadRate, SMWriteRate sim.BitRate
	// HTCoordSleep is the __nanosleep of DeepEP's coordinator warps
	// between scans of the forwarders' heads (NUM_WAIT_NANOSECONDS, 500 ns
	// in configs.cuh).
	HTCoordSleep sim.Duration
}

// HTChunks is the chunking of one DeepEP normal kernel, in tokens:
// Config(num_sms, NVLSend, NVLRecv, RDMASend, RDMARecv).
type HTChunks struct {
	// NVLSend is the most records moved into an NVLink ring before its
	// tail is published (num_max_nvl_chunked_send_tokens).
	NVLSend int
	// NVLRecv is the slots of one NVLink ring
	// (num_max_nvl_chunked_recv_tokens).
	NVLRecv int
	// RDMASend is the records of one chunk put, and the granularity of
	// head credits (num_max_rdma_chunked_send_tokens).
	RDMASend int
	// RDMARecv is the slots of one RDMA receive ring: the credit window
	// per (channel, peer node) (num_max_rdma_chunked_recv_tokens).
	RDMARecv int
}

// DefaultParams returns H100-class workload costs.
func DefaultParams() Params {
	return Params{
		CastCycles: 300,
		ReduceRate: sim.GBps(2000),

		HTSMs:        24,
		SMReadRate:   sim.GBps(200),
		SMWriteRate:  sim.GBps(50),
		HTCoordSleep: 500 * sim.Nanosecond,
	}
}
