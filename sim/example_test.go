package sim_test

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// link is a state machine written as a Handler: it delivers a frame one
// serialisation delay plus a propagation delay after it was sent.
type link struct {
	rate sim.BitRate
	prop sim.Duration
	recv *sim.Proc
	got  []sim.Bytes
}

// Handle is a frame of arg bytes reaching the far end.
func (l *link) Handle(s *sim.Sim, arg uint64) {
	l.got = append(l.got, sim.Bytes(arg))
	l.recv.Wake()
}

// send schedules the delivery of a frame of n bytes.
func (l *link) send(s *sim.Sim, n sim.Bytes) {
	s.After(l.rate.TxTime(n)+l.prop, l, uint64(n))
}

func Example() {
	s := sim.New(sim.Config{Seed: 1})
	l := &link{rate: 400 * sim.Gbps, prop: 100 * sim.Nanosecond}
	// The receiver is a process: straight-line code that parks until a
	// frame arrives.
	l.recv = s.Spawn("receiver", func(p *sim.Proc) {
		for len(l.got) < 2 {
			p.Park("frame")
		}
		fmt.Printf("%v: received %v\n", p.Now(), l.got)
	})
	l.send(s, 64)
	s.At(sim.Time(sim.Nanosecond), func() { l.send(s, 4096) })
	if err := s.Run(); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("%d events, done at %v\n", s.Fired(), s.Now())
	// Output:
	// 182.92ns: received [64 4096]
	// 6 events, done at 182.92ns
}
