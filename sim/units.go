package sim

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// Time is an instant of simulated time in integer picoseconds since the start
// of a run. A 64-bit picosecond clock spans about 106 days.
type Time int64

// Duration is a span of simulated time in integer picoseconds.
type Duration int64

// Common durations.
const (
	Picosecond  Duration = 1
	Nanosecond           = 1000 * Picosecond
	Microsecond          = 1000 * Nanosecond
	Millisecond          = 1000 * Microsecond
	Second               = 1000 * Millisecond
)

// MaxTime is the largest representable instant; it means "never".
const MaxTime Time = math.MaxInt64

// Add returns t+d.
func (t Time) Add(d Duration) Time { return t + Time(d) }

// Sub returns t-u.
func (t Time) Sub(u Time) Duration { return Duration(t - u) }

// Before reports whether t is before u.
func (t Time) Before(u Time) bool { return t < u }

// After reports whether t is after u.
func (t Time) After(u Time) bool { return t > u }

// Us returns t in microseconds as a float, for reporting only.
func (t Time) Us() float64 { return float64(t) / float64(Microsecond) }

// String formats t like a Duration since the start of the run.
func (t Time) String() string { return Duration(t).String() }

// Us returns d in microseconds as a float, for reporting only.
func (d Duration) Us() float64 { return float64(d) / float64(Microsecond) }

// Ns returns d in nanoseconds as a float, for reporting only.
func (d Duration) Ns() float64 { return float64(d) / float64(Nanosecond) }

// Seconds returns d in seconds as a float, for reporting only.
func (d Duration) Seconds() float64 { return float64(d) / float64(Second) }

// String formats d with the largest unit that keeps it readable, exactly
// (e.g. "1.28ns", "16.7us", "0s").
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	neg := d < 0
	u := uint64(d)
	if neg {
		u = -u
	}
	var unit string
	var div uint64
	switch {
	case u < uint64(Nanosecond):
		unit, div = "ps", 1
	case u < uint64(Microsecond):
		unit, div = "ns", uint64(Nanosecond)
	case u < uint64(Millisecond):
		unit, div = "us", uint64(Microsecond)
	case u < uint64(Second):
		unit, div = "ms", uint64(Millisecond)
	default:
		unit, div = "s", uint64(Second)
	}
	s := strconv.FormatUint(u/div, 10)
	if frac := u % div; frac != 0 {
		fs := fmt.Sprintf("%0*d", len(strconv.FormatUint(div, 10))-1, frac)
		for fs[len(fs)-1] == '0' {
			fs = fs[:len(fs)-1]
		}
		s += "." + fs
	}
	if neg {
		s = "-" + s
	}
	return s + unit
}

// Bytes is a size in bytes.
type Bytes int64

// Common sizes.
const (
	B   Bytes = 1
	KiB       = 1024 * B
	MiB       = 1024 * KiB
	GiB       = 1024 * MiB
)

// BitRate is a data rate in bits per second. Rates are integers so that
// serialisation delays are exact.
type BitRate int64

// Common rates.
const (
	BitPerSecond BitRate = 1
	Kbps                 = 1000 * BitPerSecond
	Mbps                 = 1000 * Kbps
	Gbps                 = 1000 * Mbps
)

// GBps returns a rate of n gigabytes (1e9 B) per second.
func GBps(n int64) BitRate { return BitRate(n * 8 * int64(Gbps)) }

// TxTime returns the time to serialise n bytes at rate r, rounded up to a
// whole picosecond. It is exact (128-bit intermediate) and never drifts:
// TxTime(a)+TxTime(b) differs from TxTime(a+b) by at most 1ps. It panics if
// r <= 0 or n < 0.
func (r BitRate) TxTime(n Bytes) Duration {
	if r <= 0 {
		panic(fmt.Sprintf("sim: TxTime at non-positive rate %d bit/s", int64(r)))
	}
	if n < 0 {
		panic(fmt.Sprintf("sim: TxTime of negative size %d B", int64(n)))
	}
	// ps = ceil(n * 8e12 / r)
	hi, lo := bits.Mul64(uint64(n), 8*uint64(Second))
	q, rem := bits.Div64(hi, lo, uint64(r))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		panic("sim: TxTime overflow")
	}
	return Duration(q)
}

// BytesIn returns how many whole bytes rate r carries in d (rounded down).
func (r BitRate) BytesIn(d Duration) Bytes {
	if r <= 0 || d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), uint64(r))
	q, _ := bits.Div64(hi, lo, 8*uint64(Second))
	return Bytes(q)
}

// GBps returns r in gigabytes (1e9 B) per second, for reporting only.
func (r BitRate) GBps() float64 { return float64(r) / 8e9 }

// String formats r in Gb/s.
func (r BitRate) String() string {
	return strconv.FormatFloat(float64(r)/1e9, 'g', -1, 64) + "Gb/s"
}
