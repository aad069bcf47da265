package sim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomModel is a small model with several random streams: each node
// forwards a token to a random peer after a random delay.
type randomModel struct {
	rs []*rand.Rand
}

func (m *randomModel) Handle(s *Sim, node uint64) {
	r := m.rs[node]
	if s.Fired() < 2000 {
		s.After(Duration(r.IntN(1000)), m, uint64(r.IntN(len(m.rs))))
	}
}

func (m *randomModel) EventName(node uint64) string { return fmt.Sprintf("node%d", node) }

// traceHash runs randomModel with seed and returns the hash of its event trace.
func traceHash(t *testing.T, seed uint64) string {
	t.Helper()
	s := New(Config{Seed: seed})
	m := &randomModel{}
	for i := range 8 {
		m.rs = append(m.rs, s.Rand(fmt.Sprintf("node/%d", i)))
	}
	h := sha256.New()
	s.SetTracer(func(r Record) { fmt.Fprintln(h, r) })
	for i := range 4 {
		s.Schedule(0, m, uint64(i))
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestDeterminism(t *testing.T) {
	a, b := traceHash(t, 42), traceHash(t, 42)
	if a != b {
		t.Fatalf("same seed, different traces: %s vs %s", a, b)
	}
	if c := traceHash(t, 43); c == a {
		t.Fatalf("seeds 42 and 43 gave the same trace %s", a)
	}
}

func TestRandStreamsIndependentOfCreationOrder(t *testing.T) {
	s1, s2 := New(Config{Seed: 7}), New(Config{Seed: 7})
	a1, b1 := s1.Rand("a"), s1.Rand("b")
	b2, a2 := s2.Rand("b"), s2.Rand("a")
	for range 100 {
		if a1.Uint64() != a2.Uint64() || b1.Uint64() != b2.Uint64() {
			t.Fatal("a stream depends on the order streams were created")
		}
	}
	x, y := NewRand(7, "a"), NewRand(7, "b")
	same := 0
	for range 100 {
		if x.Uint64() == y.Uint64() {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("streams a and b agree on %d of 100 draws", same)
	}
	if NewRand(8, "a").Uint64() == NewRand(7, "a").Uint64() {
		t.Fatal("the seed does not change the stream")
	}
}

func TestTxTime(t *testing.T) {
	for _, tc := range []struct {
		r    BitRate
		n    Bytes
		want Duration
	}{
		{400 * Gbps, 64, 1280},
		{400 * Gbps, 4096, 81920},
		{100 * Gbps, 1, 80},
		{3 * BitPerSecond, 1, 2666666666667}, // 8/3 s rounded up
		{200 * Gbps, 0, 0},
		{GBps(50), 1, 20},
		{Gbps, Bytes(1) << 40, Duration(8796093022208000)},
	} {
		if got := tc.r.TxTime(tc.n); got != tc.want {
			t.Errorf("%v.TxTime(%d) = %d ps, want %d ps", tc.r, tc.n, int64(got), int64(tc.want))
		}
	}
	// Sum property: splitting a transfer costs at most 1ps per extra piece.
	r := NewRand(1, "txtime")
	for range 1000 {
		rate := BitRate(1 + r.Int64N(int64(800*Gbps)))
		a, b := Bytes(r.Int64N(1<<20)), Bytes(r.Int64N(1<<20))
		whole, parts := rate.TxTime(a+b), rate.TxTime(a)+rate.TxTime(b)
		if parts < whole || parts > whole+1 {
			t.Fatalf("rate %d: TxTime(%d)+TxTime(%d)=%d, TxTime(sum)=%d", rate, a, b, parts, whole)
		}
	}
}

func TestTxTimeBadRatePanics(t *testing.T) {
	for _, r := range []BitRate{0, -5} {
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "non-positive rate") {
					t.Errorf("rate %d: panic %q, want a message about the rate", r, msg)
				}
			}()
			r.TxTime(64)
		}()
	}
}

// spinner reschedules itself at the same instant forever.
type spinner struct{}

func (spinner) Handle(s *Sim, arg uint64) { s.After(0, spinner{}, arg+1) }

func (spinner) EventName(arg uint64) string { return fmt.Sprintf("spinner#%d", arg) }

func TestWatchdogStall(t *testing.T) {
	s := New(Config{StallLimit: 1000})
	s.Schedule(5*Time(Nanosecond), spinner{}, 0)
	err := s.Run()
	var we *WatchdogError
	if !errors.As(err, &we) {
		t.Fatalf("got %v, want *WatchdogError", err)
	}
	if !strings.Contains(we.Reason, "time stopped advancing") || we.At != 5*Time(Nanosecond) {
		t.Fatalf("reason %q at %v", we.Reason, we.At)
	}
	if len(we.Last) != historyLen || we.Last[len(we.Last)-1].Arg != we.Fired-1 {
		t.Fatalf("last events %v, fired %d", we.Last, we.Fired)
	}
	if !strings.Contains(err.Error(), "spinner#") {
		t.Fatalf("error does not name the last events: %v", err)
	}
}

func TestWatchdogBudget(t *testing.T) {
	s := New(Config{EventBudget: 100})
	var tick HandlerFunc
	tick = func(s *Sim, arg uint64) { s.After(Nanosecond, tick, arg+1) }
	s.Schedule(0, tick, 0)
	err := s.Run()
	var we *WatchdogError
	if !errors.As(err, &we) || !strings.Contains(we.Reason, "budget") || we.Fired != 100 {
		t.Fatalf("got %v, want a budget *WatchdogError after 100 events", err)
	}
	if got := we.Last[len(we.Last)-1]; got.Arg != 99 || got.At != 99*Time(Nanosecond) {
		t.Fatalf("last event %v, want arg 99 at 99ns", got)
	}
	// A run that ends exactly on its budget is not a watchdog error.
	s2 := New(Config{EventBudget: 3})
	for i := range 3 {
		s2.Schedule(Time(i), HandlerFunc(func(*Sim, uint64) {}), 0)
	}
	if err := s2.Run(); err != nil {
		t.Fatalf("run within budget: %v", err)
	}
}

func TestRunUntilAndStop(t *testing.T) {
	s := New(Config{})
	var got []Time
	rec := HandlerFunc(func(s *Sim, _ uint64) { got = append(got, s.Now()) })
	for _, at := range []Time{30, 10, 20, 40} {
		s.Schedule(at, rec, 0)
	}
	if err := s.RunUntil(25); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[10ps 20ps]" || s.Now() != 25 {
		t.Fatalf("fired %v, now %v", got, s.Now())
	}
	s.Schedule(35, HandlerFunc(func(s *Sim, _ uint64) { s.Fail(errors.New("boom")) }), 0)
	if err := s.Run(); err == nil || err.Error() != "boom" {
		t.Fatalf("Run = %v, want boom", err)
	}
	if s.Now() != 35 || s.Pending() != 1 {
		t.Fatalf("stopped at %v with %d pending", s.Now(), s.Pending())
	}
}
