package verify

import (
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
)

// Mutant is a deliberately broken model: Apply switches it on in an
// environment's configuration.
type Mutant struct {
	Name string
	// Where is the package broken.
	Where string
	// Breaks is the guarantee it breaks (spec section).
	Breaks string
	// Backends it can affect (nil: every backend).
	Backends []string
	apply    func(c *bench.EnvConfig)
}

// Apply switches the mutant on in c (after c's backend configs are set).
func (m *Mutant) Apply(c *bench.EnvConfig) { m.apply(c) }

func ginMut(x gin.Mutations) func(*bench.EnvConfig) {
	return func(c *bench.EnvConfig) { c.Mutations |= x }
}

func gdakiMut(x gdaki.Mutations) func(*bench.EnvConfig) {
	return func(c *bench.EnvConfig) {
		if c.GDAKI != nil {
			c.GDAKI.Mutations |= x
		}
	}
}

func proxyMut(x proxy.Mutations) func(*bench.EnvConfig) {
	return func(c *bench.EnvConfig) {
		if c.Proxy != nil {
			c.Proxy.Mutations |= x
		}
	}
}

func tune(f func(p *machine.Profile)) func(*bench.EnvConfig) {
	return func(c *bench.EnvConfig) {
		prev := c.Tune
		c.Tune = func(p *machine.Profile) {
			if prev != nil {
				prev(p)
			}
			f(p)
		}
	}
}

// Mutants returns the registry, in a fixed order.
func Mutants() []Mutant {
	return []Mutant{
		{Name: "wait-strict", Where: "gin", Breaks: "2.2 waitSignal/waitCounter: return once value >= least (here >)",
			apply: ginMut(gin.MutWaitStrict)},
		{Name: "wait-no-rolling", Where: "gin", Breaks: "2.2 rollingLessEq: compare modulo 2^bits (here plain <=)",
			apply: ginMut(gin.MutWaitNoRolling)},
		{Name: "putvalue-wide", Where: "gin", Breaks: "2.2 putValue: writes sizeof(T) bytes (a 4-byte value writes 8)",
			apply: ginMut(gin.MutPutValueWide)},
		{Name: "reset-no-store", Where: "gin", Breaks: "2.2 resetSignal: the signal reads 0 after a reset",
			apply: ginMut(gin.MutResetNoStore)},
		{Name: "barrier-no-wait", Where: "gin", Breaks: "4.1 GIN barrier: nobody leaves before every member arrived (2.30 skips the waits)",
			apply: ginMut(gin.MutBarrierNoWait)},
		{Name: "lsa-barrier-no-fence", Where: "gin/lsa", Breaks: "4.2 LSA barrier: acq_rel releases earlier stores (no release fence)",
			Backends: lsaBk, apply: ginMut(gin.MutLSABarrierNoFence)},
		{Name: "gdaki-flush-early", Where: "gin/gdaki", Breaks: "2.4.4 flush: waits for the CQE of every WQE in its snapshot (one short)",
			Backends: []string{"gdaki"}, apply: gdakiMut(gdaki.MutFlushEarly)},
		{Name: "gdaki-counter-no-wait", Where: "gin/gdaki", Breaks: "2.4.3 counter: counts at local completion (companion without WAIT)",
			Backends: []string{"gdaki"}, apply: gdakiMut(gdaki.MutCounterNoWait)},
		{Name: "proxy-ci-at-post", Where: "gin/proxy", Breaks: "2.4.4 flush: ci advances on the CQE (here when posted)",
			Backends: []string{"proxy"}, apply: proxyMut(proxy.MutCIAtPost)},
		{Name: "proxy-counter-at-post", Where: "gin/proxy", Breaks: "2.4.3 counter: bumped after the CQE (here when posted)",
			Backends: []string{"proxy"}, apply: proxyMut(proxy.MutCounterAtPost)},
		{Name: "proxy-atomic-first", Where: "gin/proxy", Breaks: "2.4.1 signal after its put's WRITE on the same QP (ATOMIC posted first)",
			Backends: []string{"proxy"}, apply: proxyMut(proxy.MutAtomicFirst)},
		{Name: "nic-ack-ahead", Where: "nic", Breaks: "6.4.5 RC: the responder acknowledges a PSN whose predecessors it has not received (a lost or reordered packet is never resent)",
			Backends: ib, apply: tune(func(p *machine.Profile) { p.NIC.Mutations |= nic.MutAckAhead })},
		{Name: "nic-dup-atomic", Where: "nic", Breaks: "2.3, 6.4.5 exactly once: a duplicate atomic is executed again",
			Backends: ib, apply: tune(func(p *machine.Profile) { p.NIC.Mutations |= nic.MutDupAtomic })},
		{Name: "gpu-fence-no-wait", Where: "gpu", Breaks: "2.4.5, 4.2 a system fence orders the group's earlier posted writes",
			apply: tune(func(p *machine.Profile) { p.GPU.Mutations |= gpu.MutFenceNoWait })},
		{Name: "gpu-parallel-drop-last", Where: "gpu", Breaks: "6.4.2 coop fan-out: flush covers every peer (the last is skipped)",
			apply: tune(func(p *machine.Profile) { p.GPU.Mutations |= gpu.MutParallelDropLast })},
		{Name: "gpu-store-undrained", Where: "gpu", Breaks: "2.4.5 a put carries the issuing thread's earlier stores to its source: a local store lingers 20 us and no release fence waits for it",
			apply: tune(func(p *machine.Profile) { p.GPU.Mutations |= gpu.MutStoreUndrained })},
	}
}

// MutantByName returns the named mutant.
func MutantByName(name string) (Mutant, bool) {
	for _, m := range Mutants() {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}
