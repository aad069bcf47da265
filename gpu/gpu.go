package gpu

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// GPU is one simulated GPU: its HBM, its PCIe function and NVLink port, and
// the thread groups launched on it.
type GPU struct {
	s     *sim.Sim
	cfg   Config
	name  string
	node  int
	local int
	ms    *mem.System
	bus   *pcie.Tree
	dev   pcie.DevID
	nvl   *nvlink.Domain

	groups  []*Group  // groups made and not yet dropped (compact), in order
	made    int       // groups made, children included (SM placement)
	joined  int       // children in groups whose Parallel section has joined
	ended   int       // groups whose body returned or that called End, since the last compaction
	kept    int       // len(groups) after the last compaction
	retired Stats     // busy and poll time of the groups compact dropped
	pend    []pending // deferred writes (landing in the future), pooled
	free    []int32
	poll    *rand.Rand // spin-loop phases (pollPhase), made on first use
	jit     *rand.Rand // WriteJitter draws, made on first use
}

// pollPhase returns how long after a change of a polled word the next poll
// read of a spin loop with period per comes: uniform in [0, per). A loop's
// period jitters with L2 slice and crossbar contention, so its phase
// against another agent's store is not fixed; a rigid grid would lock
// ping-pongs into the same (lucky or unlucky) phase every round.
func (g *GPU) pollPhase(per sim.Duration) sim.Duration {
	if per <= 1 {
		return 0
	}
	if g.poll == nil {
		g.poll = g.s.Rand("gpu/" + g.name + "/poll")
	}
	return sim.Duration(g.poll.Int64N(int64(per)))
}

// writeJitter draws the exploration delay of a peer write (WriteJitter).
func (g *GPU) writeJitter() sim.Duration {
	if g.jit == nil {
		g.jit = g.s.Rand("gpu/" + g.name + "/write-jitter")
	}
	return sim.Duration(g.jit.Int64N(int64(g.cfg.WriteJitter)))
}

// pending is one write in flight: applied to its region when it lands.
type pending struct {
	r     *mem.Region
	off   uint64
	v     uint64
	n     uint64
	op    uint8 // pendStore, pendWrite, pendAdd
	data  []byte
	has   bool // data holds the bytes (backed source)
	agent string
}

const (
	pendStore uint8 = iota
	pendWrite
	pendAdd
)

// New returns GPU name, node-local index local on node, with its PCIe
// function dev in bus and its port local in nvl (nvl may be nil for a node
// without NVLink; bus may be nil for a GPU that never leaves HBM, as in unit
// tests). It panics on an invalid configuration.
func New(s *sim.Sim, cfg Config, name string, node, local int, ms *mem.System, bus *pcie.Tree, dev pcie.DevID, nvl *nvlink.Domain) *GPU {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if bus != nil {
		// Writes arriving at the GPU's PCIe port cross its hub to the L2
		// before SMs (and the NIC's later reads) can see them.
		bus.SetMemWriteLatency(dev, cfg.HubLatency)
	}
	return &GPU{s: s, cfg: cfg, name: name, node: node, local: local, ms: ms, bus: bus, dev: dev, nvl: nvl}
}

// Name returns the GPU's name.
func (g *GPU) Name() string { return g.name }

// Node returns the index of the GPU's node.
func (g *GPU) Node() int { return g.node }

// Local returns the GPU's index within its node (its NVLink port).
func (g *GPU) Local() int { return g.local }

// Bus returns the node's PCIe tree.
func (g *GPU) Bus() *pcie.Tree { return g.bus }

// Dev returns the GPU's PCIe function.
func (g *GPU) Dev() pcie.DevID { return g.dev }

// NVLink returns the node's NVLink domain (nil if none).
func (g *GPU) NVLink() *nvlink.Domain { return g.nvl }

// Sim returns the simulation.
func (g *GPU) Sim() *sim.Sim { return g.s }

// Mem returns the memory system.
func (g *GPU) Mem() *mem.System { return g.ms }

// Config returns the GPU's parameters.
func (g *GPU) Config() Config { return g.cfg }

// Groups returns the groups that have not finished (launched groups and
// the one-thread children of the Parallel sections still running), in the
// order they were made. Finished groups are dropped, their time kept in
// Stats, so that a long run's warps and flushes do not accumulate.
func (g *GPU) Groups() []*Group {
	g.compact()
	return g.groups
}

// newGroup makes a group on the next SM in round-robin order. The groups
// are compacted whenever their list has doubled since the last time, or
// half of it has ended since (a kernel's finished warps are dropped when
// the next kernel launches, not kept while it runs).
func (g *GPU) newGroup(name string, threads int) *Group {
	t := &Group{g: g, agent: g.name + "/" + name, size: int32(threads), sm: int32(g.made % g.cfg.SMs)}
	g.made++
	if n := len(g.groups); n >= max(2*g.kept, 64) || g.ended >= 64 && 2*g.ended >= n {
		g.compact()
	}
	g.groups = append(g.groups, t)
	return t
}

// compact drops finished groups and the children of joined Parallel
// sections from groups, keeping the busy and poll time of the launched
// ones for Stats.
func (g *GPU) compact() {
	g.groups = slices.DeleteFunc(g.groups, func(t *Group) bool {
		switch {
		case t.joined:
			return true
		case t.Done():
			if !t.child {
				g.retired.Busy += t.busy
				g.retired.Poll += t.poll
			}
			return true
		}
		return false
	})
	g.joined, g.ended, g.kept = 0, 0, len(g.groups)
}

// Alloc allocates size bytes of this GPU's HBM.
func (g *GPU) Alloc(name string, size sim.Bytes, backed bool) *mem.Region {
	return g.ms.Alloc(name, mem.Loc{Node: g.node, Kind: mem.HBM, GPU: g.local}, size, backed)
}

// AllocHost allocates size bytes of pinned host memory on the GPU's node
// (cudaHostAlloc): the GPU reaches it over PCIe.
func (g *GPU) AllocHost(name string, size sim.Bytes, backed bool) *mem.Region {
	return g.ms.Alloc(name, mem.Loc{Node: g.node, Kind: mem.Host}, size, backed)
}

// Cycles converts n SM clock cycles to a duration, rounded up.
func (g *GPU) Cycles(n int64) sim.Duration {
	if n <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), uint64(sim.Second))
	q, rem := bits.Div64(hi, lo, uint64(g.cfg.Clock))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		panic("gpu: cycle count overflows simulated time")
	}
	return sim.Duration(q)
}

// where says how the GPU reaches a region.
type where uint8

const (
	local where = iota // own HBM
	peer               // another GPU of the node, over NVLink
	host               // host memory of the node, over PCIe
)

func (g *GPU) where(r *mem.Region) where {
	l := r.Loc()
	if l.Node != g.node {
		panic(fmt.Sprintf("gpu %s: t=%v: region %v is on another node: device code cannot address it", g.name, g.s.Now(), r))
	}
	switch {
	case l.Kind == mem.Host:
		if g.bus == nil {
			panic(fmt.Sprintf("gpu %s: t=%v: host region %v but the GPU has no PCIe tree", g.name, g.s.Now(), r))
		}
		return host
	case l.GPU == g.local:
		return local
	default:
		if g.nvl == nil {
			panic(fmt.Sprintf("gpu %s: t=%v: peer region %v but the node has no NVLink domain", g.name, g.s.Now(), r))
		}
		return peer
	}
}

// later schedules a write to land at `at` (the source bytes are copied).
func (g *GPU) later(at sim.Time, p pending) {
	var i int32
	if n := len(g.free); n > 0 {
		i = g.free[n-1]
		g.free = g.free[:n-1]
		buf := g.pend[i].data
		g.pend[i] = p
		if p.has {
			g.pend[i].data = append(buf[:0], p.data...)
		} else {
			g.pend[i].data = buf[:0] // keep the buffer for reuse
		}
	} else {
		i = int32(len(g.pend))
		if p.has {
			p.data = append([]byte(nil), p.data...)
		}
		g.pend = append(g.pend, p)
	}
	g.s.Post(at, g, uint64(i))
}

// Handle applies a landed write (sim.Handler).
func (g *GPU) Handle(_ *sim.Sim, arg uint64) {
	p := &g.pend[arg]
	switch p.op {
	case pendStore:
		p.r.Store64(p.off, p.v, p.agent)
	case pendAdd:
		p.r.FetchAdd64(p.off, p.v, p.agent)
	default:
		var src []byte
		if p.has {
			src = p.data
		}
		p.r.Write(p.off, src, p.n, p.agent)
	}
	p.r = nil
	g.free = append(g.free, int32(arg))
}

// EventName implements sim.Namer.
func (g *GPU) EventName(arg uint64) string {
	if int(arg) < len(g.pend) && g.pend[arg].r != nil {
		p := &g.pend[arg]
		return fmt.Sprintf("%s/land %s+%d by %s", g.name, p.r.Name(), p.off, p.agent)
	}
	return g.name + "/land"
}

// HostStore64 is a CPU store of v to GPU memory through a GDRCopy (BAR1)
// mapping, issued at `at` (>= now): a posted PCIe write from the root
// complex. The word changes when it lands; HostStore64 returns that time.
func (g *GPU) HostStore64(at sim.Time, r *mem.Region, off, v uint64, agent string) sim.Time {
	landed := g.bus.Write(at, g.bus.Host(), g.dev, 8)
	g.later(landed, pending{r: r, off: off, v: v, op: pendStore, agent: agent})
	return landed
}

// HostLoadTime returns when a CPU load of n bytes of GPU memory through a
// GDRCopy mapping, issued at `at`, completes (an uncached PCIe read).
func (g *GPU) HostLoadTime(at sim.Time, n sim.Bytes) sim.Time {
	return g.bus.Read(at, g.bus.Host(), g.dev, n)
}

// Stats is the accounting of a GPU's groups.
type Stats struct {
	Groups int
	// Busy is SM time charged to groups for work: cycles, issue costs,
	// syncs, fences, loads and atomics.
	Busy sim.Duration
	// Poll is SM time groups spent spinning in WaitWord (also SM-busy on
	// real hardware: the warp keeps its SM slot).
	Poll sim.Duration
}

// Stats returns the accounting of every group launched so far.
func (g *GPU) Stats() Stats {
	st := Stats{Groups: g.made, Busy: g.retired.Busy, Poll: g.retired.Poll}
	for _, t := range g.groups {
		if t.child {
			continue
		}
		st.Busy += t.busy
		st.Poll += t.poll
	}
	return st
}
