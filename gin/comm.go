package gin

import (
	"errors"
	"fmt"

	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Rank is one member of a communicator: a GPU, the NICs local to it (GIN
// connections use them in order), and the CPU side of its node's PCIe tree.
type Rank struct {
	World int // world rank, the index in the communicator
	Node  int // node index
	Local int // node-local GPU index (= LSA rank when the LSA team is the node)
	GPU   *gpu.GPU
	NICs  []*nic.NIC
	Host  pcie.DevID // the root complex (CPU, host memory) of the rank's node

	devComms int // device communicators created over this rank (DevComm.Index)
}

// Sim returns the simulation the rank's devices live on: on a sim.World
// its node's partition, which every event of the rank runs in.
func (r *Rank) Sim() *sim.Sim { return r.GPU.Sim() }

// Part returns the partition of the rank's node (0 on a lone Sim).
func (r *Rank) Part() int { return r.GPU.Sim().Part() }

// CommConfig configures a communicator.
type CommConfig struct {
	// Version selects the behaviour profile (V2_28 or V2_30).
	Version Version
	// Backends are the GIN backends available, by type. Selection follows
	// NCCL: Requirements.Type or ForceType if set, else GDAKI, else Proxy.
	Backends map[Type]Backend
	// ForceType is NCCL_GIN_TYPE (TypeNone: automatic).
	ForceType Type
	// NContexts is NCCL_GIN_NCONTEXTS (2.28 only): the context count is
	// min(4, NContexts); 0 means the default 4.
	NContexts int
	// NConnections is NCCL_GIN_NCONNECTIONS: GIN connections per rank; 0
	// means one per local NIC, capped at 4 and at least 1.
	NConnections int
	// LSASize is NCCL_LSA_TEAM_SIZE: ranks per LSA team; 0 means the ranks
	// of one node.
	LSASize int
	// Mutations break documented guarantees on purpose, for the mutants
	// of the conformance suite (gin/verify); zero in every real run.
	Mutations Mutations
}

// Mutations are deliberately broken front-end behaviours (bit flags).
type Mutations uint32

// The front end's mutants.
const (
	MutWaitStrict        Mutations = 1 << iota // waits treat >= least as > least
	MutWaitNoRolling                           // waits compare plainly, not modulo 2^bits
	MutPutValueWide                            // putValue writes 8 bytes whatever its size
	MutResetNoStore                            // resetSignal changes nothing
	MutBarrierNoWait                           // the 2.30 GIN barrier signals but does not wait
	MutLSABarrierNoFence                       // the LSA barrier arrives without its release fence
)

// Comm is a communicator over ranks.
//
// On a sim.World (ranks whose GPUs live on partitions of one World) each
// rank's front-end state and events belong to the rank's partition; see
// DevComm for what that changes.
type Comm struct {
	s       *sim.Sim // rank 0's
	parts   int      // partitions of the ranks' World (1 on a lone Sim)
	ranks   []*Rank
	cfg     CommConfig
	prof    Profile
	lsaSize int
	windows []*Window
	nextOff uint64
	devs    []*DevComm
	obs     *obs.Bus // nil: not observed (observe.go)
}

// WinAlign is NCCL_WIN_REQUIRED_ALIGNMENT: window offsets and sizes are
// laid out in 4 KiB units.
const WinAlign = 4096

// NewComm creates a communicator. Ranks must be given in world order,
// node-major (the ranks of a node contiguous), each node with the same
// number of ranks.
func NewComm(ranks []*Rank, cfg CommConfig) (*Comm, error) {
	if len(ranks) == 0 {
		return nil, errors.New("gin: communicator without ranks")
	}
	prof, err := ProfileOf(cfg.Version)
	if err != nil {
		return nil, err
	}
	for i, r := range ranks {
		if r == nil || r.GPU == nil {
			return nil, fmt.Errorf("gin: rank %d has no GPU", i)
		}
		if r.World != i {
			return nil, fmt.Errorf("gin: rank at index %d says it is world rank %d", i, r.World)
		}
		if i > 0 && r.Node < ranks[i-1].Node {
			return nil, fmt.Errorf("gin: rank %d on node %d after a rank of node %d: ranks must be node-major", i, r.Node, ranks[i-1].Node)
		}
	}
	lsa := cfg.LSASize
	if lsa == 0 {
		for lsa < len(ranks) && ranks[lsa].Node == ranks[0].Node {
			lsa++
		}
	}
	if lsa <= 0 || len(ranks)%lsa != 0 {
		return nil, fmt.Errorf("gin: %d ranks do not split into LSA teams of %d", len(ranks), lsa)
	}
	for i, r := range ranks {
		if r.Node != ranks[i-i%lsa].Node {
			return nil, fmt.Errorf("gin: LSA team of rank %d spans nodes %d and %d", i, ranks[i-i%lsa].Node, r.Node)
		}
	}
	s := ranks[0].GPU.Sim()
	parts := 1
	if w := s.World(); w != nil {
		parts = w.Parts()
		for i, r := range ranks {
			if r.Sim().World() != w {
				return nil, fmt.Errorf("gin: rank %d is not on the World of rank 0", i)
			}
		}
	}
	return &Comm{s: s, parts: parts, ranks: ranks, cfg: cfg, prof: prof, lsaSize: lsa}, nil
}

// Sim returns the simulation: on a sim.World, rank 0's partition (each
// rank's is Rank.Sim).
func (c *Comm) Sim() *sim.Sim { return c.s }

// sim returns world rank r's simulation (rank 0's for a rank out of
// range).
func (c *Comm) sim(r int) *sim.Sim {
	if c.parts == 1 || r < 0 || r >= len(c.ranks) {
		return c.s
	}
	return c.ranks[r].Sim()
}

// World returns the sim.World the ranks live on, or nil on a lone Sim.
func (c *Comm) World() *sim.World { return c.s.World() }

// Size returns the number of ranks.
func (c *Comm) Size() int { return len(c.ranks) }

// LSASize returns the size of the LSA teams.
func (c *Comm) LSASize() int { return c.lsaSize }

// Rank returns world rank i.
func (c *Comm) Rank(i int) *Rank { return c.ranks[i] }

// Ranks returns the ranks in world order.
func (c *Comm) Ranks() []*Rank { return c.ranks }

// Profile returns the version profile.
func (c *Comm) Profile() Profile { return c.prof }

// Config returns the communicator's configuration.
func (c *Comm) Config() CommConfig { return c.cfg }

// Windows returns the registered windows (deregistered ones included), by ID.
func (c *Comm) Windows() []*Window { return c.windows }

// DevComms returns the device communicators created so far.
func (c *Comm) DevComms() []*DevComm { return c.devs }

// WinFlags are ncclCommWindowRegister flags.
type WinFlags uint32

// Window flags.
const (
	WinDefault        WinFlags = 0x00
	WinCollSymmetric  WinFlags = 0x01 // NCCL_WIN_COLL_SYMMETRIC
	WinStrictOrdering WinFlags = 0x02 // NCCL_WIN_STRICT_ORDERING: MR without PCIe relaxed ordering
)

// Window is a symmetric window: one region per rank, all of the same size
// at the same offset of each rank's symmetric space.
type Window struct {
	c       *Comm
	id      int
	name    string
	size    sim.Bytes
	flags   WinFlags
	off     uint64
	regions []*mem.Region
	dead    bool
}

// ID returns the window's index in its communicator (backends index their
// per-window state with it).
func (w *Window) ID() int { return w.id }

// Name returns the window's name.
func (w *Window) Name() string { return w.name }

// Size returns the window's size.
func (w *Window) Size() sim.Bytes { return w.size }

// Flags returns the registration flags.
func (w *Window) Flags() WinFlags { return w.flags }

// Offset returns the window's offset in every rank's symmetric space
// (bigOffset; a multiple of 4 KiB).
func (w *Window) Offset() uint64 { return w.off }

// Region returns world rank r's memory of the window.
func (w *Window) Region(r int) *mem.Region { return w.regions[r] }

// Comm returns the window's communicator.
func (w *Window) Comm() *Comm { return w.c }

// Registered reports whether the window is registered (not deregistered).
func (w *Window) Registered() bool { return !w.dead }

func (w *Window) String() string { return fmt.Sprintf("window %q", w.name) }

// MemAlloc is ncclMemAlloc: size bytes of HBM on every rank, one region per
// rank, to be registered with WindowRegisterRegions.
func (c *Comm) MemAlloc(name string, size sim.Bytes, backed bool) ([]*mem.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("gin: ncclMemAlloc %q of %d bytes", name, size)
	}
	rs := make([]*mem.Region, len(c.ranks))
	for i, r := range c.ranks {
		rs[i] = r.GPU.Alloc(fmt.Sprintf("%s/r%d", name, i), size, backed)
	}
	return rs, nil
}

// WindowRegister allocates size bytes on every rank (ncclMemAlloc) and
// registers them as a window (ncclCommWindowRegister, collective).
func (c *Comm) WindowRegister(name string, size sim.Bytes, flags WinFlags, backed bool) (*Window, error) {
	rs, err := c.MemAlloc(name, size, backed)
	if err != nil {
		return nil, err
	}
	return c.WindowRegisterRegions(name, rs, flags)
}

// WindowRegisterRegions registers one existing HBM region per rank (all of
// the same size, each on its rank's GPU) as a window. The window takes the
// next 4 KiB-aligned offset of the symmetric space; every existing device
// communicator with GIN registers it with its backend.
func (c *Comm) WindowRegisterRegions(name string, rs []*mem.Region, flags WinFlags) (*Window, error) {
	if len(rs) != len(c.ranks) {
		return nil, fmt.Errorf("gin: window %q: %d regions for %d ranks", name, len(rs), len(c.ranks))
	}
	size := rs[0].Size()
	for i, r := range rs {
		l := r.Loc()
		g := c.ranks[i].GPU
		if l.Kind != mem.HBM || l.Node != g.Node() || l.GPU != g.Local() {
			return nil, fmt.Errorf("gin: window %q: region %v of rank %d is not on its GPU", name, r, i)
		}
		if r.Size() != size {
			return nil, fmt.Errorf("gin: window %q: rank %d has %d bytes, rank 0 %d: windows are symmetric", name, i, r.Size(), size)
		}
	}
	if size <= 0 {
		return nil, fmt.Errorf("gin: window %q of %d bytes", name, size)
	}
	if flags&^(WinCollSymmetric|WinStrictOrdering) != 0 {
		return nil, fmt.Errorf("gin: window %q: unknown flags %#x", name, uint32(flags))
	}
	w := &Window{c: c, id: len(c.windows), name: name, size: size, flags: flags, off: c.nextOff, regions: rs}
	c.nextOff += (uint64(size) + WinAlign - 1) &^ (WinAlign - 1)
	c.windows = append(c.windows, w)
	for _, dc := range c.devs {
		if dc.backend != nil {
			if err := dc.backend.RegisterWindow(dc, w); err != nil {
				return nil, fmt.Errorf("gin: window %q: %w", name, err)
			}
		}
	}
	return w, nil
}

// WindowDeregister is ncclCommWindowDeregister: later device accesses to w
// are reported as accesses to an unregistered window.
func (c *Comm) WindowDeregister(w *Window) error {
	if w == nil || w.c != c || w.dead {
		return errors.New("gin: deregister of a window that is not registered with this communicator")
	}
	w.dead = true
	return nil
}
