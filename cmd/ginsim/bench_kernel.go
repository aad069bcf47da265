package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/sim"
)

func init() { Register("bench", newBenchKernelCmd) }

// holdModel is the classic hold model: every event schedules one new event
// at an exponentially distributed delay, so the number of pending events
// stays constant.
type holdModel struct {
	draw func() float64
	mean float64
}

func (h *holdModel) Handle(s *sim.Sim, arg uint64) {
	s.After(sim.Duration(h.draw()*h.mean), h, arg)
}

func newBenchKernelCmd() *cobra.Command {
	var (
		events  uint64
		pending int
		mean    time.Duration
		seed    uint64
	)
	cmd := &cobra.Command{
		Use:   "kernel",
		Short: "Measure the event kernel's throughput on the hold model",
		Long: `kernel runs the classic hold model on the sim package: --pending events are
scheduled, and each event schedules one more at an exponential delay of mean
--mean, for --events events. It prints the wall time and events per second
of the whole run including the random draws; go test -bench . ./sim has the
finer benchmarks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if pending < 1 {
				return Usagef("--pending must be at least 1, got %d", pending)
			}
			if mean <= 0 {
				return Usagef("--mean must be positive, got %v", mean)
			}
			s := sim.New(sim.Config{Seed: seed, StallLimit: -1})
			r := s.Rand("bench/kernel")
			h := &holdModel{draw: r.ExpFloat64, mean: float64(mean.Nanoseconds()) * float64(sim.Nanosecond)}
			for i := range pending {
				s.Schedule(sim.Time(h.draw()*h.mean), h, uint64(i))
			}
			start, cpu0 := time.Now(), cpuTime()
			for range events {
				s.Step()
			}
			wall, cpu := time.Since(start), cpuTime()-cpu0
			rate := float64(events) / wall.Seconds()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "hold model: %d events, %d pending, mean delay %v, seed %d\n", events, pending, mean, seed)
			fmt.Fprintf(w, "wall %v, %.2f M events/s, %.1f ns/event, simulated %v\n",
				wall.Round(time.Millisecond), rate/1e6, float64(wall.Nanoseconds())/float64(events), s.Now())
			if cpu > 0 {
				// On a shared machine the rate per CPU second is the steadier figure.
				fmt.Fprintf(w, "CPU %v, %.2f M events per CPU second\n", cpu.Round(time.Millisecond), float64(events)/cpu.Seconds()/1e6)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&events, "events", 10_000_000, "events to fire")
	f.IntVar(&pending, "pending", 100_000, "events pending at any time")
	f.DurationVar(&mean, "mean", time.Microsecond, "mean delay between an event and the one it schedules")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
