package verify

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/sim"
)

// Schedule is one explored execution: a seed (poll phases, fault draws)
// and the perturbations applied on top of the calibrated model.
type Schedule struct {
	Seed uint64
	// Faults names the fabric impairment on every port: "" (none),
	// "jitter" (reordering across packets and paths), "loss", "dup",
	// "corrupt".
	Faults string
	// Stall multiplies the proxy progress thread's per-pass costs (a
	// slow or descheduled CPU); 0 or 1: none.
	Stall int
	// Poll multiplies the GPU's spin-loop period and the NIC's ACK delay
	// (latency perturbation); 0 or 1: none.
	Poll int
	// Ties, when not 0, seeds a random order of the events due at the same
	// instant (sim.SetTies): the events of different components (NICs,
	// GPUs, the fabric, processes) interleave in a seeded order, each
	// component's own events keep theirs.
	Ties uint64
	// AnyOrder lets Ties (or Choices) reorder even one component's
	// same-instant events (sim.AnyOrder), which can break orders the
	// hardware guarantees: a diagnostic, never drawn by exploration.
	AnyOrder bool
	// Choices, when not nil, fixes the same-instant order by choice: the
	// i-th time several events are ready at once, the Choices[i]-th of
	// them (in scheduling order) fires; past the end of Choices, the first.
	// Exhaustive enumeration produces these.
	Choices []int
}

// FaultNames are the fabric impairments exploration draws from.
var FaultNames = []string{"", "jitter", "loss", "dup", "corrupt"}

// faults returns the fabric impairment of the schedule.
func (s Schedule) faults() fabric.Faults {
	switch s.Faults {
	case "jitter":
		return fabric.Faults{Jitter: 2 * sim.Microsecond}
	case "loss":
		return fabric.Faults{Loss: 0.01, Jitter: 300 * sim.Nanosecond}
	case "dup":
		return fabric.Faults{Duplicate: 0.02}
	case "corrupt":
		return fabric.Faults{Corrupt: 0.01}
	}
	return fabric.Faults{}
}

// Explore returns schedule i of an exploration: 0 is the unperturbed
// model with seed 1; later ones cycle through the fault kinds, proxy
// stalls and poll periods with a fresh seed each.
func Explore(i int) Schedule {
	if i == 0 {
		return Schedule{Seed: 1}
	}
	return Schedule{Seed: uint64(i) + 1, Faults: FaultNames[i%len(FaultNames)], Stall: []int{1, 8, 64}[(i/len(FaultNames))%3],
		Poll: []int{1, 3, 2, 5}[(i/2)%4], Ties: uint64(i)}
}

// chooser is the sim.Chooser of the schedule, nil for the kernel's own
// order.
func (s Schedule) chooser() (*choiceLog, sim.TieOrder) {
	order := sim.PerHandler
	if s.AnyOrder {
		order = sim.AnyOrder
	}
	switch {
	case s.Choices != nil:
		return &choiceLog{prefix: s.Choices}, order
	case s.Ties != 0:
		return &choiceLog{seeded: sim.SeededTies(s.Ties)}, order
	}
	return nil, order
}

// choiceLog is a sim.Chooser that follows a prefix of choices (then takes
// the first), or a seeded one, and records every choice point: how many
// events were ready and which fired.
type choiceLog struct {
	prefix []int
	seeded sim.Chooser
	n      []int
	picks  []int
}

func (c *choiceLog) Choose(n int) int {
	pick := 0
	switch i := len(c.picks); {
	case c.seeded != nil:
		pick = c.seeded.Choose(n)
	case i < len(c.prefix):
		pick = min(c.prefix[i], n-1)
	}
	c.n = append(c.n, n)
	c.picks = append(c.picks, pick)
	return pick
}

// String is the schedule in the form ParseSchedule reads.
func (s Schedule) String() string {
	parts := []string{"seed=" + strconv.FormatUint(s.Seed, 10)}
	if s.Faults != "" {
		parts = append(parts, "faults="+s.Faults)
	}
	if s.Stall > 1 {
		parts = append(parts, "stall="+strconv.Itoa(s.Stall))
	}
	if s.Poll > 1 {
		parts = append(parts, "poll="+strconv.Itoa(s.Poll))
	}
	if s.Ties != 0 {
		parts = append(parts, "ties="+strconv.FormatUint(s.Ties, 10))
	}
	if len(s.Choices) > 0 {
		c := make([]string, len(s.Choices))
		for i, x := range s.Choices {
			c[i] = strconv.Itoa(x)
		}
		parts = append(parts, "choices="+strings.Join(c, "."))
	}
	if s.AnyOrder {
		parts = append(parts, "order=any")
	}
	return strings.Join(parts, ",")
}

// ParseSchedule reads
// "seed=N[,faults=K][,stall=N][,poll=N][,ties=N|,choices=I.J...][,order=any]".
func ParseSchedule(text string) (Schedule, error) {
	var s Schedule
	for _, kv := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return s, fmt.Errorf("schedule %q: %q is not key=value", text, kv)
		}
		switch k {
		case "seed":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("schedule %q: seed: %v", text, err)
			}
			s.Seed = n
		case "faults":
			found := false
			for _, f := range FaultNames {
				found = found || (f == v && v != "")
			}
			if !found {
				return s, fmt.Errorf("schedule %q: faults %q is not one of jitter, loss, dup, corrupt", text, v)
			}
			s.Faults = v
		case "stall", "poll":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				return s, fmt.Errorf("schedule %q: %s %q, want 1..1000", text, k, v)
			}
			if k == "stall" {
				s.Stall = n
			} else {
				s.Poll = n
			}
		case "ties":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("schedule %q: ties: %v", text, err)
			}
			s.Ties = n
		case "choices":
			s.Choices = []int{}
			for _, x := range strings.Split(v, ".") {
				n, err := strconv.Atoi(x)
				if err != nil || n < 0 {
					return s, fmt.Errorf("schedule %q: choices: %q is not a choice index", text, x)
				}
				s.Choices = append(s.Choices, n)
			}
		case "order":
			if v != "any" {
				return s, fmt.Errorf("schedule %q: order %q, want any", text, v)
			}
			s.AnyOrder = true
		default:
			return s, fmt.Errorf("schedule %q: unknown key %q (want seed, faults, stall, poll, ties, choices, order)", text, k)
		}
	}
	if s.Ties != 0 && s.Choices != nil {
		return s, fmt.Errorf("schedule %q: ties and choices exclude each other", text)
	}
	return s, nil
}

// simpler returns the schedules one perturbation smaller than s, for
// shrinking a failure.
func (s Schedule) simpler() []Schedule {
	var out []Schedule
	if s.Faults != "" {
		t := s
		t.Faults = ""
		out = append(out, t)
	}
	if s.Stall > 1 {
		t := s
		t.Stall = 0
		out = append(out, t)
	}
	if s.Poll > 1 {
		t := s
		t.Poll = 0
		out = append(out, t)
	}
	if s.Ties != 0 {
		t := s
		t.Ties = 0
		out = append(out, t)
	}
	if len(s.Choices) > 0 {
		t := s
		t.Choices = nil
		out = append(out, t)
		// Then each departure from the scheduling order alone.
		for i, c := range s.Choices {
			if c != 0 && len(s.Choices) > 1 {
				t := s
				t.Choices = slices.Clone(s.Choices)
				t.Choices[i] = 0
				out = append(out, replayable(t))
			}
		}
	}
	if s.AnyOrder && (s.Ties != 0 || len(s.Choices) > 0) {
		t := s
		t.AnyOrder = false
		out = append(out, t)
	}
	if s.Seed != 1 {
		t := s
		t.Seed = 1
		out = append(out, t)
	}
	return out
}
