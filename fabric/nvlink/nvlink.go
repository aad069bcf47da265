package nvlink

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/fabric/link"
	"github.com/ginsim/ginsim/sim"
)

// Config holds the NVLink timing parameters. DefaultConfig is an HGX H100
// or H200 node: NVLink 4. The latencies and the packet efficiency were
// measured on two H200s joined by 18 NVLink 4 links
// (validate/gpumicro, `ginsim validate gpu`): see each field.
type Config struct {
	// PortRate is one GPU's NVLink bandwidth per direction: H100 and H200
	// have 18 NVLink 4 links of 25 GB/s each way, 450 GB/s = 3.6 Tb/s.
	PortRate sim.BitRate
	// MaxPayload is the data carried by one NVLink packet: 128 B, the
	// cache line an SM's stores and loads move.
	MaxPayload sim.Bytes
	// PacketOverhead is the non-data bytes of one packet: two 16-B flits
	// (the header and the address/byte-enable flit), so a 128-B line
	// moves 160 B and the data rate is 80% of PortRate, 360 GB/s. Every SM
	// of an H200 writing or reading its peer measured 371 and 374 GB/s
	// (and copy engines 397 GB/s).
	PacketOverhead sim.Bytes
	// Latency is one traversal of a request or a response between one
	// GPU's SMs and another GPU's L2, including both GPUs' crossbars: a
	// load of the peer's memory (an L2 hit there) measured 855 ns, two
	// traversals and MemReadLatency. A posted write's acknowledgement
	// takes one traversal back, which a system-scope fence waits for.
	Latency sim.Duration
	// WriteLatency is what a posted write takes beyond Latency to be
	// visible in the peer's L2: a relaxed store measured 774 ns from
	// issue to a peer's poll seeing it, 613 ns without the poll's
	// detection, where a read's request leg takes 350.
	WriteLatency sim.Duration
	// MemReadLatency is the peer's service time of a read or an atomic at
	// its L2: 855 ns for a remote load less two traversals; a dependent
	// remote atomicAdd measured 882 ns.
	MemReadLatency sim.Duration
}

// DefaultConfig returns the H100/H200 NVLink 4 configuration.
func DefaultConfig() Config {
	return Config{
		PortRate:       sim.GBps(450),
		MaxPayload:     128,
		PacketOverhead: 32,
		Latency:        350 * sim.Nanosecond,
		WriteLatency:   260 * sim.Nanosecond,
		MemReadLatency: 155 * sim.Nanosecond,
	}
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case c.PortRate <= 0:
		return fmt.Errorf("nvlink: PortRate %v must be positive", c.PortRate)
	case c.MaxPayload <= 0:
		return fmt.Errorf("nvlink: MaxPayload %d must be positive", c.MaxPayload)
	case c.PacketOverhead < 0:
		return fmt.Errorf("nvlink: PacketOverhead %d must not be negative", c.PacketOverhead)
	case c.Latency < 0 || c.WriteLatency < 0 || c.MemReadLatency < 0:
		return fmt.Errorf("nvlink: latencies must not be negative")
	}
	return nil
}

// Domain is the NVSwitch domain of one node: a non-blocking switch with one
// egress and one ingress pipe per GPU.
type Domain struct {
	s   *sim.Sim
	cfg Config
	out []link.Pipe // GPU -> NVSwitch
	in  []link.Pipe // NVSwitch -> GPU
}

// NewDomain returns a domain of gpus GPUs, numbered from 0. It panics on an
// invalid configuration (check user input with Config.Validate).
func NewDomain(s *sim.Sim, cfg Config, gpus int) *Domain {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	d := &Domain{s: s, cfg: cfg, out: make([]link.Pipe, gpus), in: make([]link.Pipe, gpus)}
	for i := range gpus {
		g := strconv.Itoa(i)
		d.out[i] = link.Pipe{Name: "nvlink/gpu" + g + "/tx", Rate: cfg.PortRate, Latency: cfg.Latency, Backfill: true}
		d.in[i] = link.Pipe{Name: "nvlink/gpu" + g + "/rx", Rate: cfg.PortRate, Backfill: true}
	}
	return d
}

// Config returns the domain's parameters.
func (d *Domain) Config() Config { return d.cfg }

// GPUs returns the number of GPUs in the domain.
func (d *Domain) GPUs() int { return len(d.out) }

func (d *Domain) check(at sim.Time, a, b int, what string) {
	if at < d.s.Now() {
		panic(fmt.Sprintf("nvlink: t=%v: %s issued in the past (at=%v)", d.s.Now(), what, at))
	}
	if a < 0 || a >= len(d.out) || b < 0 || b >= len(d.out) {
		panic(fmt.Sprintf("nvlink: t=%v: %s between GPUs %d and %d of a %d-GPU domain", d.s.Now(), what, a, b, len(d.out)))
	}
}

// packets returns the wire bytes of the first packet, of all and of the
// last for n bytes of data.
func (d *Domain) packets(n sim.Bytes) (first, total, last sim.Bytes, count int64) {
	o, m := d.cfg.PacketOverhead, d.cfg.MaxPayload
	if n <= 0 {
		return o, o, o, 1
	}
	count = int64((n + m - 1) / m)
	return min(n, m) + o, n + sim.Bytes(count)*o, n - sim.Bytes(count-1)*m + o, count
}

// move streams a packet train from GPU a to GPU b: egress, switch, ingress.
// The ports arbitrate by readiness (link.Pipe.Backfill): a response
// reserved for when a remote atomic or read will have been served does not
// hold up the port for packets ready before it. posted marks writes: as on
// PCIe, nothing later from GPU a passes a's earlier write on either port,
// so a flag stored after data lands after it.
func (d *Domain) move(at, lastReady sim.Time, a, b int, posted bool, first, total, last sim.Bytes) sim.Time {
	now := d.s.Now()
	eg, ig := &d.out[a], &d.in[b]
	eg.Forget(now)
	ig.Forget(now)
	start, end := eg.ReserveOrdered(int32(a), posted, at, total, lastReady.Add(eg.Rate.TxTime(last)))
	ready := start.Add(eg.Rate.TxTime(first) + d.cfg.Latency)
	_, end = ig.ReserveOrdered(int32(a), posted, ready, total, end.Add(d.cfg.Latency+ig.Rate.TxTime(last)))
	return end
}

// Write issues a store or copy of n bytes from GPU from into GPU to's memory
// at time at (>= now) and returns when the last byte has landed: the
// packet train's arrival plus WriteLatency. The acknowledgement of the
// last byte is back at the writer Latency later (Acked). A write to the
// GPU itself does not use NVLink and lands at once.
func (d *Domain) Write(at sim.Time, from, to int, n sim.Bytes) sim.Time {
	d.check(at, from, to, "write")
	if from == to {
		return at
	}
	first, total, last, _ := d.packets(n)
	return d.move(at, at, from, to, true, first, total, last).Add(d.cfg.WriteLatency)
}

// ReadRoundTrip is the unloaded time of a read of n bytes: the request's
// and the response's traversals, the peer's service time and the
// response's packets on the wire.
func (d *Domain) ReadRoundTrip(n sim.Bytes) sim.Duration {
	_, total, _, _ := d.packets(n)
	return 2*d.cfg.Latency + d.cfg.MemReadLatency + d.cfg.PortRate.TxTime(total)
}

// Acked returns when the acknowledgement of a write that landed at landed
// is back at the writer: what a system-scope fence after it waits for.
func (d *Domain) Acked(landed sim.Time) sim.Time { return landed.Add(d.cfg.Latency) }

// Read issues a read by GPU requester of n bytes of GPU target's memory at
// time at (>= now): one request packet per MaxPayload bytes goes out, the
// target answers after its memory latency. It returns when the last byte
// has arrived at the requester.
func (d *Domain) Read(at sim.Time, requester, target int, n sim.Bytes) sim.Time {
	d.check(at, requester, target, "read")
	if requester == target {
		return at
	}
	o := d.cfg.PacketOverhead
	_, _, _, count := d.packets(n)
	// The request train: its first packet arrives one packet time plus
	// latency after it starts; the last one when the train has passed.
	now := d.s.Now()
	eg, ig := &d.out[requester], &d.in[target]
	eg.Forget(now)
	ig.Forget(now)
	start, _ := eg.ReserveOrdered(int32(requester), false, at, sim.Bytes(count)*o, 0)
	rs, re := ig.ReserveOrdered(int32(requester), false, start.Add(eg.Rate.TxTime(o)+d.cfg.Latency), sim.Bytes(count)*o, 0)
	firstReq := rs.Add(ig.Rate.TxTime(o))
	first, total, last, _ := d.packets(n)
	return d.move(firstReq.Add(d.cfg.MemReadLatency), re.Add(d.cfg.MemReadLatency), target, requester, false, first, total, last)
}

// Atomic issues an 8-byte atomic by GPU requester on GPU target's memory at
// time at (>= now). It returns when the operation is applied at the target
// and when the response is back at the requester.
func (d *Domain) Atomic(at sim.Time, requester, target int) (applied, done sim.Time) {
	d.check(at, requester, target, "atomic")
	if requester == target {
		return at, at
	}
	p := 8 + d.cfg.PacketOverhead
	arrive := d.move(at, at, requester, target, false, p, p, p)
	applied = arrive.Add(d.cfg.MemReadLatency)
	return applied, d.move(applied, applied, target, requester, false, p, p, p)
}

// Port returns the accounting of GPU g's port: out (egress to the
// NVSwitch) and in.
func (d *Domain) Port(g int) (out, in link.Stats) { return d.out[g].Stats(), d.in[g].Stats() }

// Stats returns the accounting of every port: for each GPU its egress then
// its ingress.
func (d *Domain) Stats() []link.Stats {
	out := make([]link.Stats, 0, 2*len(d.out))
	for i := range d.out {
		out = append(out, d.out[i].Stats(), d.in[i].Stats())
	}
	return out
}
