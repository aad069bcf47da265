package check_test

import (
	"slices"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim/obs"
)

// record runs prog on a fresh two-rank env of backend and returns the
// observer stream.
func record(t *testing.T, backend string, prog func(e *bench.Env)) []obs.Event {
	t.Helper()
	e := newEnv(t, backend, 1)
	rec := &obs.Recorder{}
	e.Observe(rec)
	prog(e)
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	return rec.Events
}

// replay feeds events to a new checker and ends it.
func replay(events []obs.Event, failed bool) *check.Checker {
	c := check.New()
	for _, e := range events {
		c.Observe(e)
	}
	c.End(failed)
	return c
}

// find returns the index of the first event of kind k of op (op 0: any
// op) that match accepts.
func find(t *testing.T, ev []obs.Event, k obs.Kind, op obs.OpID, match func(obs.Event) bool) int {
	t.Helper()
	for i, e := range ev {
		if e.Kind == k && (op == 0 || e.Op == op) && (match == nil || match(e)) {
			return i
		}
	}
	t.Fatalf("no %v event of op %d in the stream", k, op)
	return -1
}

// move returns ev with the event at i moved to just before j (i > j).
func move(ev []obs.Event, i, j int) []obs.Event {
	out := slices.Clone(ev)
	e := out[i]
	out = slices.Delete(out, i, i+1)
	return slices.Insert(out, j, e)
}

// putSignalRead: rank 0 puts 8 KiB with a signal; rank 1 waits and reads.
func putSignalRead(e *bench.Env) {
	e.Ranks[0].GPU.Launch("s", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 8192, gin.SignalInc{Signal: 0}, nil)
		g.Flush()
	})
	e.Ranks[1].GPU.Launch("r", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 1, 0)
		g.WaitSignal(0, 1, 64)
		g.ReadWindow(e.Win, 0, make([]byte, 8192))
	})
}

// putThenSignal: rank 0 puts on context ctx, then signals on context 0
// (strong); rank 1 waits.
func putThenSignal(ctx int) func(e *bench.Env) {
	return func(e *bench.Env) {
		e.Ranks[0].GPU.Launch("s", 1, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, ctx)
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 4096, nil, nil)
			e.Dev.Gin(tg, 0, 0).Signal(e.Dev.World(0), 1, gin.SignalInc{Signal: 0})
		})
		e.Ranks[1].GPU.Launch("r", 1, func(tg *gpu.Group) { e.Dev.Gin(tg, 1, 0).WaitSignal(0, 1, 64) })
	}
}

// putCounter: rank 0 puts with a counter and waits for it.
func putCounter(e *bench.Env) {
	e.Ranks[0].GPU.Launch("s", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 4096, nil, gin.CounterInc{Counter: 0})
		g.WaitCounter(0, 1, 56)
	})
}

func isWindowRead(e obs.Event) bool { return e.Note == "window" }
func isFlush(e obs.Event) bool      { return e.Note == "flush" }

// TestMutatedStreams: each recorded stream is clean; each mutation that
// breaks one promise of the spec is flagged with its kind and the right
// ops, and one that breaks nothing the spec promises is not.
func TestMutatedStreams(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		ps := record(t, backend, putSignalRead)
		sameCtx := record(t, backend, putThenSignal(0))
		otherCtx := record(t, backend, putThenSignal(1))
		ctr := record(t, backend, putCounter)
		for name, ev := range map[string][]obs.Event{"put+signal": ps, "put then signal": sameCtx, "across contexts": otherCtx, "counter": ctr} {
			if err := replay(ev, false).Err(); err != nil {
				t.Fatalf("%s: the clean %s stream: %v", backend, name, err)
			}
		}
		landed := find(t, ps, obs.Landed, 1, nil)
		atomic := find(t, ps, obs.Atomic, 1, nil)
		seen := find(t, ps, obs.SignalSeen, 1, nil)
		read := find(t, ps, obs.Read, 0, isWindowRead)
		cases := []struct {
			name   string
			ev     []obs.Event
			kind   check.Kind
			op     obs.OpID
			other  obs.OpID
			failed bool
			none   bool // the mutation breaks no promise
		}{
			{"signal atomic before its own payload", move(ps, atomic, landed), check.SignalBeforePayload, 1, 1, false, false},
			{"put landing twice", slices.Insert(slices.Clone(ps), landed+1, ps[landed]), check.DoubleLanding, 1, 0, false, false},
			{"put landing again after it took effect", append(slices.Clone(ps), ps[landed]), check.DoubleLanding, 1, 0, false, false},
			{"signal applied twice", slices.Insert(slices.Clone(ps), atomic+1, ps[atomic]), check.DoubleUpdate, 1, 0, false, false},
			{"read of bytes no signal covers", move(ps, read, seen), check.Race, 1, 0, false, false},
			{"waiter saw a value never written", setValue(ps, seen, 7), check.UnwrittenValue, 1, 0, false, false},
			{"run stopped before the put landed", ps[:landed:landed], check.Lost, 1, 0, false, false},
			{"a failed run stopped before the put landed", ps[:landed:landed], check.Lost, 1, 0, true, true},
			{"flush before the CQE", move(ps, find(t, ps, obs.Completed, 0, isFlush), find(t, ps, obs.CQE, 1, nil)), check.FlushEarly, 1, 0, false, false},
			{"strong signal overtakes a put on its context",
				move(sameCtx, find(t, sameCtx, obs.Atomic, 2, nil), find(t, sameCtx, obs.Landed, 1, nil)), check.SignalBeforePayload, 2, 1, false, false},
			{"signal overtakes a put on another context (allowed)",
				move(otherCtx, find(t, otherCtx, obs.Atomic, 2, nil), find(t, otherCtx, obs.Landed, 1, nil)), check.SignalBeforePayload, 0, 0, false, true},
			{"counter before the put's CQE", counterEarly(t, ctr), check.CounterEarly, 1, 0, false, false},
		}
		for _, tc := range cases {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				c := replay(tc.ev, tc.failed)
				r := c.Report()
				if tc.none {
					if r.Violations != 0 {
						t.Fatalf("flagged: %v", r.Kept)
					}
					return
				}
				if c.Count(tc.kind) == 0 {
					t.Fatalf("no %v; got %v", tc.kind, r.Kept)
				}
				for _, v := range r.Kept {
					if v.Kind == tc.kind {
						if v.Op != tc.op || v.Other != tc.other {
							t.Errorf("%v names op %d and %d, want %d and %d: %s", tc.kind, v.Op, v.Other, tc.op, tc.other, v.String())
						}
						return
					}
				}
			})
		}
	}
}

func setValue(ev []obs.Event, i int, v uint64) []obs.Event {
	out := slices.Clone(ev)
	out[i].Value = v
	return out
}

// counterEarly moves the counter update of op 1 (a GDAKI loopback atomic
// or a proxy counter store) before op 1's first CQE.
func counterEarly(t *testing.T, ev []obs.Event) []obs.Event {
	i := -1
	for j, e := range ev {
		if e.Op == 1 && (e.Kind == obs.Counter || e.Kind == obs.Atomic) {
			i = j
		}
	}
	if i < 0 {
		t.Fatal("no counter update in the stream")
	}
	return move(ev, i, find(t, ev, obs.CQE, 1, nil))
}
