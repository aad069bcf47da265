package prog

import (
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
)

// Recorder is a gin.Hook that turns the device API calls made through a
// DevComm's handles (and gin/lsa) into programs: one per (rank, group), in
// the order groups made their first call. Go code must use Gin.Sleep and
// Gin.Compute (not the group's) for waits and work to be recorded.
type Recorder struct {
	dc    *gin.DevComm
	progs []*Program
	index map[recKey]int
	err   error
}

type recKey struct {
	rank  int
	group *gpu.Group
}

// NewRecorder installs a recorder on dc.
func NewRecorder(dc *gin.DevComm) *Recorder {
	r := &Recorder{dc: dc, index: make(map[recKey]int)}
	dc.SetHook(r)
	return r
}

// File returns the programs recorded so far.
func (r *Recorder) File() *File {
	f := &File{Format: FormatVersion, NCCL: r.dc.Profile().Version.String()}
	for _, p := range r.progs {
		f.Programs = append(f.Programs, *p)
	}
	return f
}

func (r *Recorder) teamName(rank int, t gin.Team) string {
	switch t {
	case r.dc.LSA(rank):
		if t != r.dc.World(rank) {
			return "lsa"
		}
	case r.dc.Rail(rank):
		if t != r.dc.World(rank) {
			return "rail"
		}
	}
	return "world"
}

func winName(w *gin.Window) string {
	if w == nil {
		return ""
	}
	return w.Name()
}

func action(a gin.RemoteAction) *Action {
	switch x := a.(type) {
	case gin.SignalInc:
		return &Action{Kind: "inc", ID: x.Signal, Weak: x.Weak}
	case gin.SignalAdd:
		return &Action{Kind: "add", ID: x.Signal, Value: x.Value, Weak: x.Weak}
	case gin.VASignalInc:
		return &Action{Kind: "va_inc", Win: winName(x.Win), Off: x.Off, Weak: x.Weak}
	case gin.VASignalAdd:
		return &Action{Kind: "va_add", Win: winName(x.Win), Off: x.Off, Value: x.Value, Weak: x.Weak}
	}
	return nil
}

func flagNames(f gin.OptFlags) []string {
	var out []string
	if f&gin.OptAggregateRequests != 0 {
		out = append(out, "aggregate")
	}
	if f&gin.OptMaySkipCreditCheck != 0 {
		out = append(out, "skip_credit_check")
	}
	return out
}

func release(o gin.Op) []string {
	if o.GivenRelease == gpu.ScopeThread && o.RequiredRelease == gpu.ScopeDevice {
		return nil
	}
	return []string{scopes[o.GivenRelease], scopes[o.RequiredRelease]}
}

// Call implements gin.Hook.
func (r *Recorder) Call(t *gpu.Group, rank, ctx int, c *gin.Call) {
	k := recKey{rank, t}
	i, ok := r.index[k]
	if !ok {
		i = len(r.progs)
		r.index[k] = i
		r.progs = append(r.progs, &Program{Rank: rank, Group: t.Name(), Threads: t.Size()})
	}
	p := r.progs[i]
	op := Op{Ctx: max(ctx, 0)}
	issue := func(name string) {
		op.Op, op.Team, op.Peer = name, r.teamName(rank, c.Team), c.Peer
		op.Flags, op.Release = flagNames(c.Opts.Flags), release(c.Opts)
		op.Remote = action(c.Remote)
	}
	switch c.Op {
	case gin.CallPut:
		issue("put")
		op.Dst, op.DstOff, op.Src, op.SrcOff, op.Bytes = winName(c.Dst), c.DstOff, winName(c.Src), c.SrcOff, c.Bytes
		if ci, ok := c.Local.(gin.CounterInc); ok {
			n := ci.Counter
			op.Counter = &n
		}
	case gin.CallPutValue:
		issue("put_value")
		op.Dst, op.DstOff, op.Value, op.Size = winName(c.Dst), c.DstOff, c.Value, c.Size
	case gin.CallSignal:
		issue("signal")
	case gin.CallGet:
		issue("get")
		op.Remote = nil
		op.Release = nil
		op.Dst, op.DstOff, op.Src, op.SrcOff, op.Bytes = winName(c.Dst), c.DstOff, winName(c.Src), c.SrcOff, c.Bytes
	case gin.CallFlush:
		op.Op = "flush"
	case gin.CallFlushAsync:
		op.Op, op.Team, op.Peer = "flush_async", r.teamName(rank, c.Team), c.Peer
		op.Req = r.slot(p, ctx, gin.TeamRankToWorld(rank, c.Team, c.Peer))
	case gin.CallWait:
		op.Op = "wait"
		op.Req = r.findSlot(p, c.Req)
	case gin.CallReadSignal:
		op.Op, op.ID, op.Bits = "read_signal", c.Signal, c.Bits
	case gin.CallWaitSignal:
		op.Op, op.ID, op.Least, op.Bits = "wait_signal", c.Signal, c.Value, c.Bits
	case gin.CallResetSignal:
		op.Op, op.ID = "reset_signal", c.Signal
	case gin.CallReadCounter:
		op.Op, op.ID, op.Bits = "read_counter", c.Counter, c.Bits
	case gin.CallWaitCounter:
		op.Op, op.ID, op.Least, op.Bits = "wait_counter", c.Counter, c.Value, c.Bits
	case gin.CallResetCounter:
		op.Op, op.ID = "reset_counter", c.Counter
	case gin.CallReadVASignal:
		op.Op, op.Dst, op.DstOff, op.Bits = "read_va_signal", winName(c.Dst), c.DstOff, c.Bits
	case gin.CallWaitVASignal:
		op.Op, op.Dst, op.DstOff, op.Least, op.Bits = "wait_va_signal", winName(c.Dst), c.DstOff, c.Value, c.Bits
	case gin.CallIncreaseShadow:
		op.Op, op.ID, op.Value = "increase_shadow", c.Signal, c.Value
	case gin.CallWaitMeetShadow:
		op.Op, op.ID, op.Bits = "wait_meet_shadow", c.Signal, c.Bits
	case gin.CallBarrier, gin.CallLSABarrier:
		b := c.Barrier
		op.Op, op.Kind, op.Index, op.All, op.Order = "barrier", b.Kind.String(), b.Index, b.AllContexts, b.Order.String()
		if b.Fence&gin.FencePut != 0 {
			op.Fence = append(op.Fence, "put")
		}
		if b.Fence&gin.FenceGet != 0 {
			op.Fence = append(op.Fence, "get")
		}
		if b.Fence == gin.FenceNone && c.Op == gin.CallBarrier {
			op.Fence = []string{"none"} // absent is NCCL's default
		}
	case gin.CallCompute:
		op.Op, op.Ps = "compute", int64(c.Duration)
	case gin.CallSleep:
		op.Op, op.Ps = "sleep", int64(c.Duration)
	case gin.CallLSAStore:
		op = Op{Op: "lsa_store", Peer: c.Peer, Dst: winName(c.Dst), DstOff: c.DstOff, Src: winName(c.Src), SrcOff: c.SrcOff, Bytes: c.Bytes}
		if c.Size == 8 {
			op.Bytes, op.Value, op.Size = 0, c.Value, 8
		}
	default:
		// Calls without a program form (VA-signal reads, waits and resets,
		// waitSignalFollowShadow) make the recording incomplete.
		if r.err == nil {
			r.err = &Error{Program: i, Op: len(p.Ops), Msg: "a call with no program form was made"}
		}
		return
	}
	p.Ops = append(p.Ops, op)
}

// Err reports a call the program form cannot express, if any was made.
func (r *Recorder) Err() error { return r.err }

// slot picks the request slot of a flush_async: slot = ctx × peers + peer
// keeps requests of different (ctx, peer) apart.
func (r *Recorder) slot(_ *Program, ctx, peer int) int {
	return ctx*r.dc.Comm().Size() + peer
}

func (r *Recorder) findSlot(_ *Program, q gin.Request) int {
	return q.Ctx*r.dc.Comm().Size() + q.Peer
}
