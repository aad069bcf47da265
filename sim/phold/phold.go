package phold

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/ginsim/ginsim/sim"
)

// Config is one PHOLD run.
type Config struct {
	Seed uint64 `json:"seed"`
	// Parts is the number of partitions, LPs the logical processes in
	// each, Pending the events each process starts with.
	Parts   int `json:"parts"`
	LPs     int `json:"lps"`
	Pending int `json:"pending"`
	// Remote is the probability that an event's successor goes to a
	// process in another partition.
	Remote float64 `json:"remote"`
	// Lookahead is the least delay of every event; Mean the mean of the
	// exponential delay added to it.
	Lookahead sim.Duration `json:"lookahead_ps"`
	Mean      sim.Duration `json:"mean_ps"`
	// Work is the number of rounds of a small integer mix each event runs
	// (a few nanoseconds each): the model's cost per event.
	Work int `json:"work"`
	// End: events at or after it schedule no successor.
	End sim.Time `json:"end_ps"`
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Parts < 1:
		return fmt.Errorf("phold: parts %d must be at least 1", c.Parts)
	case c.LPs < 1:
		return fmt.Errorf("phold: lps %d must be at least 1", c.LPs)
	case c.Pending < 1:
		return fmt.Errorf("phold: pending %d must be at least 1", c.Pending)
	case c.Remote < 0 || c.Remote > 1:
		return fmt.Errorf("phold: remote %v must be in [0, 1]", c.Remote)
	case c.Lookahead <= 0:
		return fmt.Errorf("phold: lookahead %v must be positive", c.Lookahead)
	case c.Mean < 0:
		return fmt.Errorf("phold: mean %v must not be negative", c.Mean)
	case c.Work < 0:
		return fmt.Errorf("phold: work %d must not be negative", c.Work)
	case c.End <= 0:
		return fmt.Errorf("phold: end %v must be positive", c.End)
	}
	return nil
}

// Model is a PHOLD instance built on a World.
type Model struct {
	cfg   Config
	w     *sim.World
	parts []*part
}

// part is one partition's processes and random stream.
type part struct {
	m    *Model
	s    *sim.Sim
	rnd  *rand.Rand
	sum  []uint64 // per process: a running hash of its events
	n    []uint64 // per process: events
	sink uint64
}

// New builds the model on a new World (partition i's stream is named
// "phold/i"); the caller sets the World's Exec and runs it.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := sim.NewWorld(sim.Config{Seed: cfg.Seed, StallLimit: -1}, cfg.Parts, cfg.Lookahead)
	m := &Model{cfg: cfg, w: w}
	for i := range cfg.Parts {
		s := w.Part(i)
		p := &part{m: m, s: s, rnd: s.Rand(fmt.Sprintf("phold/%d", i)),
			sum: make([]uint64, cfg.LPs), n: make([]uint64, cfg.LPs)}
		m.parts = append(m.parts, p)
	}
	for _, p := range m.parts {
		for lp := range cfg.LPs {
			for range cfg.Pending {
				p.s.Post(p.delay(0), p, uint64(lp))
			}
		}
	}
	return m, nil
}

// World returns the model's World.
func (m *Model) World() *sim.World { return m.w }

func (p *part) delay(now sim.Time) sim.Time {
	c := &p.m.cfg
	return now.Add(c.Lookahead + sim.Duration(p.rnd.ExpFloat64()*float64(c.Mean)))
}

// Handle is one event at process arg of this partition.
func (p *part) Handle(s *sim.Sim, arg uint64) {
	c := &p.m.cfg
	now := s.Now()
	p.n[arg]++
	p.sum[arg] = mix(p.sum[arg] ^ uint64(now))
	x := p.sink
	for range c.Work {
		x = mix(x + 1)
	}
	p.sink = x
	if now >= c.End {
		return
	}
	dst := p
	if len(p.m.parts) > 1 && p.rnd.Float64() < c.Remote {
		k := p.rnd.IntN(len(p.m.parts) - 1)
		if k >= s.Part() {
			k++
		}
		dst = p.m.parts[k]
	}
	s.Send(dst.s, p.delay(now), dst, uint64(p.rnd.IntN(c.LPs)))
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Result is what a run produced.
type Result struct {
	Events  uint64   `json:"events"`
	Windows uint64   `json:"windows"`
	End     sim.Time `json:"end_ps"`
	// Digest hashes every process's count and sequence of event times:
	// equal digests, equal runs.
	Digest string `json:"digest"`
}

// Result returns the run's totals and digest.
func (m *Model) Result() Result {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, p := range m.parts {
		for lp := range p.sum {
			put(p.n[lp])
			put(p.sum[lp])
		}
	}
	return Result{Events: m.w.Fired(), Windows: m.w.Windows(), End: m.w.Now(), Digest: fmt.Sprintf("%016x", h.Sum64())}
}
