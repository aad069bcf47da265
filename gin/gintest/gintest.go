package gintest

import (
	"encoding/binary"
	"fmt"

	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Backend is the in-memory GIN backend.
type Backend struct {
	s *sim.Sim
	// IssueCost is charged to the issuing coop per operation.
	IssueCost sim.Duration
	// Latency is from issue to landing at the peer.
	Latency sim.Duration
	// Completion is from landing to local completion.
	Completion sim.Duration
	// OffsetReset resets signals by offset (proxy v2) instead of storing 0.
	OffsetReset bool

	dc       *gin.DevComm
	sig, ctr []*mem.Region
	done     []*mem.Region
	issued   [][]uint64
	last     [][]sim.Time
	offsets  [][]uint64
	ops      uint64
	land     []pendingOp
	free     []int
}

type pendingOp struct {
	rank int
	op   gin.Op
	ch   int
}

// New returns a backend with 50 ns issue, 2 us latency, 1 us completion.
func New(s *sim.Sim) *Backend {
	return &Backend{s: s, IssueCost: 50 * sim.Nanosecond, Latency: 2 * sim.Microsecond, Completion: sim.Microsecond}
}

// Name implements gin.Backend.
func (f *Backend) Name() string { return "gintest" }

// Connect implements gin.Backend.
func (f *Backend) Connect(dc *gin.DevComm) error {
	f.dc = dc
	c := dc.Comm()
	n, nc := c.Size(), dc.CreatedContexts()
	for i := 0; i < n; i++ {
		g := c.Rank(i).GPU
		f.sig = append(f.sig, g.Alloc(fmt.Sprintf("gintest/sig/r%d", i), sim.Bytes(8*max(1, nc*dc.SignalCount())), false))
		f.ctr = append(f.ctr, g.Alloc(fmt.Sprintf("gintest/ctr/r%d", i), sim.Bytes(8*max(1, nc*dc.CounterCount())), false))
		f.done = append(f.done, g.Alloc(fmt.Sprintf("gintest/done/r%d", i), sim.Bytes(8*nc*n), false))
		f.issued = append(f.issued, make([]uint64, nc*n))
		f.last = append(f.last, make([]sim.Time, nc*n))
		f.offsets = append(f.offsets, make([]uint64, nc*max(1, dc.SignalCount())))
	}
	return nil
}

// RegisterWindow implements gin.Backend.
func (f *Backend) RegisterWindow(*gin.DevComm, *gin.Window) error { return nil }

// Issue implements gin.Backend.
func (f *Backend) Issue(t *gpu.Group, dc *gin.DevComm, rank int, op *gin.Op) {
	t.Compute(f.IssueCost)
	f.ops++
	n := dc.Comm().Size()
	ch := op.Ctx*n + op.Peer
	f.issued[rank][ch]++
	at := max(t.Now().Add(f.Latency), f.last[rank][ch])
	f.last[rank][ch] = at
	var i int
	if k := len(f.free); k > 0 {
		i = f.free[k-1]
		f.free = f.free[:k-1]
		f.land[i] = pendingOp{rank, *op, ch}
	} else {
		i = len(f.land)
		f.land = append(f.land, pendingOp{rank, *op, ch})
	}
	f.s.Schedule(at, landH{f}, uint64(i))
	f.s.Schedule(at.Add(f.Completion), complH{f}, uint64(i))
}

type landH struct{ f *Backend }
type complH struct{ f *Backend }

func (h landH) Handle(_ *sim.Sim, arg uint64) { h.f.landOp(&h.f.land[arg]) }

func (h complH) Handle(_ *sim.Sim, arg uint64) {
	f := h.f
	p := &f.land[arg]
	if c, ok := p.op.Local.(gin.CounterInc); ok {
		f.ctr[p.rank].FetchAdd64(uint64(8*(p.op.Ctx*f.dc.CounterCount()+c.Counter)), 1, "gintest")
	}
	f.done[p.rank].FetchAdd64(uint64(8*p.ch), 1, "gintest")
	f.free = append(f.free, int(arg))
}

func (f *Backend) landOp(p *pendingOp) {
	op := &p.op
	switch op.Kind {
	case gin.OpPut:
		if op.Bytes > 0 {
			src := op.Src.Region(p.rank)
			var buf []byte
			if src.Backed() {
				buf = make([]byte, op.Bytes)
				src.Read(op.SrcOff, buf)
			}
			op.Dst.Region(op.Peer).Write(op.DstOff, buf, op.Bytes, "gintest")
		}
	case gin.OpPutValue:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], op.Value)
		op.Dst.Region(op.Peer).Write(op.DstOff, b[:op.ValueSize], uint64(op.ValueSize), "gintest")
	case gin.OpGet:
		src := op.Src.Region(op.Peer)
		var buf []byte
		if src.Backed() {
			buf = make([]byte, op.Bytes)
			src.Read(op.SrcOff, buf)
		}
		op.Dst.Region(p.rank).Write(op.DstOff, buf, op.Bytes, "gintest")
	}
	if id, add, ok := gin.SignalOf(op.Remote); ok {
		f.sig[op.Peer].FetchAdd64(uint64(8*(op.Ctx*f.dc.SignalCount()+id)), add, "gintest")
	} else if w, off, add, ok := gin.VASignalOf(op.Remote); ok {
		w.Region(op.Peer).FetchAdd64(off, add, "gintest")
	}
}

// FlushAsync implements gin.Backend.
func (f *Backend) FlushAsync(t *gpu.Group, dc *gin.DevComm, rank, ctx, peer int) gin.Request {
	return gin.Request{Ctx: ctx, Peer: peer, Ticket: f.issued[rank][ctx*dc.Comm().Size()+peer]}
}

// Wait implements gin.Backend.
func (f *Backend) Wait(t *gpu.Group, dc *gin.DevComm, rank int, r gin.Request) {
	off := uint64(8 * (r.Ctx*dc.Comm().Size() + r.Peer))
	t.WaitWord(f.done[rank], off, "gintest completion", func(v uint64) bool { return v >= r.Ticket })
}

// SignalWord implements gin.Backend.
func (f *Backend) SignalWord(dc *gin.DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return f.sig[rank], uint64(8 * (ctx*dc.SignalCount() + id))
}

// CounterWord implements gin.Backend.
func (f *Backend) CounterWord(dc *gin.DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return f.ctr[rank], uint64(8 * (ctx*dc.CounterCount() + id))
}

// ResetSignal implements gin.Backend.
func (f *Backend) ResetSignal(t *gpu.Group, dc *gin.DevComm, rank, ctx, id int) gin.ResetStore {
	r, off := f.SignalWord(dc, rank, ctx, id)
	if f.OffsetReset {
		v := r.Load64(off)
		f.offsets[rank][ctx*dc.SignalCount()+id] = v
		return gin.ResetStore{Landed: t.Now(), Offset: true, Value: v}
	}
	return gin.ResetStore{Landed: t.Store64(r, off, 0)}
}

// SignalOffset implements gin.Backend.
func (f *Backend) SignalOffset(dc *gin.DevComm, rank, ctx, id int) uint64 {
	return f.offsets[rank][ctx*dc.SignalCount()+id]
}

// Stats implements gin.Backend.
func (f *Backend) Stats() gin.BackendStats { return gin.BackendStats{Name: "gintest", Ops: f.ops} }

var _ gin.Backend = (*Backend)(nil)

// Cluster is nodes × perNode GPUs (one PCIe tree and NVLink domain per
// node) as ranks of one communicator using a Backend.
type Cluster struct {
	Sim     *sim.Sim
	Mem     *mem.System
	Ranks   []*gin.Rank
	Backend *Backend
	Comm    *gin.Comm
}

// NewCluster builds a cluster on a fresh simulation with seed 1.
func NewCluster(nodes, perNode int, v gin.Version) (*Cluster, error) {
	s := sim.New(sim.Config{Seed: 1})
	ms := mem.NewSystem(s)
	c := &Cluster{Sim: s, Mem: ms, Backend: New(s)}
	for n := 0; n < nodes; n++ {
		bus := pcie.NewTree(s, pcie.DefaultConfig())
		sw := bus.AddSwitch(fmt.Sprintf("n%d/sw0", n))
		nvl := nvlink.NewDomain(s, nvlink.DefaultConfig(), perNode)
		for l := 0; l < perNode; l++ {
			name := fmt.Sprintf("n%d/gpu%d", n, l)
			g := gpu.New(s, gpu.DefaultConfig(), name, n, l, ms, bus, bus.AddDevice(name, sw), nvl)
			c.Ranks = append(c.Ranks, &gin.Rank{World: len(c.Ranks), Node: n, Local: l, GPU: g, Host: bus.Host()})
		}
	}
	comm, err := gin.NewComm(c.Ranks, gin.CommConfig{Version: v, Backends: map[gin.Type]gin.Backend{gin.TypeProxy: c.Backend}})
	if err != nil {
		return nil, err
	}
	c.Comm = comm
	return c, nil
}
