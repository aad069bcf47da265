package sim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// refEvent is one pending event of the reference queue.
type refEvent struct {
	at  Time
	ord int // scheduling order
	id  EventID
	tag uint64
	// posted: scheduled with Post (no EventID, never cancelled)
	posted bool
}

// refQueue is the dumb reference: a slice searched for the minimum
// (time, scheduling order) on every pop.
type refQueue struct{ ev []refEvent }

func (r *refQueue) popMin() refEvent {
	m := 0
	for i := range r.ev {
		a, b := &r.ev[i], &r.ev[m]
		if a.at < b.at || (a.at == b.at && a.ord < b.ord) {
			m = i
		}
	}
	e := r.ev[m]
	r.ev = append(r.ev[:m], r.ev[m+1:]...)
	return e
}

// diffModel drives a Sim with random schedules and cancellations from inside
// its handlers and checks every firing against refQueue.
type diffModel struct {
	t     *testing.T
	r     *rand.Rand
	ref   refQueue
	ord   int
	tag   uint64
	delay func(r *rand.Rand) Duration
	left  int // events still to schedule
}

func (m *diffModel) schedule(s *Sim) {
	d := m.delay(m.r)
	if s.Now() > MaxTime-Time(d) {
		d = Duration(MaxTime - s.Now())
	}
	m.tag++
	var id EventID
	posted := m.r.IntN(2) == 0 // Post: never cancelled, no slot of its own
	if posted {
		s.Post(s.Now().Add(d), m, m.tag)
	} else {
		id = s.After(d, m, m.tag)
	}
	m.ref.ev = append(m.ref.ev, refEvent{at: s.Now().Add(d), ord: m.ord, id: id, tag: m.tag, posted: posted})
	m.ord++
	m.left--
}

func (m *diffModel) Handle(s *Sim, tag uint64) {
	want := m.ref.popMin()
	if want.tag != tag || want.at != s.Now() {
		m.t.Fatalf("fired tag %d at %v, reference says tag %d at %v", tag, s.Now(), want.tag, want.at)
	}
	// Schedule 0-2 new events and sometimes cancel a random pending one.
	for n := m.r.IntN(3); n > 0 && m.left > 0; n-- {
		m.schedule(s)
	}
	if i := m.r.IntN(max(len(m.ref.ev), 1)); len(m.ref.ev) > 0 && m.r.IntN(4) == 0 && !m.ref.ev[i].posted {
		if err := s.Cancel(m.ref.ev[i].id); err != nil {
			m.t.Fatalf("cancel pending event: %v", err)
		}
		if err := s.Cancel(m.ref.ev[i].id); !errors.Is(err, ErrNotPending) {
			m.t.Fatalf("second cancel: got %v, want ErrNotPending", err)
		}
		m.ref.ev = append(m.ref.ev[:i], m.ref.ev[i+1:]...)
	}
	if s.Pending() != len(m.ref.ev) {
		m.t.Fatalf("Pending() = %d, reference holds %d", s.Pending(), len(m.ref.ev))
	}
}

// TestQueueAgainstReference runs random workloads with many ties,
// cancellations and delay scales from picoseconds to near MaxTime, and
// checks the firing order is exactly (time, scheduling order).
func TestQueueAgainstReference(t *testing.T) {
	delays := map[string]func(r *rand.Rand) Duration{
		"ties":  func(r *rand.Rand) Duration { return Duration(r.IntN(4)) },
		"exp":   func(r *rand.Rand) Duration { return Duration(r.ExpFloat64() * float64(Microsecond)) },
		"mixed": func(r *rand.Rand) Duration { return Duration(r.Int64N(int64(1) << r.IntN(50))) },
		"bimodal": func(r *rand.Rand) Duration {
			if r.IntN(10) == 0 {
				return Millisecond + Duration(r.IntN(3))
			}
			return Duration(r.IntN(2000))
		},
		"huge": func(r *rand.Rand) Duration { return Duration(r.Int64N(int64(MaxTime/4)) * int64(r.IntN(2))) },
	}
	for _, name := range []string{"ties", "exp", "mixed", "bimodal", "huge"} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				s := New(Config{Seed: seed})
				m := &diffModel{t: t, r: NewRand(seed, name), delay: delays[name], left: 6000}
				// Start with a burst large enough to build a calendar.
				for range 500 {
					m.schedule(s)
				}
				if err := s.Run(); err != nil {
					t.Fatal(err)
				}
				if len(m.ref.ev) != 0 || s.Pending() != 0 {
					t.Fatalf("run ended with %d reference events, Pending()=%d", len(m.ref.ev), s.Pending())
				}
			})
		}
	}
}

func TestCancel(t *testing.T) {
	s := New(Config{})
	fired := 0
	f := HandlerFunc(func(*Sim, uint64) { fired++ })
	a := s.Schedule(10, f, 0)
	b := s.Schedule(20, f, 0)
	if err := s.Cancel(a); err != nil {
		t.Fatalf("Cancel pending: %v", err)
	}
	if err := s.Cancel(a); !errors.Is(err, ErrNotPending) {
		t.Fatalf("Cancel twice: got %v, want ErrNotPending", err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if fired != 1 || s.Now() != 20 {
		t.Fatalf("fired %d events, now %v; want 1 at 20ps", fired, s.Now())
	}
	if err := s.Cancel(b); !errors.Is(err, ErrNotPending) {
		t.Fatalf("Cancel fired event: got %v, want ErrNotPending", err)
	}
	// A stale id must not cancel the event that reuses its slot.
	c := s.Schedule(30, f, 0)
	if err := s.Cancel(b); !errors.Is(err, ErrNotPending) {
		t.Fatalf("stale id: got %v, want ErrNotPending", err)
	}
	if err := s.Cancel(EventID(1<<40 | 12345)); !errors.Is(err, ErrNotPending) {
		t.Fatalf("unknown id: got %v, want ErrNotPending", err)
	}
	if s.Pending() != 1 {
		t.Fatalf("Pending() = %d, want 1", s.Pending())
	}
	_ = c
}

func TestScheduleInThePastPanics(t *testing.T) {
	s := New(Config{})
	s.Schedule(100, HandlerFunc(func(s *Sim, _ uint64) {
		defer func() {
			msg := fmt.Sprint(recover())
			for _, want := range []string{"past", "at=50ps", "now=100ps", "arg=0x7"} {
				if !contains(msg, want) {
					t.Errorf("panic %q does not mention %q", msg, want)
				}
			}
		}()
		s.Schedule(50, HandlerFunc(func(*Sim, uint64) {}), 7)
	}), 0)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// bulkEvent is one event of TestQueueBulkSorted.
type bulkEvent struct {
	at  Time
	ord int
	id  EventID
}

// bulkRecorder checks that events fire in the order of a sorted list.
type bulkRecorder struct {
	t    *testing.T
	want []bulkEvent
	next int
}

func (b *bulkRecorder) Handle(s *Sim, ord uint64) {
	if b.next >= len(b.want) {
		b.t.Fatalf("extra event %d at %v", ord, s.Now())
	}
	w := b.want[b.next]
	if uint64(w.ord) != ord || w.at != s.Now() {
		b.t.Fatalf("event #%d: fired %d at %v, sorted reference says %d at %v", b.next, ord, s.Now(), w.ord, w.at)
	}
	b.next++
}

// TestQueueBulkSorted schedules large batches (enough for multi-chunk
// buckets, wide calendars and several rebuilds), between runs that stop at
// random limits, cancels a random fifth, and checks the firing order against
// a stable sort by time of everything scheduled.
func TestQueueBulkSorted(t *testing.T) {
	delays := map[string]func(r *rand.Rand) Duration{
		"burst":   func(r *rand.Rand) Duration { return Duration(r.IntN(2)) * Microsecond },
		"zero":    func(r *rand.Rand) Duration { return Duration(r.IntN(2) * r.IntN(100)) },
		"exp":     func(r *rand.Rand) Duration { return Duration(r.ExpFloat64() * float64(Microsecond)) },
		"mixed":   func(r *rand.Rand) Duration { return Duration(r.Int64N(int64(1) << r.IntN(62))) },
		"farpair": func(r *rand.Rand) Duration { return Duration(r.IntN(2)) * Duration(MaxTime/2) },
		"clumps": func(r *rand.Rand) Duration {
			return Duration(r.IntN(4))*Second + Duration(r.IntN(3))*Nanosecond
		},
	}
	for _, name := range []string{"burst", "zero", "exp", "mixed", "farpair", "clumps"} {
		t.Run(name, func(t *testing.T) {
			r := NewRand(7, name)
			s := New(Config{})
			rec := &bulkRecorder{t: t}
			var pending []bulkEvent
			ord := 0
			for round := range 8 {
				for range 5000 {
					d := delays[name](r)
					if s.Now() > MaxTime-Time(d) {
						d = Duration(MaxTime - s.Now())
					}
					id := s.After(d, rec, uint64(ord))
					pending = append(pending, bulkEvent{at: s.Now().Add(d), ord: ord, id: id})
					ord++
				}
				for i := 0; i < len(pending); i++ {
					if r.IntN(5) == 0 {
						if err := s.Cancel(pending[i].id); err != nil {
							t.Fatalf("cancel: %v", err)
						}
						pending = append(pending[:i], pending[i+1:]...)
						i--
					}
				}
				slices.SortStableFunc(pending, func(a, b bulkEvent) int { return cmp.Compare(a.at, b.at) })
				// Run to a random pending event's time (inclusive), or
				// past everything in the last round.
				limit := MaxTime
				if round < 7 && len(pending) > 0 {
					limit = pending[r.IntN(len(pending))].at
				}
				n := 0
				for n < len(pending) && pending[n].at <= limit {
					n++
				}
				rec.want, rec.next = pending[:n], 0
				if err := s.RunUntil(limit); err != nil {
					t.Fatal(err)
				}
				if rec.next != n {
					t.Fatalf("round %d: fired %d events up to %v, want %d", round, rec.next, limit, n)
				}
				pending = slices.Clone(pending[n:])
				if s.Pending() != len(pending) {
					t.Fatalf("Pending() = %d, want %d", s.Pending(), len(pending))
				}
			}
			if len(pending) != 0 {
				t.Fatalf("%d events left", len(pending))
			}
		})
	}
}

// TestCancelReservedSlot checks that a forged EventID naming the slot of
// process wake-ups cancels nothing.
func TestCancelReservedSlot(t *testing.T) {
	s := New(Config{})
	woke := false
	s.Spawn("sleeper", func(p *Proc) {
		p.Sleep(Microsecond)
		woke = true
	})
	for _, id := range []EventID{0, 1 << 32, 3 << 32} {
		if err := s.Cancel(id); !errors.Is(err, ErrNotPending) {
			t.Fatalf("Cancel(%#x) = %v, want ErrNotPending", uint64(id), err)
		}
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if !woke || s.Now() != Time(Microsecond) {
		t.Fatalf("woke=%v at %v, want true at 1us", woke, s.Now())
	}
}

// TestQueueSparseExtremes schedules a few events at extreme times, where the
// calendar's buckets are as wide as they get, and checks the firing order.
func TestQueueSparseExtremes(t *testing.T) {
	for _, times := range [][]Time{
		{0, MaxTime / 2},
		{MaxTime, 0, MaxTime},
		{1, MaxTime - 1, MaxTime / 4, 2},
		{MaxTime / 2, MaxTime / 2, MaxTime/2 + 1, MaxTime},
		{Time(Second), 0, MaxTime, Time(Second), 3},
	} {
		s := New(Config{})
		rec := &bulkRecorder{t: t}
		var want []bulkEvent
		for i, at := range times {
			s.Schedule(at, rec, uint64(i))
			want = append(want, bulkEvent{at: at, ord: i})
		}
		slices.SortStableFunc(want, func(a, b bulkEvent) int { return cmp.Compare(a.at, b.at) })
		rec.want = want
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if rec.next != len(want) {
			t.Fatalf("times %v: fired %d events, want %d", times, rec.next, len(want))
		}
	}
}

// selectKth finds the element a sort would put at each index, on inputs
// with duplicates, runs and random values.
func TestSelectKth(t *testing.T) {
	r := NewRand(7, "select")
	for _, n := range []int{1, 2, 3, 15, 16, 17, 100, 1000} {
		for _, kind := range []string{"random", "few", "sorted", "reversed", "equal"} {
			a := make([]uint64, n)
			for i := range a {
				switch kind {
				case "random":
					a[i] = r.Uint64()
				case "few":
					a[i] = r.Uint64() % 3
				case "sorted":
					a[i] = uint64(i)
				case "reversed":
					a[i] = uint64(n - i)
				case "equal":
					a[i] = 42
				}
			}
			want := slices.Clone(a)
			slices.Sort(want)
			for _, i := range []int{0, n / 3, n / 2, n - 1} {
				b := slices.Clone(a)
				if got := selectKth(b, i); got != want[i] {
					t.Fatalf("%s n=%d: element %d is %d, want %d", kind, n, i, got, want[i])
				}
			}
		}
	}
}

// timerModel is a network-like load: hot events that reschedule themselves
// nanoseconds ahead, beside timers that fire seconds ahead and re-arm.
type timerModel struct {
	r       *rand.Rand
	left    int
	maxNear int
	q       *queue
}

func (m *timerModel) Handle(s *Sim, arg uint64) {
	m.maxNear = max(m.maxNear, len(m.q.near))
	if m.left == 0 {
		return
	}
	m.left--
	if arg == 1 {
		s.Post(s.Now().Add(Second), m, 1) // a timer re-arms
		return
	}
	s.Post(s.Now().Add(Duration(1+m.r.IntN(100))*Nanosecond), m, 0)
}

// The calendar's buckets are sized by the events that fire next, not by
// far-future timers: with 4 000 hot events nanoseconds apart beside 4 000
// timers a second out, the near heap (events scheduled into the current
// bucket's span) stays small. Sized by the mean distance, the buckets
// were as wide as the whole hot horizon and it held every hot event.
func TestFarTimersDoNotWidenBuckets(t *testing.T) {
	s := New(Config{})
	m := &timerModel{r: NewRand(1, "timers"), left: 400_000, q: &s.q}
	for i := range 4000 {
		s.Post(Time(i), m, 0)
		s.Post(Time(Second)+Time(i), m, 1)
	}
	require.NoError(t, s.RunUntil(Time(Second/2)))
	require.Less(t, m.maxNear, 256, "near heap peak")
}

// refHeap is a faster reference for large queues: a min-heap of (time,
// scheduling order), with cancelled events skipped when they come up.
type refHeap []refEvent

func (h refHeap) Len() int { return len(h) }
func (h refHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].ord < h[j].ord)
}
func (h refHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *refHeap) Push(x any)   { *h = append(*h, x.(refEvent)) }
func (h *refHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// bigModel is diffModel for tens of thousands of pending events, enough
// for coarse buckets spread into the fine rung: every event schedules one
// or two more or none, posted or cancellable, and sometimes cancels a
// random pending one.
type bigModel struct {
	t     *testing.T
	r     *rand.Rand
	ref   refHeap
	dead  map[int]bool // fired or cancelled, by scheduling order
	picks []refEvent   // cancellable events, some of them dead
	live  int
	ord   int
	delay func(r *rand.Rand) Duration
	left  int
}

func (m *bigModel) schedule(s *Sim) {
	d := m.delay(m.r)
	at := s.Now().Add(d)
	e := refEvent{at: at, ord: m.ord, tag: uint64(m.ord), posted: m.r.IntN(2) == 0}
	if e.posted {
		s.Post(at, m, e.tag)
	} else {
		e.id = s.Schedule(at, m, e.tag)
		m.picks = append(m.picks, e)
	}
	heap.Push(&m.ref, e)
	m.ord++
	m.live++
	m.left--
}

func (m *bigModel) Handle(s *Sim, tag uint64) {
	var want refEvent
	for {
		want = heap.Pop(&m.ref).(refEvent)
		if !m.dead[want.ord] {
			break
		}
	}
	if want.tag != tag || want.at != s.Now() {
		m.t.Fatalf("fired tag %d at %v, reference says tag %d at %v", tag, s.Now(), want.tag, want.at)
	}
	m.dead[want.ord] = true
	m.live--
	for n := m.r.IntN(3); n > 0 && m.left > 0; n-- {
		m.schedule(s)
	}
	if len(m.picks) > 0 && m.r.IntN(8) == 0 {
		i := m.r.IntN(len(m.picks))
		p := m.picks[i]
		m.picks[i] = m.picks[len(m.picks)-1]
		m.picks = m.picks[:len(m.picks)-1]
		err := s.Cancel(p.id)
		switch {
		case m.dead[p.ord] && !errors.Is(err, ErrNotPending):
			m.t.Fatalf("cancel of a fired event: got %v, want ErrNotPending", err)
		case !m.dead[p.ord] && err != nil:
			m.t.Fatalf("cancel pending event: %v", err)
		case !m.dead[p.ord]:
			m.dead[p.ord] = true
			m.live--
		}
	}
	if s.Pending() != m.live {
		m.t.Fatalf("Pending() = %d, reference holds %d", s.Pending(), m.live)
	}
}

// TestQueueLargeAgainstReference is TestQueueAgainstReference at 20 000
// pending events and more, where the calendar's buckets are coarse and
// spread into the fine rung, with events scheduled from handlers into
// every tier.
func TestQueueLargeAgainstReference(t *testing.T) {
	delays := map[string]func(r *rand.Rand) Duration{
		"exp":  func(r *rand.Rand) Duration { return Duration(r.ExpFloat64() * float64(Microsecond)) },
		"ties": func(r *rand.Rand) Duration { return Duration(r.IntN(4)) * Duration(r.IntN(2)) },
		"short": func(r *rand.Rand) Duration {
			if r.IntN(4) == 0 {
				return Duration(r.IntN(100))
			}
			return Duration(r.ExpFloat64() * float64(Microsecond))
		},
		"bimodal": func(r *rand.Rand) Duration {
			if r.IntN(10) == 0 {
				return Millisecond + Duration(r.IntN(3))
			}
			return Duration(r.IntN(20000))
		},
	}
	for _, name := range []string{"exp", "ties", "short", "bimodal"} {
		t.Run(name, func(t *testing.T) {
			s := New(Config{Seed: 1})
			m := &bigModel{t: t, r: NewRand(1, name), dead: map[int]bool{}, delay: delays[name], left: 120_000}
			for range 20_000 {
				m.schedule(s)
			}
			if err := s.Run(); err != nil {
				t.Fatal(err)
			}
			if m.live != 0 || s.Pending() != 0 {
				t.Fatalf("run ended with %d reference events, Pending()=%d", m.live, s.Pending())
			}
		})
	}
}
