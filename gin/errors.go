package gin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ginsim/ginsim/sim"
)

// Kinds of user errors in device code. An *Error wraps one of them.
var (
	ErrWindowBounds   = errors.New("access outside the window")
	ErrUnregistered   = errors.New("window not registered with this communicator")
	ErrPeer           = errors.New("peer outside the team")
	ErrNotConnected   = errors.New("peer not connected (RAIL connections reach the rail team only)")
	ErrContext        = errors.New("context index out of range")
	ErrSignalRange    = errors.New("signal index out of range")
	ErrCounterRange   = errors.New("counter index out of range")
	ErrMixedSignalOps = errors.New("SignalInc mixed with SignalAdd on one signal between resets")
	ErrResetRace      = errors.New("reset racing an update")
	ErrUnsupported    = errors.New("not available in this NCCL version")
	ErrInvalid        = errors.New("invalid argument")
	ErrNoGin          = errors.New("device communicator has no GIN")
)

// Error is a user error in device code, reported through sim.Fail. Ctx is
// -1 for calls without a GIN context (gin/lsa).
type Error struct {
	At     sim.Time
	Rank   int
	Ctx    int
	Coop   string
	Op     string
	Kind   error
	Detail string
}

func (e *Error) Error() string {
	var s string
	if e.Ctx < 0 { // LSA calls have no context
		s = fmt.Sprintf("gin: t=%v rank %d coop %q %s: %v", e.At, e.Rank, e.Coop, e.Op, e.Kind)
	} else {
		s = fmt.Sprintf("gin: t=%v rank %d ctx %d coop %q %s: %v", e.At, e.Rank, e.Ctx, e.Coop, e.Op, e.Kind)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the error kind.
func (e *Error) Unwrap() error { return e.Kind }

// DeadlockError reports coops still waiting when the run went quiescent.
type DeadlockError struct {
	At    sim.Time
	Waits []string
}

// ErrDeadlock is the kind of a *DeadlockError.
var ErrDeadlock = errors.New("gin: deadlock")

func (e *DeadlockError) Error() string {
	return fmt.Sprintf("gin: deadlock at t=%v: %s", e.At, strings.Join(e.Waits, "; "))
}

// Unwrap returns ErrDeadlock.
func (e *DeadlockError) Unwrap() error { return ErrDeadlock }
