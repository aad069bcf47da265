package prog

import (
	"fmt"
	"slices"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/lsa"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// Launch starts every program of f on dc's ranks, one thread group each
// (named after the program's group), and returns the groups. It checks
// what can be checked before the run (version, ranks, window names); the
// gin front end reports the rest while the programs run.
func Launch(dc *gin.DevComm, f *File) ([]*gpu.Group, error) {
	g, _, err := LaunchResults(dc, f)
	return g, err
}

// Observer is told, as each op of a launched program completes, the
// program's index in the file, the op's index, when it started and ended,
// and the value it returned (reads and waits of signals and counters; 0
// for the others).
type Observer func(program, op int, start, end sim.Time, value uint64)

// LaunchObserved is Launch with obs (nil: none) told about every op.
func LaunchObserved(dc *gin.DevComm, f *File, obs Observer) ([]*gpu.Group, error) {
	return launch(dc, f, nil, obs)
}

// Results are what the ops of a run returned, by program and op index.
type Results struct {
	Ops [][]Result
}

// Result is one op's outcome: whether it returned and when, the value of
// reads and waits (signals, counters, the follow-shadow delta), and the
// bytes of a read.
type Result struct {
	Done  bool
	At    sim.Time
	Value uint64
	Bytes []byte
}

// LaunchResults is Launch that also records every op's Result as the
// programs run.
func LaunchResults(dc *gin.DevComm, f *File) ([]*gpu.Group, *Results, error) {
	res := &Results{Ops: make([][]Result, len(f.Programs))}
	for pi := range f.Programs {
		res.Ops[pi] = make([]Result, len(f.Programs[pi].Ops))
	}
	g, err := launch(dc, f, res, nil)
	return g, res, err
}

func launch(dc *gin.DevComm, f *File, res *Results, obs Observer) ([]*gpu.Group, error) {
	c := dc.Comm()
	if want := c.Profile().Version.String(); f.NCCL != want {
		return nil, fmt.Errorf("prog: programs for NCCL %s on a %s communicator", f.NCCL, want)
	}
	wins := make(map[string]*gin.Window)
	for _, w := range c.Windows() {
		if w.Registered() {
			wins[w.Name()] = w
		}
	}
	var out []*gpu.Group
	for pi := range f.Programs {
		p := &f.Programs[pi]
		if p.Rank >= c.Size() {
			return nil, &Error{Program: pi, Op: -1, Field: "rank", Msg: fmt.Sprintf("rank %d of %d", p.Rank, c.Size())}
		}
		r := &runner{dc: dc, p: p, wins: wins, obs: obs, index: pi}
		if res != nil {
			r.res = res.Ops[pi]
		}
		for oi := range p.Ops {
			if err := r.resolve(oi); err != nil {
				err.Program = pi
				return nil, err
			}
		}
		out = append(out, c.Rank(p.Rank).GPU.Launch(p.Group, p.Threads, r.run))
	}
	return out, nil
}

type runner struct {
	res   []Result
	dc    *gin.DevComm
	p     *Program
	wins  map[string]*gin.Window
	reqs  []gin.Request
	obs   Observer
	index int
}

func (r *runner) win(oi int, field, name string) (*gin.Window, *Error) {
	if name == "" {
		return nil, nil
	}
	w := r.wins[name]
	if w == nil {
		return nil, &Error{Op: oi, Field: field, Msg: fmt.Sprintf("no registered window %q", name)}
	}
	return w, nil
}

func (r *runner) resolve(oi int) *Error {
	op := &r.p.Ops[oi]
	if _, err := r.win(oi, "dst", op.Dst); err != nil {
		return err
	}
	if _, err := r.win(oi, "src", op.Src); err != nil {
		return err
	}
	if op.Remote != nil {
		if _, err := r.win(oi, "remote.win", op.Remote.Win); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) team(name string) gin.Team {
	switch name {
	case "lsa":
		return r.dc.LSA(r.p.Rank)
	case "rail":
		return r.dc.Rail(r.p.Rank)
	}
	return r.dc.World(r.p.Rank)
}

func remote(a *Action, wins map[string]*gin.Window) gin.RemoteAction {
	if a == nil {
		return nil
	}
	switch a.Kind {
	case "inc":
		return gin.SignalInc{Signal: a.ID, Weak: a.Weak}
	case "add":
		return gin.SignalAdd{Signal: a.ID, Value: a.Value, Weak: a.Weak}
	case "va_inc":
		return gin.VASignalInc{Win: wins[a.Win], Off: a.Off, Weak: a.Weak}
	}
	return gin.VASignalAdd{Win: wins[a.Win], Off: a.Off, Value: a.Value, Weak: a.Weak}
}

func flags(fs []string) []gin.OptFlags {
	var f gin.OptFlags
	for _, s := range fs {
		if s == "aggregate" {
			f |= gin.OptAggregateRequests
		} else {
			f |= gin.OptMaySkipCreditCheck
		}
	}
	if f == 0 {
		return nil
	}
	return []gin.OptFlags{f}
}

func scope(s string) gpu.Scope { return gpu.Scope(slices.Index(scopes, s)) }

func order(s string) gin.MemoryOrder {
	if s == "" {
		return gin.OrderAcqRel
	}
	return gin.MemoryOrder(slices.Index(orders, s))
}

// fence is the barrier fence of fs; none given is NCCL's default, Put|Get
// where fence levels exist (2.30, gin_barrier.h@230 L70-71).
func (r *runner) fence(fs []string) gin.FenceLevel {
	if fs == nil && r.dc.Profile().HasBarrierFences {
		return gin.FencePut | gin.FenceGet
	}
	var f gin.FenceLevel
	for _, s := range fs {
		switch s {
		case "put":
			f |= gin.FencePut
		case "get":
			f |= gin.FenceGet
		}
	}
	return f
}

// run executes the program on coop t.
func (r *runner) run(t *gpu.Group) {
	dc, rank := r.dc, r.p.Rank
	handles := map[int]*gin.Gin{}
	h := func(ctx int) *gin.Gin {
		g := handles[ctx]
		if g == nil {
			g = dc.Gin(t, rank, ctx)
			handles[ctx] = g
		}
		return g
	}
	bits := func(b, def int) int {
		if b == 0 {
			return def
		}
		return b
	}
	for i := range r.p.Ops {
		op := &r.p.Ops[i]
		var v uint64
		var b []byte
		start := t.Now()
		w := func(name string) *gin.Window { return r.wins[name] }
		var g *gin.Gin
		if op.Op != "sleep" && op.Op != "compute" && op.Op != "lsa_store" && !(op.Op == "read" && !r.dc.HasGin()) && !(op.Op == "barrier" && (op.Kind == "lsa" || op.Kind == "hybrid")) {
			g = h(op.Ctx)
			if op.Release != nil {
				g.SetRelease(scope(op.Release[0]), scope(op.Release[1]))
			} else {
				g.SetRelease(gpu.ScopeThread, gpu.ScopeDevice)
			}
		}
		switch op.Op {
		case "put":
			var local gin.LocalAction
			if op.Counter != nil {
				local = gin.CounterInc{Counter: *op.Counter}
			}
			g.Put(r.team(op.Team), op.Peer, w(op.Dst), op.DstOff, w(op.Src), op.SrcOff, op.Bytes, remote(op.Remote, r.wins), local, flags(op.Flags)...)
		case "put_value":
			g.PutValue(r.team(op.Team), op.Peer, w(op.Dst), op.DstOff, op.Value, op.Size, remote(op.Remote, r.wins), flags(op.Flags)...)
		case "signal":
			g.Signal(r.team(op.Team), op.Peer, remote(op.Remote, r.wins), flags(op.Flags)...)
		case "get":
			g.Get(r.team(op.Team), op.Peer, w(op.Src), op.SrcOff, w(op.Dst), op.DstOff, op.Bytes, flags(op.Flags)...)
		case "flush":
			g.Flush()
		case "flush_async":
			for len(r.reqs) <= op.Req {
				r.reqs = append(r.reqs, gin.Request{})
			}
			r.reqs[op.Req] = g.FlushAsync(r.team(op.Team), op.Peer)
		case "wait":
			var q gin.Request
			if op.Req < len(r.reqs) {
				q = r.reqs[op.Req]
			}
			g.Wait(q)
		case "read_signal":
			v = g.ReadSignal(op.ID, bits(op.Bits, 64))
		case "wait_signal":
			v = g.WaitSignal(op.ID, op.Least, bits(op.Bits, 64))
		case "reset_signal":
			g.ResetSignal(op.ID)
		case "read_counter":
			v = g.ReadCounter(op.ID, bits(op.Bits, 56))
		case "wait_counter":
			v = g.WaitCounter(op.ID, op.Least, bits(op.Bits, 56))
		case "reset_counter":
			g.ResetCounter(op.ID)
		case "increase_shadow":
			g.IncreaseSignalShadow(op.ID, op.Value)
		case "wait_meet_shadow":
			v = g.WaitSignalMeetShadow(op.ID, bits(op.Bits, 64))
		case "read_va_signal":
			v = g.ReadVASignal(w(op.Dst), op.DstOff, bits(op.Bits, 64))
		case "wait_va_signal":
			v = g.WaitVASignal(w(op.Dst), op.DstOff, op.Least, bits(op.Bits, 64))
		case "read":
			// One byte past the window is enough for the front end to
			// report an oversized read without allocating it.
			b = make([]byte, min(op.Bytes, uint64(w(op.Src).Size())+1))
			if g == nil { // no GIN to report it: a plain load (an LSA program)
				sz := uint64(w(op.Src).Size())
				b = b[:min(uint64(len(b)), sz-min(op.SrcOff, sz))]
				t.Read(w(op.Src).Region(rank), op.SrcOff, b)
			} else {
				g.ReadWindow(w(op.Src), op.SrcOff, b)
			}
		case "barrier":
			switch op.Kind {
			case "rail_gin":
				g.GinBarrier(gin.BarrierRailGin, op.Index, op.All).Sync(order(op.Order), r.fence(op.Fence))
			case "world_gin":
				g.GinBarrier(gin.BarrierWorldGin, op.Index, op.All).Sync(order(op.Order), r.fence(op.Fence))
			case "lsa":
				if b := lsa.New(dc, t, rank).Barrier(op.Index); b != nil {
					b.Sync(order(op.Order))
				}
			case "hybrid":
				lsa.NewSession(dc, t, rank, op.Ctx, op.Index).Sync(order(op.Order), r.fence(op.Fence))
			}
		case "sleep":
			t.Sleep(sim.Duration(op.Ps))
		case "compute":
			t.Compute(sim.Duration(op.Ps))
		case "lsa_store":
			l := lsa.New(dc, t, rank)
			switch {
			case op.Size != 0:
				l.Store(op.Peer, w(op.Dst), op.DstOff, op.Value)
			case op.Src != "":
				l.CopyFrom(op.Peer, w(op.Dst), op.DstOff, w(op.Src), op.SrcOff, sim.Bytes(op.Bytes))
			default:
				l.Copy(op.Peer, w(op.Dst), op.DstOff, nil, sim.Bytes(op.Bytes))
			}
		}
		if r.res != nil {
			r.res[i] = Result{Done: true, At: t.Now(), Value: v, Bytes: b}
		}
		if r.obs != nil {
			r.obs(r.index, i, start, t.Now(), v)
		}
	}
}
