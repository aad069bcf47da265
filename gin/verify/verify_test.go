package verify

import (
	"testing"
)

// Every test of the suite passes on every backend and version of the
// unmutated model, under a few explored schedules.
func TestSuitePasses(t *testing.T) {
	rep := NewRunner(Options{Schedules: 5}).Run()
	for _, r := range rep.Tests {
		t.Log(r.String())
		if !r.Passed {
			t.Errorf("%s", r.String())
		}
	}
	if rep.Passed == 0 {
		t.Fatal("no test ran")
	}
}

// Every mutant is caught: some test of the suite fails with it on.
func TestMutantsCaught(t *testing.T) {
	for _, m := range Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			rep := NewRunner(Options{Schedules: 5, Mutant: &m}).Run()
			var caught []string
			for _, r := range rep.Tests {
				if !r.Passed {
					caught = append(caught, r.Name+"/"+r.Backend+"/"+r.NCCL)
				}
			}
			t.Logf("%s caught by %d: %v", m.Name, len(caught), caught)
			if len(caught) == 0 {
				t.Errorf("mutant %s (%s) survived %d tests", m.Name, m.Breaks, len(rep.Tests))
			}
		})
	}
}

// TestMutantCaughtBy pins the litmus test that owns a spec row to a
// mutant that breaks that row: the test fails on every backend and
// version it runs with the mutant on (TestMutantsCaught only asks that
// some test fail). 2.4.5 (put after a store) had no such mutant.
func TestMutantCaughtBy(t *testing.T) {
	for _, c := range []struct{ mutant, test string }{
		{"gpu-store-undrained", "put-after-store"},
		{"wait-no-rolling", "wait-rolling-wrap"},
		{"putvalue-wide", "put-value-size"},
		{"lsa-barrier-no-fence", "lsa-barrier-release"},
	} {
		t.Run(c.mutant, func(t *testing.T) {
			m, ok := MutantByName(c.mutant)
			if !ok {
				t.Fatalf("no mutant %s", c.mutant)
			}
			rep := NewRunner(Options{Schedules: 5, Mutant: &m, Tests: []string{c.test}}).Run()
			if len(rep.Tests) == 0 {
				t.Fatalf("test %s did not run", c.test)
			}
			for _, r := range rep.Tests {
				if r.Passed {
					t.Errorf("%s survived %s on %s %s", c.mutant, c.test, r.Backend, r.NCCL)
				}
			}
		})
	}
}
