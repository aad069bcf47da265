package moe

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
	// CopyRate is one receiving warp group's copy bandwidth out of the
	// receive buffer into the packed output (LL dispatch recv) or into
	// staging (LL combine send): DeepEP's analytic model uses 200 GB/s
	// read and 50 GB/s write per SM; a warp group is a third to a half of
	// an SM, so ~60 GB/s.
	CopyRate sim.BitRate
	// ReduceRate is the whole grid's read bandwidth while reducing the k
	// combine contributions per token after the flags: HBM3 at ~3 TB/s
	// peak, ~2 TB/s achieved by a memory-bound kernel.
	ReduceRate sim.BitRate
}

// DefaultParams returns H100-class workload costs.
func DefaultParams() Params {
	return Params{
		CastCycles: 300,
		CopyRate:   sim.GBps(60),
		ReduceRate: sim.GBps(2000),
	}
}

// doorbellPath is the unloaded latency from an issue returning to the NIC
// holding the WQE: the MMIO doorbell through the GPU's PCIe switch, the
// NIC's doorbell handling and one WQE fetch read round trip. The breakdown
// charges the rest of issue-to-wire as NIC queueing.
func (p Params) doorbellPath(e *env) sim.Duration {
	pc := e.m.Profile.PCIe
	hop := 2*pc.LinkLatency + pc.SwitchLatency
	return hop + e.m.Profile.NIC.DoorbellCost + 2*hop + pc.DevMemReadLatency
}
