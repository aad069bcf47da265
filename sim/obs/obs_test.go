package obs

import (
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/sim"
)

func TestKindNamesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for k := None; k < numKinds; k++ {
		s := k.String()
		if s == "" || seen[s] {
			t.Fatalf("kind %d has name %q (empty or taken)", k, s)
		}
		seen[s] = true
		if got, ok := ParseKind(s); !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", s, got, ok, k)
		}
	}
	if _, ok := ParseKind("no such kind"); ok {
		t.Error("ParseKind accepted an unknown name")
	}
	if s := numKinds.String(); s != fmt.Sprintf("kind(%d)", numKinds) {
		t.Errorf("unknown kind renders as %q", s)
	}
}

func TestBusFansOutInOrderAndAllocatesIDs(t *testing.T) {
	var a, b Recorder
	bus := NewBus(&a)
	bus.Subscribe(&b)
	if id1, id2 := bus.NewOp(), bus.NewOp(); id1 != 1 || id2 != 2 {
		t.Fatalf("ids %d, %d; want 1, 2", id1, id2)
	}
	bus.Emit(Event{Kind: Issued, At: 5, Op: 1})
	bus.Emit(Event{Kind: Sent, At: 7, Op: 1})
	for _, r := range []*Recorder{&a, &b} {
		if len(r.Events) != 2 || r.Events[0].Kind != Issued || r.Events[1].At != 7 {
			t.Errorf("subscriber got %+v", r.Events)
		}
	}
}

// The op that last changed a word is the one a waiter on it is told
// about; a plain landing does not change it.
func TestLastOpFollowsAtomicsAndCounters(t *testing.T) {
	bus := NewBus()
	bus.Emit(Event{Kind: Atomic, Op: 3, Where: "sig", Addr: 8})
	bus.Emit(Event{Kind: Landed, Op: 9, Where: "sig", Addr: 8})
	bus.Emit(Event{Kind: Counter, Op: 4, Where: "ctr", Addr: 0})
	if got := bus.LastOp("sig", 8); got != 3 {
		t.Errorf("LastOp(sig, 8) = %d, want 3", got)
	}
	if got := bus.LastOp("ctr", 0); got != 4 {
		t.Errorf("LastOp(ctr, 0) = %d, want 4", got)
	}
	if got := bus.LastOp("sig", 0); got != 0 {
		t.Errorf("LastOp of an untouched word = %d, want 0", got)
	}
	bus.Emit(Event{Kind: Atomic, Op: 5, Where: "sig", Addr: 8})
	if got := bus.LastOp("sig", 8); got != 5 {
		t.Errorf("LastOp after a second atomic = %d, want 5", got)
	}
}

type sink struct{ n int }

func (s *sink) Observe(e Event) { s.n += int(e.Bytes) }

// Emitting into a bus allocates nothing (the event is a value).
func TestEmitDoesNotAllocate(t *testing.T) {
	s := &sink{}
	bus := NewBus(s)
	who := "n0g0/nic0"
	allocs := testing.AllocsPerRun(100, func() {
		bus.Emit(Event{Kind: Sent, At: sim.Time(1), Op: 1, Who: who, Bytes: 1})
	})
	if allocs != 0 {
		t.Errorf("Emit allocates %.1f times per event", allocs)
	}
	if s.n == 0 {
		t.Error("subscriber saw nothing")
	}
}

func BenchmarkEmit(b *testing.B) {
	bus := NewBus(&sink{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		bus.Emit(Event{Kind: Sent, At: sim.Time(i), Op: OpID(i), Bytes: 1})
	}
}
