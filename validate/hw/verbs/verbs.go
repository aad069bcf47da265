package verbs

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// The cases, named as the model's `ginsim bench` commands are.
const (
	CaseWriteLat  = "write_lat"
	CaseWriteBW   = "write_bw"
	CaseAtomicLat = "atomic_lat"
)

// Cases lists the cases in the order `--case all` runs them.
var Cases = []string{CaseWriteLat, CaseWriteBW, CaseAtomicLat}

var (
	// ErrNotBuilt is returned by a binary built without -tags verbs.
	ErrNotBuilt = errors.New("this ginsim was built without ibverbs support: on a machine with libibverbs-dev " +
		"(Debian: apt-get install libibverbs-dev), rebuild with `go build -tags verbs ./cmd/ginsim`")
	// ErrNoDevice is returned when libibverbs lists no RDMA device.
	ErrNoDevice = errors.New("no RDMA device: ibv_get_device_list found none (is the NIC's driver loaded? " +
		"`ibv_devices` lists them; soft-RoCE: `rdma link add rxe0 type rxe netdev ETH`)")
)

// Options configures a hardware run.
type Options struct {
	Case    string  // one of Cases
	Sizes   []int64 // message sizes in bytes (atomic_lat: ignored, 8)
	Iters   int     // iterations per size (0: 1000)
	TxDepth int     // outstanding WRITEs of write_bw (0: 128)
	Device  string  // device name (ibv_devices); "" means the first
	Port    int     // port number (0: 1)
	// GIDIndex selects the source GID on RoCE ports (perftest -x); -1
	// picks index 0 on RoCE and none on InfiniBand.
	GIDIndex int
	// Server, if set, is the TCP address to listen on for one client;
	// Connect, if set, the server to connect to. Neither: loopback.
	Server, Connect string
	// Timeout bounds every wait: for a completion, for a peer's write to
	// land, for the TCP peer. 0 means 10 s.
	Timeout time.Duration
}

// Placement names where the two QPs are.
func (o *Options) Placement() string {
	switch {
	case o.Server != "":
		return "server"
	case o.Connect != "":
		return "client"
	}
	return "loopback"
}

// Check validates o and fills defaults.
func (o *Options) Check() error {
	if !slices.Contains(Cases, o.Case) {
		return fmt.Errorf("case %q: want one of %v", o.Case, Cases)
	}
	if o.Server != "" && o.Connect != "" {
		return errors.New("--server and --connect exclude each other")
	}
	if o.Case == CaseAtomicLat {
		o.Sizes = []int64{8}
	}
	if len(o.Sizes) == 0 {
		return errors.New("no sizes")
	}
	for _, s := range o.Sizes {
		if s < 1 || s > 1<<30 {
			return fmt.Errorf("size %d: want 1 B to 1 GiB", s)
		}
	}
	if o.Iters == 0 {
		o.Iters = 1000
	}
	if o.Iters < 1 || o.Iters > 1<<24 {
		return fmt.Errorf("iters %d: want 1 to %d", o.Iters, 1<<24)
	}
	if o.TxDepth == 0 {
		o.TxDepth = 128
	}
	if o.TxDepth < 1 || o.TxDepth > 8192 {
		return fmt.Errorf("tx depth %d: want 1 to 8192", o.TxDepth)
	}
	if o.Port == 0 {
		o.Port = 1
	}
	if o.Port < 1 || o.Port > 255 {
		return fmt.Errorf("port %d: want 1 to 255", o.Port)
	}
	if o.GIDIndex < -1 || o.GIDIndex > 255 {
		return fmt.Errorf("gid index %d: want -1 to 255", o.GIDIndex)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return nil
}

// MaxSize is the largest size, the buffer each side registers.
func (o *Options) MaxSize() int64 { return max(slices.Max(o.Sizes), 8) }

// Row is one measured size. Latencies are per iteration as perftest
// reports them: write_lat half the round trip, atomic_lat the full round
// trip, write_bw the time per message at the achieved rate.
type Row struct {
	Case          string  `json:"case"`
	Bytes         int64   `json:"bytes"`
	Iters         int     `json:"iters"`
	AvgUs         float64 `json:"avg_us"`
	MinUs         float64 `json:"min_us,omitempty"`
	MedianUs      float64 `json:"median_us,omitempty"`
	P99Us         float64 `json:"p99_us,omitempty"`
	MaxUs         float64 `json:"max_us,omitempty"`
	BandwidthGBps float64 `json:"bandwidth_GBps"`
}

// latencyRow summarises per-iteration samples in nanoseconds.
func latencyRow(c string, size int64, ns []float64) Row {
	s := slices.Clone(ns)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	avg := sum / float64(len(s))
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)] / 1e3
	}
	bytes := float64(size)
	return Row{Case: c, Bytes: size, Iters: len(s), AvgUs: avg / 1e3, MinUs: s[0] / 1e3, MedianUs: q(0.5),
		P99Us: q(0.99), MaxUs: s[len(s)-1] / 1e3, BandwidthGBps: bytes / avg}
}

// bandwidthRow is write_bw's row: iters messages of size bytes in ns.
func bandwidthRow(size int64, iters int, ns float64) Row {
	return Row{Case: CaseWriteBW, Bytes: size, Iters: iters, AvgUs: ns / float64(iters) / 1e3,
		BandwidthGBps: float64(size) * float64(iters) / ns}
}

// Run runs o's case on the hardware.
func Run(o Options) ([]Row, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	return run(&o)
}
