package check_test

import (
	"testing"

	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// put feeds c the events of a complete 64-byte put (no signal) from rank
// 0 to offset off of rank 1's region "buf/r1" at time at.
func put(c *check.Checker, id obs.OpID, off uint64, at sim.Time) {
	for _, e := range []obs.Event{
		{Kind: obs.Issued, At: at, Op: id, Who: "n0g0/k", Where: "put", Index: 0, Value: 1, Bytes: 64},
		{Kind: obs.Posted, At: at, Op: id, Where: "gdaki/r0/c0/p1"},
		{Kind: obs.Landed, At: at + 1, Op: id, Where: "buf/r1", Addr: off, Bytes: 64},
		{Kind: obs.CQE, At: at + 2, Op: id},
	} {
		c.Observe(e)
	}
}

func read(c *check.Checker, off uint64, at sim.Time) {
	c.Observe(obs.Event{Kind: obs.Read, At: at, Who: "n1g0/r", Where: "buf/r1", Note: "window", Addr: off, Bytes: 64, Index: 1})
}

// TestBoundedState: retired ops are dropped, a region keeps at most
// MaxSpans uncovered landings (older ones are counted, not judged), a put
// to the same bytes replaces the landing it overwrote, and the newest
// landings are still judged.
func TestBoundedState(t *testing.T) {
	c := check.New()
	const n = check.MaxSpans + 100
	for i := range n {
		put(c, obs.OpID(i+1), 64*uint64(i), sim.Time(10*i))
	}
	put(c, n+1, 64*(n-1), 10*n) // overwrites op n's bytes
	r := c.Report()
	if r.Live != 0 || r.Spans != check.MaxSpans || r.Untracked != n-check.MaxSpans || r.Ops != n+1 {
		t.Fatalf("state after %d puts: %+v", n+1, r)
	}
	read(c, 0, 20*n) // op 1's landing was dropped: not judged
	if c.Count(check.Race) != 0 {
		t.Fatalf("a dropped landing was judged: %v", c.Report().Kept)
	}
	read(c, 64*(n-1), 20*n)
	r = c.Report()
	if c.Count(check.Race) != 1 || r.Kept[0].Op != n+1 {
		t.Fatalf("the read of the last put: %+v", r.Kept)
	}
	c.End(false)
	if c.Report().Violations != 1 {
		t.Fatalf("End found more: %v", c.Report().Kept)
	}
}

// TestKindNames: every kind has a name of its own.
func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := range check.NumKinds {
		s := k.String()
		if s == "" || seen[s] {
			t.Errorf("kind %d: name %q", k, s)
		}
		seen[s] = true
	}
	if check.NumKinds.String() != "kind(9)" {
		t.Errorf("out of range: %q", check.NumKinds.String())
	}
}

// TestBarrierCovers: a GIN barrier with the Put fence covers the puts
// that landed at the rank on its contexts before it returned; one with
// only the Get fence, or on another context, does not (hand-built
// streams: the Put fence signals self, which panics in runs today).
func TestBarrierCovers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fence       uint32
		ctx, all    uint64
		dom         uint64
		race        int64
		readsBefore bool
	}{
		{"put fence", 1, 0, 0, 0, 0, false},
		{"put fence, all contexts", 1, 1, 1, 0, 0, false},
		{"get fence only", 2, 0, 0, 0, 1, false},
		{"put fence on another context", 1, 1, 0, 0, 1, false},
		{"put fence of another communicator", 1, 0, 0, 1, 1, false},
		{"read before the barrier", 1, 0, 0, 0, 1, true},
	} {
		c := check.New()
		put(c, 1, 0, 0)
		if tc.readsBefore {
			read(c, 0, 50)
		}
		c.Observe(obs.Event{Kind: obs.Completed, At: 100, Who: "n1g0/r", Note: "barrier", Code: tc.fence, Value: tc.all,
			Index: 1, QP: uint32(tc.ctx), Addr: tc.dom})
		if !tc.readsBefore {
			read(c, 0, 200)
		}
		c.End(false)
		if c.Count(check.Race) != tc.race || int64(c.Report().Violations) != tc.race {
			t.Errorf("%s: %v", tc.name, c.Report().Kept)
		}
	}
}

// TestDrained: when a run deadlocks (nothing left in flight), an op whose
// CQE said success but whose bytes never landed is lost; an op still
// without a CQE, or completed in error, is stuck, not lost; a complete
// op is neither. Cut judges none of them.
func TestDrained(t *testing.T) {
	feed := func(c *check.Checker) {
		put(c, 1, 0, 10) // complete
		for id, code := range map[obs.OpID]uint32{2: 0, 3: 5} {
			c.Observe(obs.Event{Kind: obs.Issued, At: 20, Op: id, Who: "n0g0/k", Where: "put", Index: 0, Value: 1, Bytes: 64})
			c.Observe(obs.Event{Kind: obs.Posted, At: 20, Op: id, Where: "gdaki/r0/c0/p1"})
			c.Observe(obs.Event{Kind: obs.CQE, At: 30, Op: id, Code: code}) // 2: success, 3: error
		}
		c.Observe(obs.Event{Kind: obs.Issued, At: 40, Op: 4, Who: "n0g0/k", Where: "put", Index: 0, Value: 1, Bytes: 64})
	}
	c := check.New()
	feed(c)
	c.Drained()
	r := c.Report()
	if r.Violations != 1 || r.Kept[0].Kind != check.Lost || r.Kept[0].Op != 2 || r.Live != 3 {
		t.Fatalf("drained: %+v", r)
	}
	c = check.New()
	feed(c)
	c.Cut()
	if r := c.Report(); r.Violations != 0 || r.Live != 3 {
		t.Fatalf("cut: %+v", r)
	}
}
