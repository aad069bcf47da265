package prog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gintest"
	"github.com/ginsim/ginsim/gin/lsa"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

func TestDecodeErrors(t *testing.T) {
	head := `{"format":1,"nccl":"2.30","programs":[{"rank":0,"group":"g","threads":32,"ops":[`
	for _, c := range []struct{ ops, want string }{
		{`{"op":"flush"},{"op":"put","dst":"w"}`, `prog: program 0: op 1: field "team": put needs it`},
		{`{"op":"jump"}`, `prog: program 0: op 0: field "op": unknown op "jump"`},
		{`{"op":"flush","least":3}`, `prog: program 0: op 0: field "least": not a field of flush`},
		{`{"op":"signal","team":"galaxy","remote":{"kind":"inc"}}`, `field "team": "galaxy" is not one of world, lsa, rail`},
		{`{"op":"signal","team":"world","remote":{"kind":"inc","value":3}}`, `field "remote.value": inc takes no value`},
		{`{"op":"signal","team":"world","remote":{"kind":"va_add","id":1}}`, `field "remote.win": va_add needs a window`},
		{`{"op":"put_value","team":"world","dst":"w","size":3}`, `field "size": 3, want 1, 2, 4 or 8`},
		{`{"op":"wait_signal","id":-1}`, `op 0: field "id": negative`},
		{`{"op":"wait_signal","bits":65}`, `field "bits": 65, want 1..64`},
		{`{"op":"put","team":"world","bytes":"lots"}`, `op 0: field "bytes": json: cannot unmarshal`},
		{`{"op":"barrier","kind":"rail_gin","fence":["put","bogus"]}`, `field "fence": "bogus" is not one of put, get`},
		{`{"op":"signal","team":"world","remote":{"kind":"inc"},"release":["thread"]}`, `field "release": want [given, required]`},
		{`3`, `op 0: json: cannot unmarshal number`},
	} {
		_, err := Decode([]byte(head + c.ops + `]}]}`))
		require.Error(t, err, c.ops)
		require.Contains(t, err.Error(), c.want, c.ops)
	}
	for _, c := range []struct{ doc, want string }{
		{`{"format":2,"nccl":"2.30","programs":[]}`, `field "format": format 2, want 1`},
		{`{"format":1,"nccl":"2.29","programs":[]}`, `field "nccl"`},
		{`{"format":1,"nccl":"2.30","programs":[{"rank":0,"group":"g","threads":0,"ops":[]}]}`, `program 0: field "threads"`},
		{`{"format":1,"nccl":"2.30","programs":[],"extra":1}`, `unknown field "extra"`},
		{`{"format":1,"nccl":"2.30","programs":[]} {}`, `trailing data`},
	} {
		_, err := Decode([]byte(c.doc))
		require.ErrorContains(t, err, c.want, c.doc)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"format":1,"nccl":"2.30","programs":[{"rank":0,"group":"g","threads":32,"ops":[{"op":"put","team":"world","peer":1,"dst":"w","src":"w","bytes":64,"remote":{"kind":"inc","id":2},"counter":0},{"op":"flush"},{"op":"barrier","kind":"world_gin","fence":["put"]}]}]}`))
	f.Add([]byte(`{"format":1,"nccl":"2.28","programs":[{"rank":1,"group":"x","threads":1,"ops":[{"op":"wait_signal","id":3,"least":4,"bits":32},{"op":"sleep","ps":5}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := Encode(file)
		if err != nil {
			t.Fatalf("encode of a decoded file: %v", err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode of an encoded file: %v\n%s", err, enc)
		}
		require.Equal(t, file, again)
	})
}

type effLog struct{ b *strings.Builder }

func (l effLog) Observe(e *mem.Effect) {
	fmt.Fprintf(l.b, "t=%v %v %s+%d len=%d by %s %d->%d\n", e.At, e.Op, e.Region.Name(), e.Off, e.Len, e.Agent, e.Old, e.New)
}

type world struct {
	cl       *gintest.Cluster
	dc       *gin.DevComm
	buf, flg *gin.Window
	log      strings.Builder
}

func newWorld(t *testing.T, v gin.Version) *world {
	cl, err := gintest.NewCluster(2, 2, v)
	require.NoError(t, err)
	req := gin.Requirements{GinSignalCount: 8, GinCounterCount: 2, BarrierCount: 1, RailGinBarrierCount: 1, ConnectionType: gin.ConnFull}
	dc, err := cl.Comm.DevCommCreate(req)
	require.NoError(t, err)
	w := &world{cl: cl, dc: dc}
	w.buf, err = cl.Comm.WindowRegister("buf", 64<<10, gin.WinDefault, true)
	require.NoError(t, err)
	w.flg, err = cl.Comm.WindowRegister("flag", 4096, gin.WinStrictOrdering, true)
	require.NoError(t, err)
	for r := range cl.Ranks {
		b := w.buf.Region(r).Bytes()
		for i := range b {
			b[i] = byte(r*31 + i)
		}
	}
	cl.Mem.SetObserver(effLog{&w.log})
	return w
}

// final returns every window byte and every backend signal/counter word.
func (w *world) final() string {
	var b strings.Builder
	for _, r := range w.cl.Mem.Regions() {
		if r.Backed() {
			fmt.Fprintf(&b, "%s %x\n", r.Name(), r.Bytes())
		} else {
			for off := uint64(0); off+8 <= uint64(r.Size()) && off < 4096; off += 8 {
				if v := r.Load64(off); v != 0 {
					fmt.Fprintf(&b, "%s+%d=%d\n", r.Name(), off, v)
				}
			}
		}
	}
	return b.String()
}

// goProgram is a small all-to-all with signals, counters, get, flushes,
// barriers and LSA stores, written against the Go API.
func goProgram(w *world, v gin.Version) {
	dc := w.dc
	for r := range w.cl.Ranks {
		w.cl.Ranks[r].GPU.Launch("a2a", 32, func(t *gpu.Group) {
			g := dc.Gin(t, r, 0)
			g.Compute(sim.Duration(r) * 100 * sim.Nanosecond)
			for p := 0; p < 4; p++ {
				g.Put(dc.World(r), p, w.buf, uint64(r*4096), w.buf, uint64(p*1024), 1024, gin.SignalInc{Signal: 1}, gin.CounterInc{Counter: 0})
			}
			g.PutValue(dc.Rail(r), (dc.Rail(r).Rank+1)%2, w.flg, uint64(8*r), uint64(0xab00+r), 8, gin.SignalAdd{Signal: 2, Value: 5})
			g.WaitCounter(0, 4, 56)
			g.WaitSignal(1, 4, 64)
			g.WaitSignal(2, 5, 64)
			if v == gin.V2_30 {
				g.Get(dc.World(r), (r+2)%4, w.buf, 0, w.buf, 32768, 512)
				q := g.FlushAsync(dc.World(r), (r+2)%4)
				g.Wait(q)
			}
			g.Flush()
			fence := gin.FencePut // 2.28 has the Relaxed fence level only
			if v == gin.V2_28 {
				fence = gin.FenceNone
			}
			g.GinBarrier(gin.BarrierRailGin, 0, false).Sync(gin.OrderAcqRel, fence)
			l := lsa.New(dc, t, r)
			l.CopyFrom(1-dc.LSA(r).Rank, w.buf, 40960, w.buf, 0, 2048)
			l.Store(1-dc.LSA(r).Rank, w.flg, 512, 7)
			lsa.NewSession(dc, t, r, 0, 0).Sync(gin.OrderAcqRel, gin.FencePut)
			g.ResetSignal(1)
			g.Sleep(300 * sim.Nanosecond)
			g.ReadSignal(1, 64)
		})
	}
}

// The recorded program, encoded, decoded and interpreted on a fresh
// cluster, gives the same final memory and the same timeline.
func TestRecordInterpretEquivalence(t *testing.T) {
	for _, v := range []gin.Version{gin.V2_28, gin.V2_30} {
		t.Run(v.String(), func(t *testing.T) {
			a := newWorld(t, v)
			rec := NewRecorder(a.dc)
			goProgram(a, v)
			require.NoError(t, a.cl.Sim.Run())
			require.NoError(t, a.cl.Comm.CheckDeadlock())
			require.NoError(t, rec.Err())
			enc, err := Encode(rec.File())
			require.NoError(t, err)
			file, err := Decode(enc)
			require.NoError(t, err)
			require.Equal(t, rec.File(), file)

			b := newWorld(t, v)
			_, err = Launch(b.dc, file)
			require.NoError(t, err)
			require.NoError(t, b.cl.Sim.Run())
			require.NoError(t, b.cl.Comm.CheckDeadlock())
			require.Equal(t, a.final(), b.final())
			require.Equal(t, a.log.String(), b.log.String())
			require.Equal(t, a.cl.Sim.Now(), b.cl.Sim.Now())
			require.Greater(t, strings.Count(a.log.String(), "\n"), 100)
		})
	}
}

func TestLaunchErrors(t *testing.T) {
	w := newWorld(t, gin.V2_30)
	_, err := Launch(w.dc, &File{Format: 1, NCCL: "2.28"})
	require.ErrorContains(t, err, "programs for NCCL 2.28 on a 2.30 communicator")
	_, err = Launch(w.dc, &File{Format: 1, NCCL: "2.30", Programs: []Program{{Rank: 0, Group: "g", Threads: 1,
		Ops: []Op{{Op: "flush"}, {Op: "put", Team: "world", Dst: "nope"}}}}})
	require.ErrorContains(t, err, `prog: program 0: op 1: field "dst": no registered window "nope"`)
	// A program error found while running is the gin front end's report.
	_, err = Launch(w.dc, &File{Format: 1, NCCL: "2.30", Programs: []Program{{Rank: 0, Group: "g", Threads: 1,
		Ops: []Op{{Op: "wait_signal", ID: 99}}}}})
	require.NoError(t, err)
	require.ErrorIs(t, w.cl.Sim.Run(), gin.ErrSignalRange)
	w.cl.Sim.Shutdown()
}

// A barrier op without "fence" takes NCCL's default: Put|Get in 2.30
// (gin_barrier.h@230 L70-71), Relaxed in 2.28 (the only level); "none" is
// no fence. With the Put fence a 2.30 world GIN barrier also signals self
// (4 signals per rank of 4, not 3) and the Get fence flushes.
func TestBarrierDefaultFence(t *testing.T) {
	for _, c := range []struct {
		v     gin.Version
		fence []string
		ops   uint64
	}{
		{gin.V2_30, nil, 16},
		{gin.V2_30, []string{"none"}, 12},
		{gin.V2_30, []string{"put"}, 16},
		{gin.V2_28, nil, 12},
	} {
		cl, err := gintest.NewCluster(2, 2, c.v)
		require.NoError(t, err)
		req := gin.Requirements{GinSignalCount: 1, RailGinBarrierCount: 1, ConnectionType: gin.ConnFull}
		kind := "rail_gin"
		if c.v == gin.V2_30 {
			req = gin.Requirements{GinSignalCount: 1, WorldGinBarrierCount: 1, ConnectionType: gin.ConnFull}
			kind = "world_gin"
		}
		dc, err := cl.Comm.DevCommCreate(req)
		require.NoError(t, err)
		f := &File{Format: 1, NCCL: c.v.String()}
		for r := range 4 {
			f.Programs = append(f.Programs, Program{Rank: r, Group: "b", Threads: 32, Ops: []Op{{Op: "barrier", Kind: kind, Fence: c.fence}}})
		}
		_, err = Launch(dc, f)
		require.NoError(t, err)
		require.NoError(t, cl.Sim.Run())
		want := c.ops
		if c.v == gin.V2_28 {
			want = 4 // a rail barrier of 2: one signal per rank
		}
		require.Equal(t, want, cl.Backend.Stats().Ops, "%v fence %v", c.v, c.fence)
	}
}

// LaunchObserved reports every op once, in order per program, with its
// times and the values reads and waits returned.
func TestLaunchObserved(t *testing.T) {
	w := newWorld(t, gin.V2_30)
	one := 1
	f := &File{Format: 1, NCCL: "2.30", Programs: []Program{
		{Rank: 0, Group: "a", Threads: 1, Ops: []Op{
			{Op: "put", Team: "world", Peer: 1, Dst: "buf", Src: "buf", Bytes: 64, Remote: &Action{Kind: "add", ID: 1, Value: 5}, Counter: &one},
			{Op: "wait_counter", ID: 1, Least: 1},
			{Op: "flush"}}},
		{Rank: 1, Group: "b", Threads: 1, Ops: []Op{
			{Op: "wait_signal", ID: 1, Least: 5},
			{Op: "read_signal", ID: 1}}},
	}}
	type seen struct {
		prog, op   int
		start, end sim.Time
		value      uint64
	}
	var got []seen
	_, err := LaunchObserved(w.dc, f, func(p, o int, start, end sim.Time, v uint64) { got = append(got, seen{p, o, start, end, v}) })
	require.NoError(t, err)
	require.NoError(t, w.cl.Sim.Run())
	next := map[int]int{}
	values := map[[2]int]uint64{}
	for _, s := range got {
		require.Equal(t, next[s.prog], s.op, "ops in order")
		next[s.prog]++
		require.LessOrEqual(t, s.start, s.end)
		values[[2]int{s.prog, s.op}] = s.value
	}
	require.Equal(t, map[int]int{0: 3, 1: 2}, next)
	require.Equal(t, uint64(1), values[[2]int{0, 1}], "wait_counter returns the counter")
	require.Equal(t, uint64(5), values[[2]int{1, 0}], "wait_signal returns the signal")
	require.Equal(t, uint64(5), values[[2]int{1, 1}])
	require.Zero(t, values[[2]int{0, 0}], "a put reads nothing")
}
