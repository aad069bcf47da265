package obs

import (
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/internal/par"
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

// emitter is a partition's model for the split bus tests: on each event
// it emits one Issued event stamped with a fresh id, schedules its next
// event (sometimes at the same instant) and sometimes Sends one to the
// next partition.
type emitter struct {
	bus  *Bus
	w    *sim.World
	all  []*emitter // by partition
	left int
}

func (m *emitter) Handle(s *sim.Sim, arg uint64) {
	b := m.bus.Of(s)
	b.Emit(Event{Kind: Issued, At: s.Now(), Op: b.NewOp(), Index: uint64(s.Part()), Value: arg})
	if m.left == 0 {
		return
	}
	m.left--
	s.Post(s.Now().Add(sim.Duration(arg%3)*sim.Nanosecond), m, arg+1)
	if arg%4 == 0 {
		to := (s.Part() + 1) % m.w.Parts()
		s.Send(m.w.Part(to), s.Now().Add(m.w.Lookahead()+sim.Duration(arg%5)), m.all[to], arg*7)
	}
}

// splitRun runs the emitters on parts partitions, on a bus split by split
// (Split or SplitOverlapped), and returns the stream delivered; a nil exec
// runs the World's sequential kernel.
func splitRun(t *testing.T, parts int, exec sim.Exec, split func(*sim.World, ...Observer) *Bus) []Event {
	t.Helper()
	w := sim.NewWorld(sim.Config{Seed: 1}, parts, 10*sim.Nanosecond)
	w.SetExec(exec)
	w.SetSequential(exec == nil)
	var rec Recorder
	bus := split(w, &rec)
	all := make([]*emitter, parts)
	for i := range parts {
		all[i] = &emitter{bus: bus, w: w, all: all, left: 200}
		w.Part(i).Post(sim.Time(i), all[i], uint64(i))
	}
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	return rec.Events
}

// A split bus delivers each partition's events in emit order, merged by
// (At, partition); ids are unique and drawn per partition.
func TestSplitMergesByTimeThenPartition(t *testing.T) {
	ev := splitRun(t, 3, sim.Serial, Split)
	if len(ev) < 3*200 {
		t.Fatalf("%d events", len(ev))
	}
	ids := map[OpID]bool{}
	for i, e := range ev {
		if ids[e.Op] {
			t.Fatalf("id %d drawn twice", e.Op)
		}
		ids[e.Op] = true
		if p := int(e.Index); int(e.Op-1)%3 != p {
			t.Fatalf("event %d: id %d drawn by partition %d", i, e.Op, p)
		}
		if i > 0 {
			a := ev[i-1]
			if a.At > e.At || (a.At == e.At && a.Index > e.Index) {
				t.Fatalf("event %d (%v, part %d) after (%v, part %d)", i, e.At, e.Index, a.At, a.Index)
			}
		}
	}
}

// The merged stream does not depend on how the partitions' windows run,
// nor on whether the merge runs between windows or beside the next one
// (SplitOverlapped), nor on the kernel (windows or sequential): every
// event is delivered by the time Run returns.
func TestSplitStreamIndependentOfExec(t *testing.T) {
	want := splitRun(t, 4, sim.Serial, Split)
	rev := func(n int, f func(int)) {
		for i := n - 1; i >= 0; i-- {
			f(i)
		}
	}
	pool := par.NewPool(4)
	defer pool.Close()
	for _, exec := range []sim.Exec{sim.Serial, rev, pool.Exec, nil} {
		for _, split := range []func(*sim.World, ...Observer) *Bus{Split, SplitOverlapped} {
			got := splitRun(t, 4, exec, split)
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		}
	}
}

// With one partition a split bus numbers ops as a lone bus does, and a
// lone bus is its own partition bus.
func TestSplitOfOnePartitionIsALoneBus(t *testing.T) {
	w := sim.NewWorld(sim.Config{}, 1, sim.Nanosecond)
	b := Split(w).Part(0)
	if a, c := b.NewOp(), b.NewOp(); a != 1 || c != 2 {
		t.Errorf("ids %d, %d; want 1, 2", a, c)
	}
	if n := b.Parts(); n != 1 {
		t.Errorf("a split bus of one partition has %d", n)
	}
	lone := NewBus()
	if lone.Parts() != 0 {
		t.Error("a lone bus has partitions")
	}
	if lone.Of(sim.New(sim.Config{})) != lone || lone.Part(3) != lone {
		t.Error("a lone bus is not its own partition bus")
	}
	var nilBus *Bus
	if nilBus.Of(w.Part(0)) != nil {
		t.Error("a nil bus has a partition bus")
	}
}

// Flush delivers exactly what a k-way merge that picks, event by event,
// the partition whose next event is earliest (lowest partition among
// equals) delivers, also when a partition's events are not in time order
// (a Hop's At may lie ahead of its emitter's clock) and in runs of one
// partition.
func TestFlushIsTheEventByEventMerge(t *testing.T) {
	r := sim.New(sim.Config{Seed: 7}).Rand("flush")
	for trial := range 200 {
		parts := 1 + r.IntN(5)
		w := sim.NewWorld(sim.Config{}, parts, sim.Nanosecond)
		var rec Recorder
		b := Split(w, &rec)
		bufs := make([][]Event, parts)
		for p := range parts {
			n := r.IntN(12)
			if trial%4 == 0 && p > 0 {
				n = 0 // one partition alone
			}
			at := sim.Time(r.IntN(4))
			for k := range n {
				if r.IntN(5) == 0 {
					at -= sim.Time(r.IntN(3)) // out of order
				} else {
					at += sim.Time(r.IntN(3))
				}
				e := Event{At: at, Index: uint64(p), Value: uint64(k)}
				bufs[p] = append(bufs[p], e)
				b.Part(p).Emit(e)
			}
		}
		var want []Event
		heads := make([]int, parts)
		for {
			best := -1
			for p := range parts {
				if heads[p] < len(bufs[p]) && (best < 0 || bufs[p][heads[p]].At < bufs[best][heads[best]].At) {
					best = p
				}
			}
			if best < 0 {
				break
			}
			want = append(want, bufs[best][heads[best]])
			heads[best]++
		}
		b.Flush()
		if fmt.Sprint(rec.Events) != fmt.Sprint(want) {
			t.Fatalf("trial %d: got %v\nwant %v", trial, rec.Events, want)
		}
		b.Flush()
		if len(rec.Events) != len(want) {
			t.Fatalf("trial %d: a second Flush delivered %d more events", trial, len(rec.Events)-len(want))
		}
	}
}

// BenchmarkFlush merges windows of 8 partitions (events interleaved in
// time, with runs of one partition) to one subscriber: ns per event.
func BenchmarkFlush(b *testing.B) {
	const parts, perPart = 8, 512
	w := sim.NewWorld(sim.Config{}, parts, sim.Nanosecond)
	var n int
	bus := Split(w, Func(func(e Event) { n += int(e.Index) }))
	r := sim.New(sim.Config{Seed: 3}).Rand("bench")
	ats := make([][]sim.Time, parts)
	for p := range ats {
		at := sim.Time(0)
		for range perPart {
			at += sim.Time(r.IntN(8)) * sim.Time(1+r.IntN(4)*r.IntN(2)*16)
			ats[p] = append(ats[p], at)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for p := range parts {
			pb := bus.Part(p)
			for _, at := range ats[p] {
				pb.Emit(Event{At: at, Kind: Hop, Index: uint64(p)})
			}
		}
		bus.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*parts*perPart), "ns/event")
}
