package mem

import (
	"encoding/binary"
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/require"
)

type recorder struct{ effects []Effect }

func (r *recorder) Observe(e *Effect) { r.effects = append(r.effects, *e) }

type counter struct{ hits []uint64 }

func (c *counter) WordChanged(_ *Region, off uint64) { c.hits = append(c.hits, off) }

func TestWordOpsBackedAndUnbacked(t *testing.T) {
	s := sim.New(sim.Config{})
	m := NewSystem(s)
	for _, backed := range []bool{true, false} {
		r := m.Alloc("sig", Loc{Kind: HBM}, 64, backed)
		require.Equal(t, uint64(0), r.Load64(8))
		r.Store64(8, 5, "t")
		require.Equal(t, uint64(5), r.FetchAdd64(8, 3, "t"))
		require.Equal(t, uint64(8), r.Load64(8))
		require.Equal(t, uint64(8), r.CompareSwap64(8, 7, 100, "t"), "failed CAS returns old")
		require.Equal(t, uint64(8), r.Load64(8))
		require.Equal(t, uint64(8), r.CompareSwap64(8, 8, 100, "t"))
		require.Equal(t, uint64(100), r.Load64(8))
		r.Fill(0, 64, 0, "t")
		require.Equal(t, uint64(0), r.Load64(8))
	}
}

func TestWriteReadAndUnbackedWords(t *testing.T) {
	s := sim.New(sim.Config{})
	m := NewSystem(s)
	b := m.Alloc("buf", Loc{Kind: Host}, 32, true)
	src := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}
	b.Write(3, src, 9, "nic")
	dst := make([]byte, 12)
	require.True(t, b.Read(0, dst))
	require.Equal(t, []byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, dst)

	u := m.Alloc("big", Loc{Kind: HBM}, 1<<40, false) // unbacked: no 1 TiB allocation
	u.Store64(1<<39, 42, "gpu")
	u.Write(0, nil, 1<<30, "nic") // unknown bytes: words elsewhere unchanged
	require.Equal(t, uint64(42), u.Load64(1<<39))
	require.False(t, u.Backed())
}

func TestWatchersAndObserver(t *testing.T) {
	s := sim.New(sim.Config{})
	m := NewSystem(s)
	rec := &recorder{}
	m.SetObserver(rec)
	r := m.Alloc("sig", Loc{Kind: HBM}, 64, true)
	c := &counter{}
	r.Watch(16, c)
	r.Store64(8, 1, "a")                 // other word: no hit
	r.Write(12, make([]byte, 8), 8, "b") // overlaps word 16: hit
	r.FetchAdd64(16, 1, "c")
	r.Unwatch(16, c)
	r.FetchAdd64(16, 1, "d")
	require.Equal(t, []uint64{16, 16}, c.hits)
	require.Len(t, rec.effects, 4)
	require.Equal(t, OpFetchAdd, rec.effects[2].Op)
	require.Equal(t, uint64(0), rec.effects[2].Old)
	require.Equal(t, uint64(1), rec.effects[2].New)
	require.Equal(t, "c", rec.effects[2].Agent)
}

func TestOutOfBoundsPanics(t *testing.T) {
	s := sim.New(sim.Config{})
	r := NewSystem(s).Alloc("x", Loc{}, 16, true)
	require.True(t, r.InBounds(8, 8))
	require.False(t, r.InBounds(9, 8))
	require.Panics(t, func() { r.Load64(9) })
	require.Panics(t, func() { r.Write(10, nil, 7, "x") })
}

// TestNoObserverNoAllocation guards the hot path: with no observer and no
// watcher, stores, atomics and writes allocate nothing.
func TestNoObserverNoAllocation(t *testing.T) {
	s := sim.New(sim.Config{})
	r := NewSystem(s).Alloc("x", Loc{Kind: HBM}, 4096, true)
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		r.Store64(0, 1, "a")
		r.FetchAdd64(8, 1, "a")
		r.CompareSwap64(16, 0, 1, "a")
		r.Write(64, buf, 64, "a")
	})
	require.Zero(t, allocs)
}

// An unbacked region that keeps words stores the whole aligned words a
// write carries (and only those), reads them back and forgets them when
// filled with zeros; without KeepWords the same write leaves nothing.
func TestKeepWords(t *testing.T) {
	m := NewSystem(sim.New(sim.Config{}))
	src := make([]byte, 20)
	for i := range src {
		src[i] = byte(i + 1)
	}
	r := m.Alloc("ring", Loc{Kind: Host}, 1<<20, false)
	r.KeepWords()
	r.Write(32, src, 20, "gpu") // words 32 and 40 whole, 48 partial
	require.Equal(t, binary.LittleEndian.Uint64(src[0:]), r.Load64(32))
	require.Equal(t, binary.LittleEndian.Uint64(src[8:]), r.Load64(40))
	require.Zero(t, r.Load64(48), "a partial word is not stored")
	dst := make([]byte, 16)
	require.False(t, r.Read(32, dst))
	require.Equal(t, src[:16], dst)
	r.Fill(32, 16, 0, "cpu")
	require.Zero(t, r.Load64(32))
	require.Zero(t, r.Load64(40))

	plain := m.Alloc("plain", Loc{Kind: Host}, 1<<20, false)
	plain.Write(32, src, 16, "gpu")
	require.Zero(t, plain.Load64(32))
}

// On a World each region's effects carry the time of its node's
// partition.
func TestSystemOfStampsEffectsWithTheNodesClock(t *testing.T) {
	w := sim.NewWorld(sim.Config{}, 2, sim.Microsecond)
	m := NewSystemOf(func(n int) *sim.Sim { return w.Part(n % 2) })
	rec := &recorder{}
	m.SetObserver(rec)
	a := m.Alloc("a", Loc{Node: 0, Kind: HBM}, 8, true)
	b := m.Alloc("b", Loc{Node: 3, Kind: Host}, 8, true)
	require.Same(t, w.Part(0), a.Sim())
	require.Same(t, w.Part(1), b.Sim())
	require.Same(t, w.Part(1), m.Sim(1))
	w.Part(0).Post(5, sim.HandlerFunc(func(*sim.Sim, uint64) { a.Store64(0, 1, "x") }), 0)
	w.Part(1).Post(7, sim.HandlerFunc(func(*sim.Sim, uint64) { b.Store64(0, 2, "y") }), 0)
	require.NoError(t, w.Run())
	require.Len(t, rec.effects, 2)
	require.Equal(t, sim.Time(5), rec.effects[0].At)
	require.Equal(t, sim.Time(7), rec.effects[1].At)
}
