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
		r := &runner{dc: dc, p: p, wins: wins}
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
	dc   *gin.DevComm
	p    *Program
	wins map[string]*gin.Window
	reqs []gin.Request
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

func fence(fs []string) gin.FenceLevel {
	var f gin.FenceLevel
	for _, s := range fs {
		if s == "put" {
			f |= gin.FencePut
		} else {
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
		w := func(name string) *gin.Window { return r.wins[name] }
		var g *gin.Gin
		if op.Op != "sleep" && op.Op != "compute" && op.Op != "lsa_store" && !(op.Op == "barrier" && (op.Kind == "lsa" || op.Kind == "hybrid")) {
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
			g.ReadSignal(op.ID, bits(op.Bits, 64))
		case "read_window":
			// One byte past the window is enough for the front end to
			// report an oversized read without allocating it.
			g.ReadWindow(w(op.Src), op.SrcOff, make([]byte, min(op.Bytes, uint64(w(op.Src).Size())+1)))
		case "wait_signal":
			g.WaitSignal(op.ID, op.Least, bits(op.Bits, 64))
		case "reset_signal":
			g.ResetSignal(op.ID)
		case "read_counter":
			g.ReadCounter(op.ID, bits(op.Bits, 56))
		case "wait_counter":
			g.WaitCounter(op.ID, op.Least, bits(op.Bits, 56))
		case "reset_counter":
			g.ResetCounter(op.ID)
		case "increase_shadow":
			g.IncreaseSignalShadow(op.ID, op.Value)
		case "wait_meet_shadow":
			g.WaitSignalMeetShadow(op.ID, bits(op.Bits, 64))
		case "barrier":
			switch op.Kind {
			case "rail_gin":
				g.GinBarrier(gin.BarrierRailGin, op.Index, op.All).Sync(order(op.Order), fence(op.Fence))
			case "world_gin":
				g.GinBarrier(gin.BarrierWorldGin, op.Index, op.All).Sync(order(op.Order), fence(op.Fence))
			case "lsa":
				if b := lsa.New(dc, t, rank).Barrier(op.Index); b != nil {
					b.Sync(order(op.Order))
				}
			case "hybrid":
				lsa.NewSession(dc, t, rank, op.Ctx, op.Index).Sync(order(op.Order), fence(op.Fence))
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
	}
}
