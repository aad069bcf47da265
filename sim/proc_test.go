package sim

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestProcSleepOrder(t *testing.T) {
	s := New(Config{})
	var log []string
	for i, d := range []Duration{30, 10, 20, 10} {
		name := fmt.Sprintf("p%d", i)
		s.Spawn(name, func(p *Proc) {
			p.Sleep(d)
			log = append(log, fmt.Sprintf("%s@%v", p.Name(), p.Now()))
			p.SleepUntil(100)
			log = append(log, fmt.Sprintf("%s@%v", p.Name(), p.Now()))
		})
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := "p1@10ps p3@10ps p2@20ps p0@30ps p1@100ps p3@100ps p2@100ps p0@100ps"
	if got := strings.Join(log, " "); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestParkWakeAndCond(t *testing.T) {
	s := New(Config{})
	var c Cond
	ready := 0
	var got []string
	for i := range 3 {
		s.Spawn(fmt.Sprintf("w%d", i), func(p *Proc) {
			c.WaitFor(p, "ready", func() bool { return ready >= i })
			got = append(got, fmt.Sprintf("%s@%v", p.Name(), p.Now()))
		})
	}
	var sleeper *Proc
	sleeper = s.Spawn("sleeper", func(p *Proc) {
		p.Park("a kick")
		got = append(got, fmt.Sprintf("sleeper@%v", p.Now()))
	})
	s.Spawn("driver", func(p *Proc) {
		for i := 1; i <= 2; i++ {
			p.Sleep(Nanosecond)
			ready = i
			c.Broadcast()
		}
		sleeper.WakeAt(p.Now().Add(5 * Nanosecond))
		sleeper.Wake() // not parked any more: a no-op
	})
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := "w0@0s w1@1ns w2@2ns sleeper@7ns"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("got  %s\nwant %s", g, want)
	}
	if c.Len() != 0 || len(s.Blocked()) != 0 {
		t.Fatalf("%d waiters, %d blocked left", c.Len(), len(s.Blocked()))
	}
}

func TestBlockedReportsDeadlock(t *testing.T) {
	s := New(Config{})
	var c Cond
	s.Spawn("a", func(p *Proc) { c.Wait(p, "signal from b") })
	s.Spawn("b", func(p *Proc) { p.Park("CQE on qp 3") })
	s.Spawn("c", func(p *Proc) { p.Sleep(Nanosecond) })
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Blocked() {
		_, why := p.Parked()
		got = append(got, p.Name()+": "+why)
	}
	if g := strings.Join(got, "; "); g != "a: signal from b; b: CQE on qp 3" {
		t.Fatalf("Blocked() = %s", g)
	}
	s.Shutdown()
}

func TestProcPanicBecomesPanicError(t *testing.T) {
	s := New(Config{})
	s.Spawn("bad", func(p *Proc) {
		p.Sleep(3 * Nanosecond)
		panic("wqe out of range")
	})
	defer func() {
		r := recover()
		pe, ok := r.(*PanicError)
		if !ok {
			t.Fatalf("recovered %v (%T), want *PanicError", r, r)
		}
		if pe.Proc != "bad" || pe.At != 3*Time(Nanosecond) || pe.Value != "wqe out of range" {
			t.Fatalf("PanicError = %+v", pe)
		}
		if !strings.Contains(pe.Error(), `process "bad" at t=3ns`) {
			t.Fatalf("message %q", pe.Error())
		}
		var target *PanicError
		if !errors.As(error(pe), &target) {
			t.Fatal("*PanicError is not an error")
		}
	}()
	_ = s.Run()
	t.Fatal("Run returned instead of panicking")
}

func TestShutdownReleasesCoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		s := New(Config{})
		for i := range 50 {
			s.Spawn(fmt.Sprint(i), func(p *Proc) {
				p.Sleep(Duration(i))
				p.Park("forever")
			})
		}
		if err := s.RunUntil(10); err != nil {
			t.Fatal(err)
		}
		s.Shutdown()
		s.Shutdown() // idempotent
	}
	runtime.GC()
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines: %d before, %d after Shutdown", before, after)
	}
}

func TestBlockingOutsideBodyPanics(t *testing.T) {
	s := New(Config{})
	p := s.Spawn("x", func(p *Proc) { p.Park("wait") })
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	defer func() {
		if msg := fmt.Sprint(recover()); !strings.Contains(msg, "outside its own body") {
			t.Fatalf("panic %q", msg)
		}
	}()
	p.Sleep(1)
}

// Start runs the new process inside the current event, before the events
// already queued for the same instant; Spawn runs it after them. Start
// from a process body panics.
func TestStartRunsInline(t *testing.T) {
	s := New(Config{})
	var log []string
	s.At(10, func() {
		s.At(10, func() { log = append(log, "queued@10") })
		s.Start("started", func(p *Proc) {
			log = append(log, fmt.Sprintf("started@%v", p.Now()))
			p.Sleep(5)
			log = append(log, fmt.Sprintf("started@%v", p.Now()))
		})
		s.Spawn("spawned", func(p *Proc) { log = append(log, fmt.Sprintf("spawned@%v", p.Now())) })
		log = append(log, "handler done")
	})
	var perr error
	s.Spawn("bad", func(p *Proc) {
		defer func() {
			if r := recover(); r != nil {
				perr = fmt.Errorf("%v", r)
			}
		}()
		s.Start("inner", func(*Proc) {})
	})
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := "started@10ps handler done queued@10 spawned@10ps started@15ps"
	if got := strings.Join(log, " "); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if perr == nil || !strings.Contains(perr.Error(), "use Spawn") {
		t.Fatalf("Start from a process: got %v, want a panic naming Spawn", perr)
	}
}
