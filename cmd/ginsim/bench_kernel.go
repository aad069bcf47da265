package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/sim"
)

func init() { Register("bench", newBenchKernelCmd) }

// holdModel is the classic hold model: every event schedules one new event
// at an exponentially distributed delay, so the number of pending events
// stays constant.
type holdModel struct {
	r    *rand.Rand
	mean float64
}

func (h *holdModel) Handle(s *sim.Sim, arg uint64) {
	s.After(sim.Duration(h.r.ExpFloat64()*h.mean), h, arg)
}

func newBenchKernelCmd() *cobra.Command {
	var (
		events  uint64
		warmup  uint64
		pending int
		mean    time.Duration
		seed    uint64
	)
	cmd := &cobra.Command{
		Use:   "kernel",
		Short: "Measure the event kernel's throughput on the hold model",
		Long: `kernel runs the classic hold model on the sim package: --pending events are
scheduled, and each event schedules one more at an exponential delay of mean
--mean, for --events events, after --warmup events that are not timed (the
queue's pools and calendar reach their steady state within a few times
--pending events). It prints the wall time and events per second of the
timed events including the random draws, and the CPU time per event, the
steadier figure on a shared machine; go test -bench . ./sim has the finer
benchmarks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if events < 1 {
				return Usagef("--events must be at least 1, got %d", events)
			}
			if pending < 1 {
				return Usagef("--pending must be at least 1, got %d", pending)
			}
			if mean <= 0 {
				return Usagef("--mean must be positive, got %v", mean)
			}
			s := sim.New(sim.Config{Seed: seed, StallLimit: -1})
			r := s.Rand("bench/kernel")
			h := &holdModel{r: r, mean: float64(mean.Nanoseconds()) * float64(sim.Nanosecond)}
			for i := range pending {
				s.Schedule(sim.Time(r.ExpFloat64()*h.mean), h, uint64(i))
			}
			for range warmup {
				s.Step()
			}
			start, cpu0 := time.Now(), cpuTime()
			for range events {
				s.Step()
			}
			wall, cpu := time.Since(start), cpuTime()-cpu0
			rate := float64(events) / wall.Seconds()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "hold model: %d events, %d pending, mean delay %v, seed %d", events, pending, mean, seed)
			if warmup > 0 {
				fmt.Fprintf(w, ", timed after %d events", warmup)
			}
			fmt.Fprintln(w)
			fmt.Fprintf(w, "wall %v, %.2f M events/s, %.1f ns/event, simulated %v\n",
				wall.Round(time.Millisecond), rate/1e6, float64(wall.Nanoseconds())/float64(events), s.Now())
			if cpu > 0 {
				// On a shared machine the rate per CPU second is the steadier figure.
				fmt.Fprintf(w, "CPU %v, %.2f M events per CPU second, %.1f CPU ns/event\n", cpu.Round(time.Millisecond),
					float64(events)/cpu.Seconds()/1e6, float64(cpu.Nanoseconds())/float64(events))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&events, "events", 10_000_000, "events to fire and time")
	f.Uint64Var(&warmup, "warmup", 0, "events to fire before timing")
	f.IntVar(&pending, "pending", 100_000, "events pending at any time")
	f.DurationVar(&mean, "mean", time.Microsecond, "mean delay between an event and the one it schedules")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
