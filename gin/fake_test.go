package gin

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

// fakeBackend is an in-memory GIN backend for front-end tests: an op costs
// issueCost on the issuing coop, lands at the peer lat later in per-(rank,
// ctx, peer) FIFO order (data, then the signal), and completes locally
// compl after landing (counter, flush tickets).
type fakeBackend struct {
	s           *sim.Sim
	issueCost   sim.Duration
	lat, compl  sim.Duration
	offsetReset bool

	dc       *DevComm
	sig, ctr []*mem.Region // per rank: ctx × id words
	done     []*mem.Region // per rank: ctx × peer completed count
	issued   [][]uint64    // per rank: ctx × peer
	last     [][]sim.Time  // per rank: ctx × peer, last landing
	offsets  [][]uint64
	calls    []string
	windows  []string
}

func newFake(s *sim.Sim) *fakeBackend {
	return &fakeBackend{s: s, issueCost: 50 * sim.Nanosecond, lat: 2 * sim.Microsecond, compl: 1 * sim.Microsecond}
}

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Connect(dc *DevComm) error {
	f.dc = dc
	c := dc.Comm()
	n := c.Size()
	nc := dc.ContextCount()
	for i := 0; i < n; i++ {
		g := c.Rank(i).GPU
		f.sig = append(f.sig, g.Alloc(fmt.Sprintf("fake/sig/r%d", i), sim.Bytes(8*max(1, nc*dc.SignalCount())), false))
		f.ctr = append(f.ctr, g.Alloc(fmt.Sprintf("fake/ctr/r%d", i), sim.Bytes(8*max(1, nc*dc.CounterCount())), false))
		f.done = append(f.done, g.Alloc(fmt.Sprintf("fake/done/r%d", i), sim.Bytes(8*nc*n), false))
		f.issued = append(f.issued, make([]uint64, nc*n))
		f.last = append(f.last, make([]sim.Time, nc*n))
		f.offsets = append(f.offsets, make([]uint64, nc*max(1, dc.SignalCount())))
	}
	return nil
}

func (f *fakeBackend) RegisterWindow(dc *DevComm, w *Window) error {
	f.windows = append(f.windows, w.Name())
	return nil
}

func (f *fakeBackend) Issue(t *gpu.Group, dc *DevComm, rank int, op *Op) {
	t.Compute(f.issueCost)
	n := dc.Comm().Size()
	ch := op.Ctx*n + op.Peer
	f.issued[rank][ch]++
	f.calls = append(f.calls, fmt.Sprintf("%s r%d ctx%d %v->%d", t.Name(), rank, op.Ctx, op.Kind, op.Peer))
	at := max(t.Now().Add(f.lat), f.last[rank][ch])
	f.last[rank][ch] = at
	o := *op
	f.s.At(at, func() { f.land(rank, &o) })
	f.s.At(at.Add(f.compl), func() {
		if c, ok := o.Local.(CounterInc); ok {
			f.ctr[rank].FetchAdd64(uint64(8*(o.Ctx*dc.CounterCount()+c.Counter)), 1, "fake")
		}
		f.done[rank].FetchAdd64(uint64(8*ch), 1, "fake")
	})
}

func (f *fakeBackend) land(rank int, op *Op) {
	switch op.Kind {
	case OpPut:
		if op.Bytes > 0 {
			buf := make([]byte, op.Bytes)
			op.Src.Region(rank).Read(op.SrcOff, buf)
			op.Dst.Region(op.Peer).Write(op.DstOff, buf, op.Bytes, "fake")
		}
	case OpPutValue:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], op.Value)
		op.Dst.Region(op.Peer).Write(op.DstOff, b[:op.ValueSize], uint64(op.ValueSize), "fake")
	case OpGet:
		buf := make([]byte, op.Bytes)
		op.Src.Region(op.Peer).Read(op.SrcOff, buf)
		op.Dst.Region(rank).Write(op.DstOff, buf, op.Bytes, "fake")
	}
	if id, add, ok := SignalOf(op.Remote); ok {
		f.sig[op.Peer].FetchAdd64(uint64(8*(op.Ctx*f.dc.SignalCount()+id)), add, "fake")
	} else if w, off, add, ok := VASignalOf(op.Remote); ok {
		w.Region(op.Peer).FetchAdd64(off, add, "fake")
	}
}

func (f *fakeBackend) FlushAsync(t *gpu.Group, dc *DevComm, rank, ctx, peer int) Request {
	f.calls = append(f.calls, fmt.Sprintf("%s flush_async r%d ctx%d ->%d", t.Name(), rank, ctx, peer))
	return Request{Ctx: ctx, Peer: peer, Ticket: f.issued[rank][ctx*dc.Comm().Size()+peer]}
}

func (f *fakeBackend) Wait(t *gpu.Group, dc *DevComm, rank int, r Request) {
	off := uint64(8 * (r.Ctx*dc.Comm().Size() + r.Peer))
	t.WaitWord(f.done[rank], off, "fake completion", func(v uint64) bool { return v >= r.Ticket })
}

func (f *fakeBackend) SignalWord(dc *DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return f.sig[rank], uint64(8 * (ctx*dc.SignalCount() + id))
}

func (f *fakeBackend) CounterWord(dc *DevComm, rank, ctx, id int) (*mem.Region, uint64) {
	return f.ctr[rank], uint64(8 * (ctx*dc.CounterCount() + id))
}

func (f *fakeBackend) ResetSignal(t *gpu.Group, dc *DevComm, rank, ctx, id int) ResetStore {
	r, off := f.SignalWord(dc, rank, ctx, id)
	if f.offsetReset {
		v := r.Load64(off)
		f.offsets[rank][ctx*dc.SignalCount()+id] = v
		return ResetStore{Landed: t.Now(), Offset: true, Value: v}
	}
	return ResetStore{Landed: t.Store64(r, off, 0)}
}

func (f *fakeBackend) SignalOffset(dc *DevComm, rank, ctx, id int) uint64 {
	return f.offsets[rank][ctx*dc.SignalCount()+id]
}

func (f *fakeBackend) Stats() BackendStats {
	return BackendStats{Name: "fake", Ops: uint64(len(f.calls))}
}

var _ Backend = (*fakeBackend)(nil)

// cluster is nodes × perNode GPUs with PCIe trees and NVLink domains.
type cluster struct {
	s     *sim.Sim
	ms    *mem.System
	ranks []*Rank
	fb    *fakeBackend
	comm  *Comm
}

func newCluster(t *testing.T, nodes, perNode int, v Version) *cluster {
	t.Helper()
	s := sim.New(sim.Config{Seed: 7})
	ms := mem.NewSystem(s)
	c := &cluster{s: s, ms: ms, fb: newFake(s)}
	for n := 0; n < nodes; n++ {
		bus := pcie.NewTree(s, pcie.DefaultConfig())
		sw := bus.AddSwitch(fmt.Sprintf("n%d/sw0", n))
		nvl := nvlink.NewDomain(s, nvlink.DefaultConfig(), perNode)
		for l := 0; l < perNode; l++ {
			name := fmt.Sprintf("n%d/gpu%d", n, l)
			g := gpu.New(s, gpu.DefaultConfig(), name, n, l, ms, bus, bus.AddDevice(name, sw), nvl)
			c.ranks = append(c.ranks, &Rank{World: len(c.ranks), Node: n, Local: l, GPU: g, Host: bus.Host()})
		}
	}
	comm, err := NewComm(c.ranks, CommConfig{Version: v, Backends: map[Type]Backend{TypeProxy: c.fb}})
	require.NoError(t, err)
	c.comm = comm
	return c
}

// launch starts body for every rank on a coop of size threads.
func (c *cluster) launch(name string, threads int, body func(t *gpu.Group, rank int)) {
	for i, r := range c.ranks {
		i := i
		r.GPU.Launch(name, threads, func(t *gpu.Group) { body(t, i) })
	}
}
