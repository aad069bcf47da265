package check_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// streamHash hashes the events it sees, in order.
type streamHash struct {
	h [32]byte
	n int
}

func (s *streamHash) Observe(e obs.Event) {
	s.h = sha256.Sum256(fmt.Appendf(s.h[:], "%+v", e))
	s.n++
}

// The scenario on a World of one partition per node, on a clean fabric
// and on a faulty one, draws no violation, reads what a lone Sim reads,
// and gives the same checker report and observation stream for every
// worker count.
func TestWorldRuns(t *testing.T) {
	pool := par.NewPool(4)
	defer pool.Close()
	type result struct {
		stream  [32]byte
		events  int
		report  string
		windows [2][]byte
	}
	run := func(t *testing.T, backend string, faults bool, exec sim.Exec) result {
		e := newEnvOn(t, backend, 1, exec)
		if faults {
			if err := e.Machine.Net.SetGlobalFaults(faulty); err != nil {
				t.Fatal(err)
			}
		}
		c, h, d := check.New(), &streamHash{}, &dupCounter{seen: map[[3]uint64]bool{}}
		e.Observe(c, h, d)
		scenario(e)
		if err := e.Run(); err != nil {
			t.Fatal(err)
		}
		c.End(false)
		r := c.Report()
		for _, v := range r.Kept {
			t.Error(v.String())
		}
		if r.Ops < 10 || r.Reads != 7 {
			t.Errorf("checked too little: %+v", r)
		}
		if faults && d.dups+d.dropped == 0 {
			t.Error("a faulty fabric neither dropped nor duplicated a packet")
		}
		out := result{stream: h.h, events: h.n, report: fmt.Sprintf("%+v", r)}
		for i := range out.windows {
			out.windows[i] = append([]byte(nil), e.Win.Region(i).Bytes()...)
		}
		return out
	}
	for _, backend := range []string{"gdaki", "proxy"} {
		for _, faults := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/faults=%v", backend, faults), func(t *testing.T) {
				lone := run(t, backend, faults, nil)
				want := run(t, backend, faults, sim.Serial)
				if !bytes.Equal(lone.windows[0], want.windows[0]) || !bytes.Equal(lone.windows[1], want.windows[1]) {
					t.Error("the windows differ from a lone Sim's")
				}
				got := run(t, backend, faults, pool.Exec)
				if got.stream != want.stream || got.events != want.events || got.report != want.report {
					t.Errorf("4 workers: %d events, report %s; serial: %d events, report %s", got.events, got.report, want.events, want.report)
				}
			})
		}
	}
}
