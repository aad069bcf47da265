package gin

import (
	"fmt"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Scope is a CUDA memory scope (givenRelease / requiredRelease).
type Scope = gpu.Scope

// RemoteAction is what an operation does at the peer once its payload has
// settled: a signal increment or add, on an indexed signal of the same
// context or on a word of a window (VA signal). nil means none.
type RemoteAction interface{ remoteAction() }

// SignalInc adds 1 to indexed signal Signal at the peer (ncclGin_SignalInc,
// Strong/WeakSignalInc). Inc may not be mixed with Add on one signal
// between resets.
type SignalInc struct {
	Signal int
	Weak   bool
}

// SignalAdd adds Value to indexed signal Signal at the peer.
type SignalAdd struct {
	Signal int
	Value  uint64
	Weak   bool
}

// VASignalInc adds 1 to the 8-byte word at Off of window Win at the peer
// (the window must be registered with WinStrictOrdering).
type VASignalInc struct {
	Win  *Window
	Off  uint64
	Weak bool
}

// VASignalAdd adds Value to the 8-byte word at Off of window Win at the peer.
type VASignalAdd struct {
	Win   *Window
	Off   uint64
	Value uint64
	Weak  bool
}

func (SignalInc) remoteAction()   {}
func (SignalAdd) remoteAction()   {}
func (VASignalInc) remoteAction() {}
func (VASignalAdd) remoteAction() {}

// LocalAction is what an operation does at the issuer once it is locally
// complete. nil means none.
type LocalAction interface{ localAction() }

// CounterInc adds 1 to local counter Counter of the context when the put is
// locally complete (ncclGin_CounterInc / WeakCounterInc).
type CounterInc struct{ Counter int }

func (CounterInc) localAction() {}

// SignalOf returns the indexed signal id and addend of an indexed remote
// action, with ok false for none or VA signals.
func SignalOf(a RemoteAction) (id int, add uint64, ok bool) {
	switch x := a.(type) {
	case SignalInc:
		return x.Signal, 1, true
	case SignalAdd:
		return x.Signal, x.Value, true
	}
	return 0, 0, false
}

// VASignalOf returns the target of a VA remote action.
func VASignalOf(a RemoteAction) (w *Window, off, add uint64, ok bool) {
	switch x := a.(type) {
	case VASignalInc:
		return x.Win, x.Off, 1, true
	case VASignalAdd:
		return x.Win, x.Off, x.Value, true
	}
	return nil, 0, 0, false
}

// IsWeak reports whether a remote action is a weak signal.
func IsWeak(a RemoteAction) bool {
	switch x := a.(type) {
	case SignalInc:
		return x.Weak
	case SignalAdd:
		return x.Weak
	case VASignalInc:
		return x.Weak
	case VASignalAdd:
		return x.Weak
	}
	return false
}

// OptFlags are ncclGinOptFlags (2.29.7+).
type OptFlags uint32

// Option flags.
const (
	// OptAggregateRequests: more requests follow; GDAKI defers the
	// doorbell to the next call without the flag.
	OptAggregateRequests OptFlags = 1 << iota
	// OptMaySkipCreditCheck: do not wait for free queue slots.
	OptMaySkipCreditCheck
)

// OpKind is the kind of a device operation.
type OpKind uint8

// Operation kinds.
const (
	OpPut OpKind = iota
	OpPutValue
	OpSignal
	OpGet
)

var opKindNames = [...]string{"put", "put_value", "signal", "get"}

func (k OpKind) String() string {
	if int(k) < len(opKindNames) {
		return opKindNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one device operation after the front end validated it: Peer is a
// world rank, windows are resolved, actions checked. For OpPut data moves
// from Src at the issuer to Dst at Peer; for OpGet from Src at Peer to Dst
// at the issuer; OpPutValue writes Value (ValueSize bytes) to Dst at Peer;
// OpSignal carries only Remote. Backends must not keep the pointer after
// Issue returns (the front end reuses it).
type Op struct {
	Kind      OpKind
	Ctx       int
	Peer      int
	Dst       *Window
	DstOff    uint64
	Src       *Window
	SrcOff    uint64
	Bytes     uint64
	Value     uint64
	ValueSize int
	Remote    RemoteAction
	Local     LocalAction
	Flags     OptFlags
	// GivenRelease and RequiredRelease are the scopes as the
	// implementation receives them (already swapped for 2.28, spec 2.5).
	GivenRelease, RequiredRelease Scope
	// Sharing is the resource-sharing mode of the issuing ncclGin (the
	// scope of the backend's index atomics).
	Sharing Sharing
	// ID is the operation's observer id (0 when nobody observes);
	// backends copy it into their WRs or GFDs.
	ID obs.OpID
}

// NeedsSysFence reports whether the backend must emit fence.release.sys
// before publishing op, by NCCL's rule for each backend kind: GDAKI only
// when required == system and given > required; proxy whenever given >
// system (spec 2.4 item 5).
func (op *Op) NeedsSysFence(proxy bool) bool {
	if proxy {
		return op.GivenRelease > gpu.ScopeSystem
	}
	return op.RequiredRelease == gpu.ScopeSystem && op.GivenRelease > op.RequiredRelease
}

// Request is an outstanding flushAsync (ncclGinRequest_t).
type Request struct {
	Ctx, Peer int
	Ticket    uint64
}

// Backend carries out GIN operations through a real mechanism (GDAKI WQEs
// and doorbells, proxy GFD ring and CPU thread).
type Backend interface {
	// Name names the backend ("gdaki", "proxy").
	Name() string
	// Connect creates the per-(rank, context, peer) resources of dc (QPs,
	// rings, signal/counter tables, MRs for dc's windows and windows
	// registered later via RegisterWindow); host side, before kernels run.
	Connect(dc *DevComm) error
	// RegisterWindow registers w (every rank's region) with dc's
	// connections.
	RegisterWindow(dc *DevComm, w *Window) error
	// Issue runs on coop thread 0's process (the front end already did
	// coop.Sync before and does it after): it charges the issue cost,
	// waits for credits unless OptMaySkipCreditCheck, and returns once the
	// op is enqueued.
	Issue(t *gpu.Group, dc *DevComm, rank int, op *Op)
	// FlushAsync snapshots what (rank, ctx) issued to peer so far.
	FlushAsync(t *gpu.Group, dc *DevComm, rank, ctx, peer int) Request
	// Wait returns when everything covered by r is locally complete.
	Wait(t *gpu.Group, dc *DevComm, rank int, r Request)
	// SignalWord and CounterWord say where signal and counter words live
	// (the front end reads, waits and resets them; backends apply effects
	// there).
	SignalWord(dc *DevComm, rank, ctx, id int) (*mem.Region, uint64)
	CounterWord(dc *DevComm, rank, ctx, id int) (*mem.Region, uint64)
	// ResetSignal: GDAKI and proxy v1 store 0; proxy v2 (2.30) records
	// the current value as an offset (SignalOffset returns it). It says
	// what it stored and when the store lands: the resetting group sees
	// its own store before it lands.
	ResetSignal(t *gpu.Group, dc *DevComm, rank, ctx, id int) ResetStore
	SignalOffset(dc *DevComm, rank, ctx, id int) uint64
	// Stats returns the backend's accounting.
	Stats() BackendStats
}

// ResetStore is the store a backend's ResetSignal made: of 0 into the
// signal word, or (Offset) of Value into the signal's offset; it lands at
// Landed.
type ResetStore struct {
	Landed sim.Time
	Offset bool
	Value  uint64
}

// ThenBackend is a Backend that can also issue for a group without a
// process (gpu.GPU.LaunchHandler): IssueThen is Issue, after which
// h.Handle(s, arg) runs when Issue would have returned; FlushThen is
// FlushAsync to peer followed by Wait on its request, after which
// h.Handle(s, arg) runs when Wait would have returned.
type ThenBackend interface {
	Backend
	IssueThen(t *gpu.Group, dc *DevComm, rank int, op *Op, h sim.Handler, arg uint64)
	FlushThen(t *gpu.Group, dc *DevComm, rank, ctx, peer int, h sim.Handler, arg uint64)
}

// BackendStats is a backend's accounting.
type BackendStats struct {
	Name      string
	Ops       uint64 // operations issued
	WQEs      uint64 // work requests posted to NICs
	Doorbells uint64 // doorbells rung
	GFDs      uint64 // proxy descriptors written
	CQEs      uint64 // completions consumed
	// CPUBusy and CPUSpan give the proxy thread's utilisation
	// (CPUBusy/CPUSpan): time spent working versus time running.
	CPUBusy, CPUSpan sim.Duration
	// Extra holds backend-specific counters, in a stable order.
	Extra []Stat
}

// AddCounts adds o's operation counts (Ops, WQEs, Doorbells, GFDs,
// CQEs) to st: a backend kept per partition sums its partitions' stats.
func (st *BackendStats) AddCounts(o BackendStats) {
	st.Ops += o.Ops
	st.WQEs += o.WQEs
	st.Doorbells += o.Doorbells
	st.GFDs += o.GFDs
	st.CQEs += o.CQEs
}

// Stat is one named backend counter.
type Stat struct {
	Name  string
	Value int64
}
