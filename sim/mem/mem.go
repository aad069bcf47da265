package mem

import (
	"encoding/binary"
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// Kind says what physical memory a region lives in.
type Kind uint8

// Kinds of memory.
const (
	HBM  Kind = iota // GPU device memory
	Host             // host DRAM (pinned)
)

func (k Kind) String() string {
	if k == HBM {
		return "hbm"
	}
	return "host"
}

// Loc is where a region lives: host Node, and for HBM the node-local GPU index.
type Loc struct {
	Node int
	Kind Kind
	GPU  int // node-local GPU index; meaningful for HBM only
}

func (l Loc) String() string {
	if l.Kind == HBM {
		return fmt.Sprintf("node%d/gpu%d", l.Node, l.GPU)
	}
	return fmt.Sprintf("node%d/host", l.Node)
}

// Op says what kind of change an Effect is.
type Op uint8

// Effect operations.
const (
	OpWrite    Op = iota // bulk write (DMA, NVLink store, memcpy)
	OpStore              // 8-byte store
	OpFetchAdd           // 8-byte atomic add
	OpCompSwap           // 8-byte atomic compare-and-swap
	OpFill               // zeroing or fill of a range
)

var opNames = [...]string{"write", "store", "fetch_add", "comp_swap", "fill"}

func (o Op) String() string { return opNames[o] }

// Effect is one change of memory, reported to the System's Observer.
type Effect struct {
	At     sim.Time
	Region *Region
	Off    uint64
	Len    uint64
	Op     Op
	Agent  string // who made the change: "nic0/qp12", "gpu3/cta0/warp1", "cpu/proxy0"
	Old    uint64 // previous word value (word ops only)
	New    uint64 // new word value (word ops only)
	Data   []byte // written bytes when the source was backed (aliases the caller's buffer)
}

// Observer sees every memory effect in a System.
type Observer interface {
	Observe(e *Effect)
}

// Watcher is notified when a watched word of a region changes.
type Watcher interface {
	WordChanged(r *Region, off uint64)
}

// System is the set of regions of one simulation, with their observer.
type System struct {
	s       *sim.Sim
	sims    func(node int) *sim.Sim // NewSystemOf
	regions []*Region
	obs     Observer
}

// NewSystem returns an empty memory system on simulation s.
func NewSystem(s *sim.Sim) *System { return &System{s: s} }

// NewSystemOf returns an empty memory system whose regions on node n
// live on simulation sims(n): a sim.World's partition of the node, whose
// clock stamps the region's effects. Regions are allocated before the
// World runs (Alloc is not safe for concurrent use), and an observer
// (SetObserver) is called from the partition of the region changed.
func NewSystemOf(sims func(node int) *sim.Sim) *System { return &System{sims: sims} }

// SetObserver installs the observer of every effect (nil removes it).
func (m *System) SetObserver(o Observer) { m.obs = o }

// Sim returns the simulation of node n's regions.
func (m *System) Sim(node int) *sim.Sim {
	if m.sims != nil {
		return m.sims(node)
	}
	return m.s
}

// Regions returns all regions in allocation order.
func (m *System) Regions() []*Region { return m.regions }

// Alloc creates a region. backed says whether its bytes are stored.
func (m *System) Alloc(name string, loc Loc, size sim.Bytes, backed bool) *Region {
	if size < 0 {
		panic(fmt.Sprintf("mem: negative size %d for %q", size, name))
	}
	r := &Region{sys: m, s: m.Sim(loc.Node), id: int32(len(m.regions)), node: int32(loc.Node), gpu: int32(loc.GPU), kind: loc.Kind,
		name: name, size: uint64(size)}
	if backed {
		r.data = make([]byte, size)
	}
	m.regions = append(m.regions, r)
	return r
}

// KeepWords makes an unbacked region store the whole aligned 8-byte words
// that writes carry, as word operations do: a sparse store for a region
// of which only a few words are ever live (a ring that is mostly empty),
// costing memory per stored word instead of per byte of the region. It
// must be called before the region is written.
func (r *Region) KeepWords() {
	if r.data == nil && r.words == nil {
		r.words = make(map[uint64]uint64)
	}
}

type watch struct {
	off uint64
	w   Watcher
}

// Region is one contiguous allocation.
type Region struct {
	sys *System
	s   *sim.Sim // its node's simulation
	// id and the Loc in 16 bytes, not 32: a GDAKI channel has three
	// regions, and EP512 has a quarter of a million channels.
	id, node int32
	gpu      int32
	kind     Kind
	name     string
	size     uint64
	data     []byte
	words    map[uint64]uint64 // unbacked regions: 8-byte words written by word ops
	watches  []watch
}

// Sim returns the simulation of the region's node.
func (r *Region) Sim() *sim.Sim { return r.s }

// ID returns the region's index in its System.
func (r *Region) ID() int { return int(r.id) }

// Name returns the region's name.
func (r *Region) Name() string { return r.name }

// Loc returns where the region lives.
func (r *Region) Loc() Loc { return Loc{Node: int(r.node), Kind: r.kind, GPU: int(r.gpu)} }

// Size returns the region's size in bytes.
func (r *Region) Size() sim.Bytes { return sim.Bytes(r.size) }

// Backed reports whether the region stores its bytes.
func (r *Region) Backed() bool { return r.data != nil }

// Bytes returns the backing bytes (nil if unbacked). Callers must not keep
// the slice across events in which the region may change.
func (r *Region) Bytes() []byte { return r.data }

func (r *Region) String() string { return fmt.Sprintf("%s@%v", r.name, r.Loc()) }

// InBounds reports whether [off, off+n) lies inside the region.
func (r *Region) InBounds(off, n uint64) bool {
	return off <= r.size && n <= r.size-off
}

func (r *Region) check(off, n uint64, what string) {
	if !r.InBounds(off, n) {
		panic(fmt.Sprintf("mem: %s [%d,+%d) outside region %v of %d bytes", what, off, n, r, r.size))
	}
}

// Watch registers w to be told when any byte of the 8-byte word at off
// changes. The same watcher may watch several words.
func (r *Region) Watch(off uint64, w Watcher) {
	r.watches = append(r.watches, watch{off, w})
}

// Unwatch removes one registration of w on the word at off.
func (r *Region) Unwatch(off uint64, w Watcher) {
	for i, x := range r.watches {
		if x.off == off && x.w == w {
			last := len(r.watches) - 1
			r.watches[i] = r.watches[last]
			r.watches[last] = watch{}
			r.watches = r.watches[:last]
			return
		}
	}
}

func (r *Region) notify(off, n uint64) {
	if len(r.watches) == 0 {
		return
	}
	// Iterate over a stable snapshot length: watchers may unwatch themselves.
	for i := 0; i < len(r.watches); i++ {
		x := r.watches[i]
		if x.off+8 > off && x.off < off+n {
			x.w.WordChanged(r, x.off)
			if i < len(r.watches) && r.watches[i] != x {
				i-- // the current entry was removed and replaced by the last
			}
		}
	}
}

// observe reports e to the system's observer. The copy handed out is made
// inside the branch, so that without an observer nothing escapes and a
// memory effect allocates nothing.
func (r *Region) observe(e Effect) {
	if r.sys.obs == nil {
		return
	}
	ev := e
	ev.At = r.s.Now()
	ev.Region = r
	r.sys.obs.Observe(&ev)
}

// Write copies src into the region at off. A nil src writes n bytes of
// unknown content (an unbacked source): the bytes of a backed region are
// left unchanged, the effect is still reported. Words stored in an unbacked
// region and covered by the write are forgotten only when src is backed.
func (r *Region) Write(off uint64, src []byte, n uint64, agent string) {
	r.check(off, n, "write")
	if src != nil {
		if uint64(len(src)) < n {
			panic(fmt.Sprintf("mem: write of %d bytes from a %d-byte buffer", n, len(src)))
		}
		if r.data != nil {
			copy(r.data[off:off+n], src[:n])
		} else if r.words != nil {
			for w := off &^ 7; w < off+n; w += 8 {
				if w+8 <= off+n && w >= off {
					r.words[w] = binary.LittleEndian.Uint64(src[w-off:])
				}
			}
		}
	}
	r.observe(Effect{Off: off, Len: n, Op: OpWrite, Agent: agent, Data: src})
	r.notify(off, n)
}

// Read copies n bytes at off into dst (which must hold n bytes) and reports
// whether the region is backed; an unbacked region reads as zeros except for
// stored words.
func (r *Region) Read(off uint64, dst []byte) bool {
	n := uint64(len(dst))
	r.check(off, n, "read")
	if r.data != nil {
		copy(dst, r.data[off:off+n])
		return true
	}
	clear(dst)
	for w := off &^ 7; w < off+n; w += 8 {
		if v, ok := r.words[w]; ok && w >= off && w+8 <= off+n {
			binary.LittleEndian.PutUint64(dst[w-off:], v)
		}
	}
	return false
}

// Fill sets n bytes at off to b.
func (r *Region) Fill(off, n uint64, b byte, agent string) {
	r.check(off, n, "fill")
	if r.data != nil {
		for i := off; i < off+n; i++ {
			r.data[i] = b
		}
	} else if r.words != nil {
		for w := range r.words {
			if w >= off && w+8 <= off+n {
				if b == 0 {
					delete(r.words, w)
				} else {
					r.words[w] = uint64(b) * 0x0101010101010101
				}
			}
		}
	}
	r.observe(Effect{Off: off, Len: n, Op: OpFill, Agent: agent})
	r.notify(off, n)
}

// Load64 returns the little-endian 8-byte word at off.
func (r *Region) Load64(off uint64) uint64 {
	r.check(off, 8, "load64")
	if r.data != nil {
		return binary.LittleEndian.Uint64(r.data[off:])
	}
	return r.words[off]
}

func (r *Region) put64(off, v uint64) {
	if r.data != nil {
		binary.LittleEndian.PutUint64(r.data[off:], v)
		return
	}
	if r.words == nil {
		r.words = make(map[uint64]uint64)
	}
	r.words[off] = v
}

// Store64 stores an 8-byte word at off.
func (r *Region) Store64(off, v uint64, agent string) {
	r.check(off, 8, "store64")
	old := r.Load64(off)
	r.put64(off, v)
	r.observe(Effect{Off: off, Len: 8, Op: OpStore, Agent: agent, Old: old, New: v})
	r.notify(off, 8)
}

// FetchAdd64 adds v to the word at off and returns the previous value.
func (r *Region) FetchAdd64(off, v uint64, agent string) uint64 {
	r.check(off, 8, "fetch_add64")
	old := r.Load64(off)
	r.put64(off, old+v)
	r.observe(Effect{Off: off, Len: 8, Op: OpFetchAdd, Agent: agent, Old: old, New: old + v})
	r.notify(off, 8)
	return old
}

// CompareSwap64 stores swap at off if the word equals cmp, and returns the
// previous value.
func (r *Region) CompareSwap64(off, cmp, swap uint64, agent string) uint64 {
	r.check(off, 8, "comp_swap64")
	old := r.Load64(off)
	if old == cmp {
		r.put64(off, swap)
	}
	r.observe(Effect{Off: off, Len: 8, Op: OpCompSwap, Agent: agent, Old: old, New: r.Load64(off)})
	r.notify(off, 8)
	return old
}
