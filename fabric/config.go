package fabric

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// Config holds network-wide settings.
type Config struct {
	// IPv6 frames RoCEv2 over IPv6 (40 B IP header) instead of IPv4 (20 B):
	// it changes every packet's wire length.
	IPv6 bool
}

// SwitchConfig holds the parameters of one switch. Every egress port of the
// switch gets the same buffer and ECN settings.
type SwitchConfig struct {
	// Latency is the port-to-port forwarding latency without queueing:
	// 300 ns stands for a 400G/800G data-centre Ethernet switch in
	// cut-through mode (vendors quote 200-600 ns).
	Latency sim.Duration
	// CutThrough forwards a packet once its head has arrived (plus
	// Latency) instead of after its last bit: data-centre switches cut
	// through when the egress port is free and as fast as the ingress.
	CutThrough bool
	// PortBuffer is the egress queue capacity of each port in wire bytes;
	// a packet that does not fit is dropped (drop-tail). 0 means
	// unbounded. 2 MiB stands for a port's share of a 100-200 MB shared
	// buffer under congestion; a shared-buffer pool is not modelled.
	PortBuffer sim.Bytes
	// ECN marks CE on ECN-capable packets as the egress queue grows.
	ECN ECNConfig
}

// ECNConfig is RED-style ECN marking as DCQCN uses it: no marking below
// Kmin bytes of egress backlog, probability rising linearly to Pmax at
// Kmax, and every ECN-capable packet marked above Kmax.
type ECNConfig struct {
	Enabled bool
	// Kmin is where marking starts: 128 KiB, about 2.6 µs of queue at
	// 400 Gb/s.
	Kmin sim.Bytes
	// Kmax is where marking becomes certain: 1 MiB.
	Kmax sim.Bytes
	// Pmax is the marking probability just below Kmax: 0.2.
	Pmax float64
}

// DefaultSwitchConfig returns a cut-through 400G-class data-centre switch
// with finite port buffers and DCQCN-style ECN marking on.
func DefaultSwitchConfig() SwitchConfig {
	return SwitchConfig{
		Latency:    300 * sim.Nanosecond,
		CutThrough: true,
		PortBuffer: 2 * sim.MiB,
		ECN:        ECNConfig{Enabled: true, Kmin: 128 * sim.KiB, Kmax: 1 * sim.MiB, Pmax: 0.2},
	}
}

// Validate reports the first invalid parameter.
func (c SwitchConfig) Validate() error {
	switch {
	case c.Latency < 0:
		return fmt.Errorf("fabric: switch Latency %v must not be negative", c.Latency)
	case c.PortBuffer < 0:
		return fmt.Errorf("fabric: switch PortBuffer %d must not be negative", c.PortBuffer)
	case c.ECN.Enabled && (c.ECN.Kmin < 0 || c.ECN.Kmax < c.ECN.Kmin):
		return fmt.Errorf("fabric: ECN thresholds Kmin=%d Kmax=%d: need 0 <= Kmin <= Kmax", c.ECN.Kmin, c.ECN.Kmax)
	case c.ECN.Enabled && (c.ECN.Pmax < 0 || c.ECN.Pmax > 1):
		return fmt.Errorf("fabric: ECN Pmax %g must be in [0,1]", c.ECN.Pmax)
	}
	return nil
}

// LinkConfig holds the parameters of a full-duplex link; both directions
// are equal.
type LinkConfig struct {
	// Rate is the line rate per direction, e.g. 400 Gb/s for a ConnectX-7
	// port.
	Rate sim.BitRate
	// Prop is the propagation delay: about 5 ns per metre of fibre or
	// copper; 10 ns stands for a 2 m in-rack cable, 100 ns+ for
	// leaf-to-spine optics across rows.
	Prop sim.Duration
}

// Validate reports the first invalid parameter.
func (c LinkConfig) Validate() error {
	if c.Rate <= 0 {
		return fmt.Errorf("fabric: link Rate %v must be positive", c.Rate)
	}
	if c.Prop < 0 {
		return fmt.Errorf("fabric: link Prop %v must not be negative", c.Prop)
	}
	return nil
}

// Faults are seeded impairments of a link direction. Each applies
// independently to every packet put on the link.
type Faults struct {
	Loss      float64      // probability a packet is lost on the wire
	Corrupt   float64      // probability its bits are flipped (Packet.Corrupt; the receiver's ICRC check fails)
	Duplicate float64      // probability a copy is delivered too (serialised right behind it)
	Jitter    sim.Duration // extra delay drawn uniformly from [0, Jitter]: reorders packets
}

// Active reports whether any impairment is set.
func (f Faults) Active() bool {
	return f.Loss > 0 || f.Corrupt > 0 || f.Duplicate > 0 || f.Jitter > 0
}

// Validate reports the first invalid parameter.
func (f Faults) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", f.Loss}, {"Corrupt", f.Corrupt}, {"Duplicate", f.Duplicate}} {
		if p.v < 0 || p.v > 1 {
			return fmt.Errorf("fabric: fault %s=%g must be a probability in [0,1]", p.name, p.v)
		}
	}
	if f.Jitter < 0 {
		return fmt.Errorf("fabric: fault Jitter %v must not be negative", f.Jitter)
	}
	return nil
}
