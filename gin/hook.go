package gin

import (
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// CallKind names a device API call, for hooks (gin/prog's Recorder).
type CallKind uint8

// Device API calls.
const (
	CallPut CallKind = iota
	CallPutValue
	CallSignal
	CallGet
	CallFlush
	CallFlushAsync
	CallWait
	CallReadSignal
	CallWaitSignal
	CallWaitMeetShadow
	CallWaitFollowShadow
	CallIncreaseShadow
	CallResetSignal
	CallReadCounter
	CallWaitCounter
	CallResetCounter
	CallReadVASignal
	CallWaitVASignal
	CallResetVASignal
	CallBarrier
	CallCompute
	CallSleep
	CallLSAStore
	CallLSABarrier
)

// Call is one device API call as the user made it (team-relative peer,
// options before the 2.28 scope swap), for hooks.
type Call struct {
	Op       CallKind
	Team     Team
	Peer     int
	Dst, Src *Window
	DstOff   uint64
	SrcOff   uint64
	Bytes    uint64
	Value    uint64 // putValue value, wait threshold, shadow delta
	Size     int
	Remote   RemoteAction
	Local    LocalAction
	Opts     Op // Flags, GivenRelease, RequiredRelease as passed (swapped back)
	Signal   int
	Counter  int
	Bits     int
	Req      Request
	Duration sim.Duration
	// Barrier calls: which barrier and how.
	Barrier BarrierCall
}

// BarrierCall describes a barrier session sync.
type BarrierCall struct {
	Kind        BarrierKind
	Index       int
	AllContexts bool
	Order       MemoryOrder
	Fence       FenceLevel
}

// Hook sees every device API call made through a DevComm's handles (not
// the calls barriers make internally). gin/prog's Recorder implements it.
type Hook interface {
	Call(t *gpu.Group, rank, ctx int, c *Call)
}

// SetHook installs a hook (nil removes it).
func (dc *DevComm) SetHook(h Hook) { dc.hook = h }

// Hook returns the installed hook (nil if none); gin/lsa reports its calls
// through it.
func (dc *DevComm) Hook() Hook { return dc.hook }

func (g *Gin) record(c Call) {
	if g.dc.hook == nil || g.internal {
		return
	}
	if g.dc.c.prof.SwapScopes { // report the user's argument order
		c.Opts.GivenRelease, c.Opts.RequiredRelease = c.Opts.RequiredRelease, c.Opts.GivenRelease
	}
	if g.call == nil {
		g.call = new(Call)
	}
	*g.call = c
	g.dc.hook.Call(g.t, g.rank, g.ctx, g.call)
}
