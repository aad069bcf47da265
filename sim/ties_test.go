package sim

import (
	"fmt"
	"slices"
	"testing"
)

// recorder is a handler that appends "name:arg" to a shared log.
type recorder struct {
	name string
	log  *[]string
}

func (r *recorder) Handle(_ *Sim, arg uint64) {
	*r.log = append(*r.log, fmt.Sprintf("%s:%d", r.name, arg))
}

// tieOrder schedules, at one instant, two events to each of four handlers
// (interleaved a0 b0 c0 d0 a1 b1 c1 d1), plus one later event, runs them
// under c and returns the firing order.
func tieOrder(t *testing.T, c Chooser, order TieOrder) []string {
	t.Helper()
	s := New(Config{})
	var log []string
	hs := []*recorder{{"a", &log}, {"b", &log}, {"c", &log}, {"d", &log}}
	s.Schedule(20, hs[0], 9)
	for i := range 2 {
		for _, h := range hs {
			s.Schedule(10, h, uint64(i))
		}
	}
	s.SetTies(c, order)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 0 || len(log) != 9 {
		t.Fatalf("fired %v, %d pending", log, s.Pending())
	}
	if log[8] != "a:9" {
		t.Fatalf("the later event did not fire last: %v", log)
	}
	return log
}

var fifo = []string{"a:0", "b:0", "c:0", "d:0", "a:1", "b:1", "c:1", "d:1", "a:9"}

func TestTiesOffIsFIFO(t *testing.T) {
	if got := tieOrder(t, nil, PerHandler); !slices.Equal(got, fifo) {
		t.Fatalf("order %v, want %v", got, fifo)
	}
}

// The same seed gives the same order; some seeds swap events of different
// handlers; PerHandler never swaps two events of one handler.
func TestTiesSeeded(t *testing.T) {
	changed := 0
	for seed := range uint64(20) {
		a := tieOrder(t, SeededTies(seed), PerHandler)
		b := tieOrder(t, SeededTies(seed), PerHandler)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
		if !slices.Equal(a, fifo) {
			changed++
		}
		for _, h := range []string{"a", "b", "c", "d"} {
			if slices.Index(a, h+":1") < slices.Index(a, h+":0") {
				t.Fatalf("seed %d: %s's events swapped under PerHandler: %v", seed, h, a)
			}
		}
	}
	if changed == 0 {
		t.Fatal("no seed changed the order of equal-time events")
	}
}

func TestTiesAnyOrderSwapsOneHandler(t *testing.T) {
	for seed := range uint64(50) {
		a := tieOrder(t, SeededTies(seed), AnyOrder)
		if slices.Index(a, "a:1") < slices.Index(a, "a:0") {
			return
		}
	}
	t.Fatal("AnyOrder never put a handler's second event first")
}

// pick is a Chooser that always returns the last index and counts calls.
type pick struct{ calls []int }

func (p *pick) Choose(n int) int { p.calls = append(p.calls, n); return n - 1 }

// The chooser is asked only where there is a choice, and events that a
// fired event schedules at the same instant join the choice.
func TestTiesChoices(t *testing.T) {
	s := New(Config{})
	var log []string
	a, b, c := &recorder{"a", &log}, &recorder{"b", &log}, &recorder{"c", &log}
	s.Schedule(5, a, 0)
	s.Schedule(5, HandlerFunc(func(s *Sim, _ uint64) {
		log = append(log, "f")
		s.Schedule(5, c, 0)
	}), 0)
	s.Schedule(5, b, 0)
	p := &pick{}
	s.SetTies(p, PerHandler)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	// Choices: {a, f, b}: b, the last, fires first; then {a, f}: f,
	// which adds c; then {a, c}: c; then a alone, with no choice.
	want := []string{"b:0", "f", "c:0", "a:0"}
	if !slices.Equal(log, want) {
		t.Fatalf("order %v, want %v", log, want)
	}
	if !slices.Equal(p.calls, []int{3, 2, 2}) {
		t.Fatalf("choices offered %v, want [3 2 2]", p.calls)
	}
}

func TestTiesCancelWaiting(t *testing.T) {
	s := New(Config{})
	var log []string
	a, b := &recorder{"a", &log}, &recorder{"b", &log}
	var ib EventID
	s.Schedule(5, HandlerFunc(func(s *Sim, _ uint64) {
		if err := s.Cancel(ib); err != nil {
			t.Error(err)
		}
	}), 0)
	ib = s.Schedule(5, b, 0)
	s.Schedule(5, a, 0)
	// FIFO order, but through the perturbed path: the cancel fires while
	// b waits in the pool.
	s.SetTies(first{}, PerHandler)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(log, []string{"a:0"}) || s.Pending() != 0 {
		t.Fatalf("fired %v, %d pending; want only a", log, s.Pending())
	}
}

type first struct{}

func (first) Choose(int) int { return 0 }
