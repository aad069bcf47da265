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
