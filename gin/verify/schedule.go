package verify

import (
	"fmt"
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
		Poll: []int{1, 3, 2, 5}[(i/2)%4]}
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
	return strings.Join(parts, ",")
}

// ParseSchedule reads "seed=N[,faults=K][,stall=N][,poll=N]".
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
		default:
			return s, fmt.Errorf("schedule %q: unknown key %q (want seed, faults, stall, poll)", text, k)
		}
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
	if s.Seed != 1 {
		t := s
		t.Seed = 1
		out = append(out, t)
	}
	return out
}
