package machine

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/sim"
	"gopkg.in/yaml.v3"
)

// Rate is a link or bus rate in a Spec. In YAML it is a number with a unit:
// "400Gb/s", "400Gbps", "50GB/s" (bytes), "100Mb/s"; a bare number is bits per
// second.
type Rate sim.BitRate

// Duration is a latency in a Spec. In YAML it is a number with a unit: "ps",
// "ns", "us" (or "µs"), "ms", "s"; a bare number is nanoseconds.
type Duration sim.Duration

var rateUnits = []struct {
	suffix string
	bits   int64 // bits per second per unit
}{
	{"Tb/s", 1e12}, {"Tbps", 1e12}, {"Gb/s", 1e9}, {"Gbps", 1e9}, {"Mb/s", 1e6}, {"Mbps", 1e6},
	{"TB/s", 8e12}, {"GB/s", 8e9}, {"MB/s", 8e6}, {"b/s", 1}, {"bps", 1},
}

var durUnits = []struct {
	suffix string
	ps     int64
}{
	{"ps", 1}, {"ns", 1e3}, {"us", 1e6}, {"µs", 1e6}, {"ms", 1e9}, {"s", 1e12},
}

var errNaN = errors.New("not a number")

// scaled parses a decimal number and multiplies it by unit, requiring an
// integral, non-negative result.
func scaled(num string, unit int64, what string) (int64, error) {
	num = strings.TrimSpace(num)
	// A huge exponent would make big.Rat build a huge number: no value of
	// the model needs more than 30 digits either way.
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		if e, err := strconv.Atoi(num[i+1:]); err != nil || e < -30 || e > 30 {
			return 0, fmt.Errorf("%q: %w", num, errNaN)
		}
	}
	if len(num) > 64 {
		return 0, fmt.Errorf("%s %q is too long", what, num)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || num == "" {
		return 0, fmt.Errorf("%q: %w", num, errNaN)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("%s %s must not be negative", what, num)
	}
	r.Mul(r, new(big.Rat).SetInt64(unit))
	if !r.IsInt() {
		return 0, fmt.Errorf("%s %s is finer than the model's resolution", what, num)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%s %s is too large", what, num)
	}
	return r.Num().Int64(), nil
}

// ParseRate parses a rate such as "400Gb/s" or "50GB/s".
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	for _, u := range rateUnits {
		if strings.HasSuffix(s, u.suffix) {
			v, err := scaled(strings.TrimSuffix(s, u.suffix), u.bits, "rate")
			if errors.Is(err, errNaN) {
				return 0, fmt.Errorf("rate %q: want a number with a unit such as 400Gb/s or 50GB/s", s)
			}
			return Rate(v), err
		}
	}
	v, err := scaled(s, 1, "rate")
	if err != nil {
		return 0, fmt.Errorf("rate %q: want a number with a unit such as 400Gb/s or 50GB/s", s)
	}
	return Rate(v), nil
}

// ParseDuration parses a duration such as "150ns" or "1.5us".
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	for _, u := range durUnits {
		// "s" is a suffix of every unit: the longer ones come first.
		if strings.HasSuffix(s, u.suffix) {
			v, err := scaled(strings.TrimSuffix(s, u.suffix), u.ps, "duration")
			if errors.Is(err, errNaN) {
				return 0, fmt.Errorf("duration %q: want a number with a unit such as 150ns or 1.5us", s)
			}
			return Duration(v), err
		}
	}
	v, err := scaled(s, 1e3, "duration")
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number with a unit such as 150ns or 1.5us", s)
	}
	return Duration(v), nil
}

// String formats a rate in Gb/s (or b/s when not a whole number of Mb/s).
func (r Rate) String() string {
	switch {
	case r%Rate(sim.Gbps) == 0:
		return fmt.Sprintf("%dGb/s", int64(r)/int64(sim.Gbps))
	case r%Rate(sim.Mbps) == 0:
		return fmt.Sprintf("%dMb/s", int64(r)/int64(sim.Mbps))
	}
	return fmt.Sprintf("%db/s", int64(r))
}

// String formats a duration with sim.Duration's units.
func (d Duration) String() string { return sim.Duration(d).String() }

// MarshalYAML writes the rate with its unit.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// UnmarshalYAML reads a rate with a unit.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a rate such as 400Gb/s")
	}
	v, err := ParseRate(n.Value)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalYAML writes the duration with its unit.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration with a unit.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as 150ns")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
