package verify

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin"
)

// Every schedule a replay command prints reads back as itself.
func TestScheduleRoundTrip(t *testing.T) {
	scheds := []Schedule{
		{Seed: 1},
		{Seed: 7, Faults: "loss", Stall: 8, Poll: 3, Ties: 42},
		{Seed: 1, Choices: []int{0, 2, 0, 1}},
		{Seed: 3, Ties: 5, AnyOrder: true},
	}
	for i := range 12 {
		scheds = append(scheds, Explore(i))
	}
	for _, s := range scheds {
		got, err := ParseSchedule(s.String())
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		if got.String() != s.String() || !reflect.DeepEqual(got.Choices, s.Choices) || got.Ties != s.Ties || got.AnyOrder != s.AnyOrder {
			t.Errorf("%q read back as %+v", s.String(), got)
		}
	}
	for _, bad := range []string{"seed=1,ties=x", "seed=1,choices=1.-2", "seed=1,order=fifo", "seed=1,ties=2,choices=1"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A synthetic run whose choice points depend on the choices so far: the
// i-th point offers 2 + (sum of earlier picks + i) % 2 events, up to depth
// points.
func fakeRun(c *choiceLog, depth int) {
	sum := 0
	for i := range depth {
		p := c.Choose(2 + (sum+i)%2)
		sum += p
	}
}

// countOrders counts the choice sequences of fakeRun with at most k
// non-zero picks, by brute force.
func countOrders(prefix []int, depth, k int) int {
	if len(prefix) == depth {
		return 1
	}
	sum, dev := 0, 0
	for _, p := range prefix {
		sum += p
		if p != 0 {
			dev++
		}
	}
	n, total := 2+(sum+len(prefix))%2, 0
	for p := range n {
		if p == 0 || dev < k {
			total += countOrders(append(slices.Clone(prefix), p), depth, k)
		}
	}
	return total
}

// The enumeration visits every order within the bound exactly once.
func TestExhaustiveVisitsEveryOrderOnce(t *testing.T) {
	for _, k := range []int{1, 2, 3} {
		sc := &scheduler{exh: true, bound: k, max: 1 << 20, prefix: []int{}, outcomes: map[string]bool{}}
		seen := map[string]bool{}
		for {
			s, ok := sc.next()
			if !ok {
				break
			}
			c, _ := s.chooser()
			fakeRun(c, 6)
			key := fmt.Sprint(c.picks)
			if seen[key] {
				t.Fatalf("k=%d: order %s visited twice", k, key)
			}
			seen[key] = true
			sc.done(&Outcome{choices: c})
		}
		if want := countOrders(nil, 6, k); len(seen) != want || !sc.exhausted() {
			t.Errorf("k=%d: visited %d orders (exhausted %t), want %d", k, len(seen), sc.exhausted(), want)
		}
	}
}

// On a real test, the exhaustive enumeration runs more than one order,
// finishes, and every order it ran passes; a larger bound runs more.
func TestExhaustiveSuite(t *testing.T) {
	run := func(k int) Result {
		rep := NewRunner(Options{Exhaustive: k, Tests: []string{"loopback-put-signal"}, Backends: []string{"gdaki"},
			Versions: []gin.Version{gin.V2_30}}).Run()
		if len(rep.Tests) != 1 {
			t.Fatalf("%d results", len(rep.Tests))
		}
		r := rep.Tests[0]
		t.Log(r.String())
		if !r.Passed || !r.Exhausted || r.Outcomes < 1 || r.Schedules < 2 {
			t.Fatalf("k=%d: %s", k, r.String())
		}
		return r
	}
	a, b := run(1), run(2)
	if b.Schedules <= a.Schedules {
		t.Errorf("bound 2 ran %d schedules, bound 1 %d", b.Schedules, a.Schedules)
	}
}

// A seeded tie order actually reorders events in a real run, and the same
// seed reorders them the same way.
func TestTiesReorderRealRun(t *testing.T) {
	r := NewRunner(Options{})
	test := Suite()[0]
	for _, tt := range Suite() {
		if tt.Name == "barrier-all-contexts" {
			test = tt
		}
	}
	f := test.Program(test.Versions[0], "proxy")
	picks := func(seed uint64) string {
		o := r.exec(&test, f, "proxy", test.Versions[0], Schedule{Seed: 1, Ties: seed})
		if o.Err != nil || o.choices == nil {
			t.Fatalf("ties=%d: %v", seed, o.Err)
		}
		return fmt.Sprint(o.choices.picks)
	}
	moved := false
	for seed := uint64(1); seed <= 5; seed++ {
		a := picks(seed)
		if a != picks(seed) {
			t.Fatalf("ties=%d is not deterministic", seed)
		}
		moved = moved || strings.ContainsAny(strings.Trim(a, "[]"), "123456789")
	}
	if !moved {
		t.Fatal("no seed took an event other than the first")
	}
}

// Shrinking removes the tie order, then single departures from the
// scheduling order, then the any-order switch.
func TestSimplerChoices(t *testing.T) {
	s := Schedule{Seed: 1, Choices: []int{0, 2, 1}, AnyOrder: true}
	var got []string
	for _, c := range s.simpler() {
		got = append(got, c.String())
	}
	want := []string{"seed=1,order=any", "seed=1,choices=0.0.1,order=any", "seed=1,choices=0.2,order=any", "seed=1,choices=0.2.1"}
	if !slices.Equal(got, want) {
		t.Fatalf("simpler %q, want %q", got, want)
	}
}
