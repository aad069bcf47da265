package proxy

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// Config holds the proxy backend's parameters: the ring size, the GPU-side
// descriptor build work and the CPU thread's cost of every step of its
// loop.
type Config struct {
	// Mutations break documented guarantees on purpose (gin/verify's
	// mutants); zero in every real run.
	Mutations Mutations
	// QueueSize is the GFD ring size per (context, peer): 256, NCCL's cap
	// from the IB verbs request pool (NCCL_NET_MAX_REQUESTS).
	QueueSize int
	// GFDBuildCycles is the GPU work to pack a GFD's fields into qwords
	// with their flag bits before the stores (~40 instructions).
	GFDBuildCycles int64

	// PassCost is the CPU cost of one ginProgress call for one context:
	// the progress mutex lock/unlock and the calls into the plugin.
	PassCost sim.Duration
	// SlotCheckCost is one load of a ring slot's first qword that finds
	// nothing new: an L1/L2 hit on a line the CPU already holds.
	SlotCheckCost sim.Duration
	// GFDLineCost is reading one 64-byte line of a newly written GFD: the
	// GPU's write-through stores invalidated it, so it is a miss to DRAM
	// or the LLC where PCIe writes allocate (~100 ns).
	GFDLineCost sim.Duration
	// QwordFlagCost is checking one qword's flag and copying it once the
	// line is in cache.
	QwordFlagCost sim.Duration
	// ZeroCost is zeroing the ring slot (8 or 16 stores to cached lines).
	ZeroCost sim.Duration
	// InlineCopyCost is copying a putValue payload into the inline buffer.
	InlineCopyCost sim.Duration
	// PostSendBase is ibv_post_send's fixed cost before the doorbell:
	// locks, the SQ producer update, the write barrier (mlx5 ~60 ns).
	PostSendBase sim.Duration
	// PostSendPerWR is building one 64-byte WQE in the host send queue
	// (mlx5's set_*_seg helpers, ~30 ns).
	PostSendPerWR sim.Duration
	// DoorbellIssue is the CPU cost of issuing the doorbell MMIO store (a
	// 64-byte BlueFlame write for a single WR, else 8 bytes); the write
	// then crosses the PCIe tree.
	DoorbellIssue sim.Duration
	// PollCQCost is one ibv_poll_cq call of up to 4 entries that finds no
	// new CQE (reads the next CQE's owner byte from a cached line).
	PollCQCost sim.Duration
	// CQEReadCost is reading a new CQE the NIC DMA-wrote into host memory
	// (a cache miss) and handing it back as an ibv_wc.
	CQEReadCost sim.Duration
	// GDRCopy places the consumer indices (cis) and the counters in GPU
	// memory, mapped to the CPU through GDRCopy (NCCL_GDRCOPY_ENABLE=1):
	// the CPU updates them with uncached stores across PCIe and the GPU
	// reads them from its L2. Off, NCCL's default (NCCL_GDRCOPY_ENABLE
	// defaults to 0, src/init.cc; gin_host_proxy.cc's
	// allocMemCPUAccessible then calls cuMemHostAlloc), they are in pinned
	// host memory: the CPU's updates are cached stores and every GPU read
	// of them (the credit check of each GFD, a flush's and a counter
	// wait's polls) crosses PCIe.
	GDRCopy bool
	// GDRStoreIssue is the CPU cost of an uncached store through a
	// GDRCopy mapping (ci and counter updates); the write then crosses
	// PCIe to the GPU.
	GDRStoreIssue sim.Duration
	// HostStoreIssue is the CPU cost of a cached store to pinned host
	// memory (ci and counter updates without GDRCopy); the GPU's next
	// PCIe read sees it.
	HostStoreIssue sim.Duration
	// YieldCost is std::this_thread::yield() between passes: a
	// sched_yield system call with nothing else runnable (~150 ns).
	YieldCost sim.Duration

	// AckTimeout is the QPs' IBTA local ACK timeout code
	// (NCCL_IB_TIMEOUT, default 20: 4.096 us × 2^20 ≈ 4.3 s): how long a
	// lost tail waits before go-back-N. 0 keeps 20.
	AckTimeout uint8

	// CPUPermille, when set, scales every CPU cost above for the thread of
	// world rank w, in per mille (1000: as listed; 2500: 2.5 times
	// slower): a slow or contended core, for fault injection. nil, or a
	// value not above 0: as listed.
	CPUPermille func(world int) int64
}

// DefaultConfig returns costs for a current x86 server CPU.
func DefaultConfig() Config {
	return Config{
		QueueSize:      256,
		GFDBuildCycles: 40,
		PassCost:       40 * sim.Nanosecond,  // uncontended mutex pair plus two indirect calls
		SlotCheckCost:  5 * sim.Nanosecond,   // cached load and compare
		GFDLineCost:    100 * sim.Nanosecond, // DRAM/LLC miss on a line written by a PCIe device
		QwordFlagCost:  1 * sim.Nanosecond,   // flag test and copy of one cached qword
		ZeroCost:       10 * sim.Nanosecond,  // 8-16 stores to cached lines
		InlineCopyCost: 5 * sim.Nanosecond,   // one 8-byte store
		PostSendBase:   60 * sim.Nanosecond,  // mlx5 post_send bookkeeping and wmb
		PostSendPerWR:  30 * sim.Nanosecond,  // one WQE's segments
		DoorbellIssue:  20 * sim.Nanosecond,  // write-combined MMIO store issue
		PollCQCost:     25 * sim.Nanosecond,  // mlx5 poll_cq finding nothing
		CQEReadCost:    80 * sim.Nanosecond,  // miss on a CQE line DMA-written by the NIC
		GDRStoreIssue:  30 * sim.Nanosecond,  // uncached store issue to BAR1
		HostStoreIssue: 5 * sim.Nanosecond,   // one cached 8-byte store
		YieldCost:      150 * sim.Nanosecond, // sched_yield round trip into the kernel
	}
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case c.QueueSize < 1 || c.QueueSize&(c.QueueSize-1) != 0:
		return fmt.Errorf("proxy: QueueSize %d must be a power of two", c.QueueSize)
	case c.GFDBuildCycles < 0:
		return fmt.Errorf("proxy: GFDBuildCycles %d must not be negative", c.GFDBuildCycles)
	case c.PassCost < 0 || c.SlotCheckCost < 0 || c.GFDLineCost < 0 || c.QwordFlagCost < 0 || c.ZeroCost < 0 ||
		c.InlineCopyCost < 0 || c.PostSendBase < 0 || c.PostSendPerWR < 0 || c.DoorbellIssue < 0 ||
		c.PollCQCost < 0 || c.CQEReadCost < 0 || c.GDRStoreIssue < 0 || c.HostStoreIssue < 0 || c.YieldCost < 0:
		return fmt.Errorf("proxy: negative CPU cost")
	case c.AckTimeout > 31:
		return fmt.Errorf("proxy: AckTimeout %d out of range [0, 31]", c.AckTimeout)
	case c.PassCost+c.YieldCost <= 0:
		return fmt.Errorf("proxy: an idle pass must take time (PassCost+YieldCost > 0)")
	}
	return nil
}

// Mutations are deliberately broken proxy behaviours (bit flags).
type Mutations uint32

// The proxy mutants.
const (
	// MutCIAtPost: the CPU marks a GFD done (advancing ci, so flush
	// returns) when it posts it, not when its CQE arrives.
	MutCIAtPost Mutations = 1 << iota
	// MutCounterAtPost: the CPU bumps a counter when it posts the GFD.
	MutCounterAtPost
	// MutAtomicFirst: the signal's ATOMIC is posted before the put's
	// WRITE in the chain.
	MutAtomicFirst
)
