package sim

import (
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

func BenchmarkHold(b *testing.B) {
	const pending = 100_000
	s := New(Config{Seed: 1})
	h := &holdModel{r: s.Rand("hold"), mean: float64(Microsecond)}
	for i := range pending {
		s.Schedule(Time(h.r.ExpFloat64()*h.mean), h, uint64(i))
	}
	// Warm up so the free lists and the heap reach steady state.
	for range pending {
		s.Step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

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
