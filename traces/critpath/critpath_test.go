package critpath

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces/obslog"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the recorded event streams and tables in testdata")

// signalLanding is an independent witness: the memory system's own
// observer records when the signal word's fetch-add happened.
type signalLanding struct{ at sim.Time }

func (s *signalLanding) Observe(e *mem.Effect) {
	if e.Op == mem.OpFetchAdd && strings.HasSuffix(e.Region.Name(), "/signals") {
		s.at = e.At
	}
}

// record runs one 8-byte put with a signal from rank 0 to rank 1 (rank 1
// waits for the signal) on backend, with local action local, and returns
// the event stream as JSON Lines and when the signal's atomic landed.
func record(t *testing.T, backend string, local gin.LocalAction) ([]byte, sim.Time) {
	t.Helper()
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := obslog.NewWriter(&b)
	e.Observe(w)
	sl := &signalLanding{}
	e.Machine.Mem.SetObserver(sl)
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 8, gin.SignalInc{Signal: 0}, local)
		if local != nil {
			g.WaitCounter(0, 1, 56)
		}
	})
	e.Ranks[1].GPU.Launch("w", 1, func(tg *gpu.Group) { e.Dev.Gin(tg, 1, 0).WaitSignal(0, 1, 64) })
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return b.Bytes(), sl.at
}

// golden compares got with testdata/name, or rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (rerun with -rewrite and review the diff):\n%s", path, got)
	}
}

// The table of a recorded put+signal run is computed from the event file
// alone; its phases add up to the device call -> signal seen latency, and
// its landing milestone is the instant the memory system saw the atomic.
func TestTableFromRecordedStream(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		t.Run(backend, func(t *testing.T) {
			stream, atomicAt := record(t, backend, nil)
			golden(t, "put_signal_"+backend+".jsonl", stream)
			f, err := os.Open(filepath.Join("testdata", "put_signal_"+backend+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			events, err := obslog.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			rows := Table(events)
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1 (one put)", len(rows))
			}
			r := rows[0]
			var sum sim.Duration
			for p, d := range r.Phases {
				if d < 0 {
					t.Errorf("phase %v is negative: %v", Phase(p), d)
				}
				sum += d
			}
			if sum != r.Total() || !r.Seen {
				t.Errorf("phases sum to %v, total %v, seen %v", sum, r.Total(), r.Seen)
			}
			var landed sim.Duration
			for p := Issue; p <= Landing; p++ {
				landed += r.Phases[p]
			}
			if got := r.Start.Add(landed); got != atomicAt {
				t.Errorf("path reaches the signal atomic at %v; the memory system saw it at %v", got, atomicAt)
			}
			if (r.Phases[Proxy] == 0) != (backend == "gdaki") {
				t.Errorf("proxy phase %v on %s", r.Phases[Proxy], backend)
			}
			// The NIC's PCIe reads are their own phases: the 8-byte payload
			// is read from GPU memory on both backends, the WQE from the
			// SQ (GPU memory for GDAKI, host memory for the proxy).
			if r.Phases[Fetch] <= 0 || r.Phases[Payload] <= 0 {
				t.Errorf("fetch %v, payload %v: the NIC's PCIe reads are missing", r.Phases[Fetch], r.Phases[Payload])
			}
			if r.Local <= 0 {
				t.Errorf("no local completion (CQE) observed")
			}
			var b bytes.Buffer
			if err := Write(&b, rows); err != nil {
				t.Fatal(err)
			}
			golden(t, "put_signal_"+backend+".txt", b.Bytes())
		})
	}
}

// With a counter, GDAKI posts a loopback companion (WAIT + FETCH_ADD on
// the issuer's counter) under the same op id: the path still ends at the
// peer's signal, and the issuer's completion is the counter wait.
func TestCounterCompanionDoesNotHijackThePath(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		t.Run(backend, func(t *testing.T) {
			stream, atomicAt := record(t, backend, gin.CounterInc{Counter: 0})
			events, err := obslog.Read(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			rows := Table(events)
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			r := rows[0]
			if !r.Seen || r.End.Sub(r.Start) != r.Total() {
				t.Fatalf("row %+v", r)
			}
			var landed sim.Duration
			for p := Issue; p <= Landing; p++ {
				landed += r.Phases[p]
			}
			// The last signal fetch-add the memory system saw is the
			// peer's (the counter's is on a "counters" region).
			if got := r.Start.Add(landed); got != atomicAt {
				t.Errorf("path reaches the atomic at %v; the signal's landed at %v", got, atomicAt)
			}
			var counted bool
			for _, e := range events {
				if e.Kind == obs.Completed && e.Note == "counter" {
					counted = true
					if e.Op != r.Op {
						t.Errorf("counter completion stamped op %d, want %d", e.Op, r.Op)
					}
					if want := e.At.Sub(r.Start); r.Local != want {
						t.Errorf("local %v, want the counter wait's %v", r.Local, want)
					}
				}
			}
			if !counted {
				t.Error("no counter completion event")
			}
		})
	}
}

// Every event of a put carries its op id, from the front end to the CQE.
func TestEveryStepOfAPutCarriesItsOpID(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		t.Run(backend, func(t *testing.T) {
			stream, _ := record(t, backend, nil)
			events, err := obslog.Read(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[obs.Kind]bool{}
			for _, e := range events {
				if e.Op == 1 {
					kinds[e.Kind] = true
				}
			}
			want := []obs.Kind{obs.Issued, obs.Posted, obs.Doorbell, obs.Fetched, obs.Sent, obs.Hop, obs.Received,
				obs.Landed, obs.Atomic, obs.Acked, obs.CQE, obs.SignalSeen}
			if backend == "proxy" {
				want = append(want, obs.Pickup, obs.Consumed)
			}
			for _, k := range want {
				if !kinds[k] {
					t.Errorf("no %v event carries op 1", k)
				}
			}
		})
	}
}

// Eight warps each put 64 KiB (several packets) with a signal add into
// one signal; the waiter waits for the sum. Every op gets a row, exactly
// one ends at the waiter (the op whose atomic completed the sum, named by
// the stream, not guessed), and every row's phases add up.
func TestManyOpsOneWaiter(t *testing.T) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: "gdaki"})
	if err != nil {
		t.Fatal(err)
	}
	var rec obs.Recorder
	e.Observe(&rec)
	const warps = 8
	for w := range warps {
		e.Ranks[0].GPU.Launch(fmt.Sprintf("w%d", w), 32, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			g.Put(e.Dev.World(0), 1, e.Win, uint64(w)<<16, e.Win, 0, 64<<10, gin.SignalAdd{Signal: 0, Value: 1}, nil)
		})
	}
	e.Ranks[1].GPU.Launch("recv", 1, func(tg *gpu.Group) { e.Dev.Gin(tg, 1, 0).WaitSignal(0, warps, 64) })
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	rows := Table(rec.Events)
	if len(rows) != warps {
		t.Fatalf("%d rows, want %d", len(rows), warps)
	}
	var seen []obs.OpID
	for _, r := range rows {
		var sum sim.Duration
		for p, d := range r.Phases {
			if d < 0 {
				t.Errorf("op %d: phase %v negative (%v)", r.Op, Phase(p), d)
			}
			sum += d
		}
		if sum != r.Total() {
			t.Errorf("op %d: phases sum to %v, total %v", r.Op, sum, r.Total())
		}
		if r.Seen {
			seen = append(seen, r.Op)
		}
	}
	var last obs.Event
	for _, ev := range rec.Events {
		if ev.Kind == obs.Atomic && strings.HasSuffix(ev.Where, "/signals") {
			last = ev
		}
	}
	if len(seen) != 1 || seen[0] != last.Op || last.Value != warps {
		t.Errorf("ops ending at the waiter: %v; the atomic that made the sum %d was op %d", seen, last.Value, last.Op)
	}
}

// Observing a run changes nothing in it: the same workload with and
// without a bus ends at the same instant with the same memory effects.
func TestObservingDoesNotPerturb(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		run := func(observe bool) (sim.Time, string) {
			e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			var effects strings.Builder
			e.Machine.Mem.SetObserver(effectLog{&effects})
			if observe {
				e.Observe(&obs.Recorder{})
			}
			for w := range 4 {
				e.Ranks[0].GPU.Launch(fmt.Sprintf("w%d", w), 32, func(tg *gpu.Group) {
					g := e.Dev.Gin(tg, 0, 0)
					g.Put(e.Dev.World(0), 1, e.Win, uint64(w)<<16, e.Win, 0, 16<<10, gin.SignalAdd{Signal: 0, Value: 1}, gin.CounterInc{Counter: 0})
					g.Flush()
				})
			}
			e.Ranks[1].GPU.Launch("recv", 1, func(tg *gpu.Group) { e.Dev.Gin(tg, 1, 0).WaitSignal(0, 4, 64) })
			if err := e.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			return e.Sim.Now(), effects.String()
		}
		t0, m0 := run(false)
		t1, m1 := run(true)
		if t0 != t1 || m0 != m1 {
			t.Errorf("%s: observed run ends at %v, unobserved at %v; effects equal: %v", backend, t1, t0, m0 == m1)
		}
	}
}

type effectLog struct{ b *strings.Builder }

func (l effectLog) Observe(e *mem.Effect) {
	fmt.Fprintf(l.b, "%d %s %s %d %d %d %d\n", e.At, e.Agent, e.Region.Name(), e.Off, e.Len, e.Old, e.New)
}

// A Tracker fed the stream as it is emitted gives Table's rows; with
// Signals it follows only the ops that update a signal; after Reset it
// forgets the ops issued before.
func TestTrackerFollowsTheStream(t *testing.T) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: "gdaki"})
	if err != nil {
		t.Fatal(err)
	}
	var rec obs.Recorder
	all, sigs := NewTracker(), NewTracker()
	sigs.Signals = true
	e.Observe(&rec, all, sigs)
	e.Ranks[0].GPU.Launch("w", 32, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 4096, nil, nil)
		g.Put(e.Dev.World(0), 1, e.Win, 4096, e.Win, 0, 4096, gin.SignalInc{Signal: 0}, nil)
	})
	e.Ranks[1].GPU.Launch("recv", 1, func(tg *gpu.Group) { e.Dev.Gin(tg, 1, 0).WaitSignal(0, 1, 64) })
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	want := Table(rec.Events)
	if len(want) != 2 {
		t.Fatalf("%d rows from the recorded stream, want 2", len(want))
	}
	got := all.Rows()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tracker rows\n%v\nwant Table's\n%v", got, want)
	}
	if r := sigs.Rows(); len(r) != 1 || fmt.Sprint(r[0]) != fmt.Sprint(want[1]) {
		t.Errorf("signal tracker rows %v, want only the signalling put %v", r, want[1])
	}
	if r, ok := sigs.Row(want[0].Op); ok {
		t.Errorf("signal tracker followed the plain put: %v", r)
	}
	all.Reset()
	if r := all.Rows(); len(r) != 0 {
		t.Errorf("after Reset: %d rows", len(r))
	}
	if _, ok := all.Row(want[1].Op); ok {
		t.Error("after Reset the tracker still has an op issued before")
	}
}
