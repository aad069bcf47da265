package gpu

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// Scope is a CUDA memory scope (cuda::thread_scope). The values follow CUDA:
// system (0) < device < block < thread, so "given > required" means the
// caller released to a narrower scope than the operation needs.
type Scope uint8

// Memory scopes.
const (
	ScopeSystem Scope = iota // visible to the CPU and to devices over PCIe
	ScopeDevice              // visible to every SM of the GPU
	ScopeBlock               // visible to the threads of one CTA
	ScopeThread              // the issuing thread only
)

var scopeNames = [...]string{"system", "device", "block", "thread"}

func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// Config holds a GPU's size and timing constants. DefaultConfig is an H100
// SXM5; every field documents the hardware fact its default stands for.
// "Measured" values come from validate/gpumicro on H200s (the same SM,
// L2 and clocks as the H100; HBM3e instead of HBM3), 2026-12-01, three
// runs on two machines (validate/gpumicro/measured):
// `ginsim validate gpu` prints them next to the model's.
type Config struct {
	// Mutations break the model on purpose (the mutants of gin/verify,
	// the GIN conformance suite); zero in every real run.
	Mutations Mutations
	// WriteJitter, for schedule exploration only (0 in every profile),
	// delays each posted write to a peer GPU by a seeded draw from
	// [0, WriteJitter), so that writes no fence orders may land out of
	// order, as they may on hardware.
	WriteJitter sim.Duration
	// SMs is the number of streaming multiprocessors (H100 SXM5: 132).
	SMs int
	// Clock is the SM clock in Hz (H100 SXM5 boost: 1.98 GHz); Cycles
	// converts with it.
	Clock int64

	// StoreLatency is the time from an SM issuing a store to local HBM to
	// the store being visible at the L2 (the GPU's point of coherence),
	// where other SMs and PCIe peers (NIC DMA reads) see it, and again from
	// there back to the SM as the store's acknowledgement (what a fence
	// waits for): about half an L2 round trip, ~100 ns. Measured: a store
	// followed by __threadfence takes 210 ns; a flag store seen by a
	// poller on another SM, 248 ns one way.
	StoreLatency sim.Duration
	// StoreIssue is the SM time to issue one store instruction of a group
	// (LSU issue, ~4 cycles); stores are posted, the group does not wait
	// for them to land.
	StoreIssue sim.Duration
	// L2Latency is a load that hits L2: measured 294 cycles, 149 ns
	// (ld.global.cg pointer chase). Polled flags and signal words live in
	// L2.
	L2Latency sim.Duration
	// HBMLatency is a load that misses L2 and reads HBM: measured 327-354
	// ns (650-700 cycles, random lines over 256 MiB-1 GiB, two machines). Used by bulk
	// reads of local data (Read).
	HBMLatency sim.Duration
	// PollInterval is the period of a spin-wait loop on a word in local
	// memory: one ld.acquire.gpu round trip to L2 plus the compare and
	// branch, measured 169-171 ns (178-181 ns for ld.acquire.sys or ld.cv). A poll
	// issued at p reads the word when it reaches the L2, half a load
	// latency later, and returns a load latency after p.
	PollInterval sim.Duration

	// FenceBlock is fence.acq_rel.cta: ordering within the SM, ~10 ns.
	FenceBlock sim.Duration
	// FenceGPU is fence.acq_rel.gpu (__threadfence) with nothing
	// outstanding: measured 147 ns. The fence also waits until the group's
	// local stores are acknowledged (StoreLatency after they land).
	FenceGPU sim.Duration
	// FenceSys is the fixed cost of fence.sc.sys (__threadfence_system):
	// it drains the SM's memory pipeline and waits for the system-level
	// acknowledgement; measured 537 ns for a store plus the fence. The
	// fence also waits until every posted write of the group (PCIe,
	// NVLink) has landed.
	FenceSys sim.Duration

	// AtomicThread is an "atomic" on data private to one thread (resource
	// sharing THREAD): a plain load-modify-store kept in registers or L1,
	// ~4 cycles.
	AtomicThread sim.Duration
	// AtomicBlock is a relaxed CTA-scope atomic on global memory (resource
	// sharing CTA). It still executes at the L2 slice, as device scope does
	// (a dependent atomicAdd_block costs what atomicAdd does).
	AtomicBlock sim.Duration
	// AtomicGPU is a device-scope atomic on local HBM: executed at the
	// word's home L2 slice. Hopper's L2 has two partitions: an atomic on a
	// word homed in the SM's own partition measured 145 ns on an H200, one
	// in the far partition 247 ns, and dependent atomics over words spread
	// across 8 MiB 199 ns (validate/gpumicro atomic_gpu_spread). The model
	// does not place words in partitions, so it charges that mix (loads
	// pay no such difference: an L2 hit is 149 ns anywhere).
	// atomicAdd_system on GPU memory costs the same.
	AtomicGPU sim.Duration

	// CoopSyncWarp is __syncwarp for a warp-sized group: ~10 cycles, 5 ns.
	CoopSyncWarp sim.Duration
	// CoopSyncCTA is bar.sync for a CTA-sized group: ~60 cycles including
	// arrival skew, 30 ns.
	CoopSyncCTA sim.Duration

	// HubLatency is one traversal between an SM and the GPU's PCIe port:
	// loads and stores to pinned host memory and MMIO stores to a device's
	// BAR (a NIC doorbell) cross the GPU's sysmem hub before the PCIe tree
	// (loads twice), and writes arriving from PCIe (a NIC's DMA, a CPU's
	// GDRCopy store) cross it to the L2 before they are visible. Fitted: a dependent load of pinned host memory took
	// 1191-1200 ns on H200s (validate/gpumicro, in a Firecracker VM whose
	// IOMMU may add some of it); the PCIe links, switch, root complex and
	// DRAM read account for 652 ns, leaving 2 x 272 ns.
	HubLatency sim.Duration
	// MMIOIssue is the SM time to issue an uncached MMIO store to a BAR
	// mapping (a NIC doorbell): ~20 cycles, 10 ns; the store then travels
	// the PCIe tree as a posted write.
	MMIOIssue sim.Duration
	// WTStoreBytes is the width of one write-through store to host memory:
	// 16 B (st.global.wt.v4.u32), one PCIe write TLP each.
	WTStoreBytes sim.Bytes
	// WTStoreIssue is the SM time to issue one write-through store to
	// pinned host memory: stores to system memory leave through the
	// GPU's sysmem path, not the L2, and issue far slower than local ones
	// (15.4 ns per 16-B st.global.wt measured on an H200 by
	// validate/gpumicro, against 10 ns per local store loop iteration).
	WTStoreIssue sim.Duration
	// SMStoreBytesPerCycle bounds how fast one group can issue bulk stores
	// to local HBM: 32 B/cycle ≈ 63 GB/s per SM, as one CTA writing an
	// H200's HBM measured (16.2 ns per KiB).
	SMStoreBytesPerCycle sim.Bytes
	// PeerStoreBytesPerCycle bounds the same for stores into a peer GPU's
	// memory over NVLink (LSA copies): 25 B/cycle ≈ 50 GB/s, as one CTA
	// measured on an H200 pair (20.2 ns per KiB) and one warp's 64-KiB
	// burst (about 21 ns per KiB), so 8 SMs fill one direction of
	// NVLink 4.
	PeerStoreBytesPerCycle sim.Bytes
	// WarpCopyRate is one warp's rate copying a message it does not hold
	// in registers with DeepEP's UNROLLED_WARP_COPY(8, ...) (each lane
	// loads 8 x 16 B with ld.global.nc, then stores them; 4 KiB in flight
	// per pass, so the rate is bound by the load latency, not by the store
	// path): measured 892-901 ns per 7408-B message (8.3 GB/s) on an H200
	// with the source in L2, as a send buffer the warps just wrote, and
	// 1468-1537 ns (4.8-5.0 GB/s) from HBM (validate/gpumicro/warpcopy.cu,
	// lsu_local_warp_l2_msg and lsu_local_warp_msg; the store's target,
	// local or a peer, does not change a warp's store issue, as
	// warp_write_kib and peer_warp_write_kib measured the same 61.7 ns per
	// KiB).
	WarpCopyRate sim.BitRate
	// CopyRatePerSM is what one SM's warps copy together that way, HBM to
	// HBM: 8 CTAs of 32 warps measured 338.2 GB/s on an H200 (42.3 GB/s
	// per SM; 8 warps per SM: 29.7 GB/s; warpcopy.cu
	// lsu_local_sms8_w32_msg, lsu_local_sms8_w8_msg). DeepEP's and NCCL
	// EP's low-latency kernels run 30-32 warps per SM.
	CopyRatePerSM sim.BitRate
	// WarpTMARate is one warp's rate copying a message from local HBM
	// through the TMA pipeline of DeepEP's and NCCL EP's low-latency
	// combine (three 2-KiB shared-memory stages, one bulk load prefetched,
	// cp.async.bulk.wait_group.read before a stage is reused): measured
	// 2064-2179 ns per 14336-B message (6.6-6.9 GB/s) on an H200
	// (warpcopy.cu tma_local_warp_msg; 1855 ns with the source in L2).
	WarpTMARate sim.BitRate
	// TMARatePerSM is what one SM's warps copy together through such TMA
	// pipelines, HBM to HBM: 8 CTAs of 32 warps measured 239.3 GB/s on an
	// H200 (29.9 GB/s per SM), 8 of 8 warps 231.5 GB/s (28.9 GB/s per SM;
	// warpcopy.cu tma_local_sms8_w32_msg, tma_local_sms8_w8_msg), so
	// above four warps the SM, not the warp, bounds the copy.
	TMARatePerSM sim.BitRate
}

// DefaultConfig returns an H100 SXM5 configuration.
func DefaultConfig() Config {
	return Config{
		SMs:                    132,
		Clock:                  1_980_000_000,
		StoreLatency:           100 * sim.Nanosecond,
		StoreIssue:             2 * sim.Nanosecond,
		L2Latency:              150 * sim.Nanosecond,
		HBMLatency:             340 * sim.Nanosecond,
		PollInterval:           170 * sim.Nanosecond,
		FenceBlock:             10 * sim.Nanosecond,
		FenceGPU:               150 * sim.Nanosecond,
		FenceSys:               525 * sim.Nanosecond,
		AtomicThread:           2 * sim.Nanosecond,
		AtomicBlock:            199 * sim.Nanosecond,
		AtomicGPU:              199 * sim.Nanosecond,
		CoopSyncWarp:           5 * sim.Nanosecond,
		CoopSyncCTA:            30 * sim.Nanosecond,
		MMIOIssue:              10 * sim.Nanosecond,
		HubLatency:             270 * sim.Nanosecond,
		WTStoreBytes:           16,
		WTStoreIssue:           15 * sim.Nanosecond,
		SMStoreBytesPerCycle:   32,
		PeerStoreBytesPerCycle: 25,
		WarpCopyRate:           66_400 * sim.Mbps, // 8.3 GB/s
		CopyRatePerSM:          sim.GBps(42),
		WarpTMARate:            52_800 * sim.Mbps, // 6.6 GB/s
		TMARatePerSM:           sim.GBps(30),
	}
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case c.SMs <= 0:
		return fmt.Errorf("gpu: SMs %d must be positive", c.SMs)
	case c.Clock <= 0:
		return fmt.Errorf("gpu: Clock %d Hz must be positive", c.Clock)
	case c.PollInterval <= 0:
		return fmt.Errorf("gpu: PollInterval %v must be positive", c.PollInterval)
	case c.WTStoreBytes <= 0 || c.SMStoreBytesPerCycle <= 0 || c.PeerStoreBytesPerCycle <= 0:
		return fmt.Errorf("gpu: store widths must be positive")
	case c.WarpCopyRate <= 0 || c.CopyRatePerSM <= 0 || c.WarpTMARate <= 0 || c.TMARatePerSM <= 0:
		return fmt.Errorf("gpu: warp copy rates must be positive")
	case c.StoreLatency < 0 || c.StoreIssue < 0 || c.L2Latency < 0 || c.HBMLatency < 0 ||
		c.FenceBlock < 0 || c.FenceGPU < 0 || c.FenceSys < 0 || c.AtomicThread < 0 ||
		c.AtomicBlock < 0 || c.AtomicGPU < 0 || c.CoopSyncWarp < 0 || c.CoopSyncCTA < 0 || c.MMIOIssue < 0 ||
		c.WTStoreIssue < 0 || c.HubLatency < 0:
		return fmt.Errorf("gpu: latencies must not be negative")
	}
	return nil
}

// Mutations are deliberately broken GPU behaviours (bit flags).
type Mutations uint32

// The GPU mutants.
const (
	// MutFenceNoWait: a system-scope fence neither waits for the group's
	// posted writes to land nor costs anything.
	MutFenceNoWait Mutations = 1 << iota
	// MutParallelDropLast: a coop's Parallel (or ParallelThen) fan-out of
	// n > 1 items skips the last item.
	MutParallelDropLast
	// MutStoreUndrained: a local 8-byte store (Store64) lingers on its way
	// to L2 for StoreLinger, and no fence waits for it: a release fence no
	// longer makes the group's earlier stores visible, so a GIN put that
	// follows may read its source before the store (spec 2.4.5).
	MutStoreUndrained
)

// StoreLinger is how long a store takes to land under MutStoreUndrained:
// longer than any path from a put's issue to the NIC reading its source.
const StoreLinger = 20 * sim.Microsecond
