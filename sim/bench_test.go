package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// holdModel is the classic hold benchmark: every event schedules one new
// event at an exponentially distributed delay, so the queue size is constant.
type holdModel struct {
	r    *rand.Rand
	mean float64
}

func (h *holdModel) Handle(s *Sim, arg uint64) {
	d := Duration(h.r.ExpFloat64() * h.mean)
	s.After(d, h, arg)
}

// tableHold is the hold model with its exponential delays drawn in advance,
// so that the benchmark measures the kernel and queue alone.
type tableHold struct {
	d []Duration
	i int
}

func (h *tableHold) Handle(s *Sim, arg uint64) {
	h.i = (h.i + 1) & (len(h.d) - 1)
	s.After(h.d[h.i], h, arg)
}

// runHold primes a simulation with pending events of handler h, warms it up
// and then times single steps.
func runHold(b *testing.B, pending int, h Handler, draw func() Duration) {
	runHoldOn(b, New(Config{Seed: 1, StallLimit: -1}), pending, h, draw)
}

func runHoldOn(b *testing.B, s *Sim, pending int, h Handler, draw func() Duration) {
	var last Time
	for i := range pending {
		at := Time(draw())
		last = max(last, at)
		s.Schedule(at, h, uint64(i))
	}
	// Warm up so the pools and the tiers reach steady state: past the end
	// of the first calendar and through another one (or 16 events per
	// pending event, to bound the set-up time of the largest queues).
	for n := 0; n < 16*pending && s.Now() < 2*last; n++ {
		s.Step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkHold is the headline kernel figure: 100 000 pending events,
// exponential delays of mean 1us drawn per event.
func BenchmarkHold(b *testing.B) {
	r := NewRand(1, "hold")
	h := &holdModel{r: r, mean: float64(Microsecond)}
	runHold(b, 100_000, h, func() Duration { return Duration(r.ExpFloat64() * h.mean) })
}

// BenchmarkHoldTies is BenchmarkHold with same-instant orders perturbed
// (sim.SetTies): the cost of the perturbed path when it is on.
func BenchmarkHoldTies(b *testing.B) {
	r := NewRand(1, "hold")
	h := &holdModel{r: r, mean: float64(Microsecond)}
	s := New(Config{Seed: 1, StallLimit: -1})
	s.SetTies(SeededTies(1), PerHandler)
	runHoldOn(b, s, 100_000, h, func() Duration { return Duration(r.ExpFloat64() * h.mean) })
}

// BenchmarkHoldSizes is the hold model at several queue sizes, the 0.1-1 M
// pending range of a large replay included.
func BenchmarkHoldSizes(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000, 300_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := NewRand(1, "hold")
			h := &holdModel{r: r, mean: float64(Microsecond)}
			runHold(b, n, h, func() Duration { return Duration(r.ExpFloat64() * h.mean) })
		})
	}
}

// BenchmarkHoldQueueOnly is BenchmarkHold without the cost of drawing the
// delays: they come from a precomputed table of 64Ki exponential samples.
func BenchmarkHoldQueueOnly(b *testing.B) {
	r := NewRand(1, "hold")
	h := &tableHold{d: make([]Duration, 1<<16)}
	for i := range h.d {
		h.d[i] = Duration(r.ExpFloat64() * float64(Microsecond))
	}
	runHold(b, 100_000, h, func() Duration { return Duration(r.ExpFloat64() * float64(Microsecond)) })
}

// BenchmarkExpFloat64 is the cost of one delay draw in BenchmarkHold.
func BenchmarkExpFloat64(b *testing.B) {
	r := NewRand(1, "hold")
	var sum Duration
	for b.Loop() {
		sum += Duration(r.ExpFloat64() * float64(Microsecond))
	}
	_ = sum
}

// BenchmarkYield is one Sleep of a process: a coroutine switch to the
// kernel, an event, and a switch back.
func BenchmarkYield(b *testing.B) {
	s := New(Config{})
	n := b.N
	s.Spawn("yielder", func(p *Proc) {
		for range n {
			p.Sleep(Nanosecond)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.Run(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/yield")
}

// pingPong is two handlers that hand one token back and forth, one
// nanosecond per hop: the callback style of BenchmarkPingPong.
type pingPong struct {
	peer *pingPong
	left *int
}

func (p *pingPong) Handle(s *Sim, _ uint64) {
	if *p.left == 0 {
		return
	}
	*p.left--
	s.After(Nanosecond, p.peer, 0)
}

// BenchmarkPingPong compares three ways to write two components that hand a
// token back and forth, one hop per op: callbacks (Handler), processes
// (Proc, Park/Wake) and goroutines with channels, the simgo style, for
// reference only (the model packages do not use goroutines).
func BenchmarkPingPong(b *testing.B) {
	b.Run("callback", func(b *testing.B) {
		s := New(Config{})
		left := b.N
		a, c := &pingPong{left: &left}, &pingPong{left: &left}
		a.peer, c.peer = c, a
		s.Schedule(0, a, 0)
		b.ReportAllocs()
		b.ResetTimer()
		if err := s.Run(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("proc", func(b *testing.B) {
		s := New(Config{})
		n := b.N
		var pa, pb *Proc
		turn := 0
		body := func(me int, peer **Proc) func(p *Proc) {
			return func(p *Proc) {
				for {
					for turn != me {
						p.Park("token")
					}
					if n == 0 {
						(*peer).Wake()
						return
					}
					n--
					p.Sleep(Nanosecond)
					turn = 1 - me
					(*peer).Wake()
				}
			}
		}
		pa = s.Spawn("a", body(0, &pb))
		pb = s.Spawn("b", body(1, &pa))
		b.ReportAllocs()
		b.ResetTimer()
		if err := s.Run(); err != nil {
			b.Fatal(err)
		}
		s.Shutdown()
	})
	b.Run("goroutine", func(b *testing.B) {
		ab, ba := make(chan int), make(chan int)
		done := make(chan struct{})
		go func() {
			for v := range ab {
				ba <- v
			}
			close(done)
		}()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			ab <- i
			<-ba
		}
		close(ab)
		<-done
	})
}

// smallQueue is the load of one partition of a World: a few hundred
// pending events, most of them rescheduling themselves a fraction of a
// microsecond to a few microseconds ahead, some in bursts at one instant
// (a packet's events, events delivered at a window's start), beside
// retransmission-like timers a millisecond out that re-arm when they fire.
type smallQueue struct {
	d []Duration // hot delays, drawn in advance
	i int
}

func (m *smallQueue) Handle(s *Sim, arg uint64) {
	if arg == 1 {
		s.Post(s.Now().Add(Millisecond+Duration(m.i&1023)*Nanosecond), m, 1)
		return
	}
	m.i = (m.i + 1) & (len(m.d) - 1)
	s.Post(s.Now().Add(m.d[m.i]), m, 0)
}

// BenchmarkQueueSmall is the queue at the sizes of a World's partitions:
// a third of the pending events are timers a millisecond out, the rest
// hot events with delays of a few hundred nanoseconds to microseconds, a
// quarter of them tied with the previous one.
func BenchmarkQueueSmall(b *testing.B) {
	for _, n := range []int{50, 200, 500, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := NewRand(1, "small")
			m := &smallQueue{d: make([]Duration, 1<<16)}
			for i := range m.d {
				switch {
				case i > 0 && r.IntN(4) == 0:
					m.d[i] = m.d[i-1]
				case r.IntN(5) == 0:
					m.d[i] = Duration(r.ExpFloat64() * float64(4*Microsecond))
				default:
					m.d[i] = Duration(r.ExpFloat64() * float64(500*Nanosecond))
				}
			}
			s := New(Config{Seed: 1, StallLimit: -1})
			for i := range n {
				if i%3 == 0 {
					s.Post(Time(Millisecond)+Time(i)*Time(Nanosecond), m, 1)
				} else {
					s.Post(Time(m.d[i]), m, 0)
				}
			}
			for range 200 * n {
				s.Step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s.Step()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
		})
	}
}
