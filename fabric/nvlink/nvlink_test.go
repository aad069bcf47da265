package nvlink

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
)

func TestWriteBandwidth(t *testing.T) {
	c := DefaultConfig()
	d := NewDomain(sim.New(sim.Config{}), c, 8)
	n := sim.Bytes(16 << 20)
	got := d.Write(0, 0, 1, n)
	wire := n + (n/c.MaxPayload)*c.PacketOverhead
	want := sim.Time(0).Add(c.PortRate.TxTime(wire) + c.Latency + c.PortRate.TxTime(c.MaxPayload+c.PacketOverhead))
	if got != want {
		t.Fatalf("16 MiB write done at %v, want %v", got, want)
	}
	gbs := float64(n) / got.Sub(0).Seconds() / 1e9
	if gbs < 420 || gbs > 425 {
		t.Fatalf("NVLink write bandwidth %.1f GB/s, want ~423 (450 GB/s × 256/272)", gbs)
	}
}

func TestIngressContention(t *testing.T) {
	c := DefaultConfig()
	d := NewDomain(sim.New(sim.Config{}), c, 8)
	n := sim.Bytes(1 << 20)
	a := d.Write(0, 1, 0, n)
	b := d.Write(0, 2, 0, n) // same target: shares GPU 0's ingress
	wire := n + (n/c.MaxPayload)*c.PacketOverhead
	if b.Sub(a) != c.PortRate.TxTime(wire) {
		t.Fatalf("second writer into GPU 0 finished %v later, want %v", b.Sub(a), c.PortRate.TxTime(wire))
	}
	e := d.Write(0, 3, 4, n) // disjoint pair: non-blocking switch
	if e != a {
		t.Fatalf("disjoint pair finished at %v, want %v like the first", e, a)
	}
}

func TestReadAndAtomicLatency(t *testing.T) {
	c := DefaultConfig()
	d := NewDomain(sim.New(sim.Config{}), c, 8)
	got := d.Read(0, 0, 5, 8)
	tx := c.PortRate.TxTime
	want := sim.Time(0).Add(2*tx(c.PacketOverhead) + c.Latency + c.MemReadLatency + 2*tx(8+c.PacketOverhead) + c.Latency)
	if got != want {
		t.Fatalf("8 B remote read back at %v, want %v", got, want)
	}
	applied, done := d.Atomic(0, 2, 3)
	oneWay := 2*tx(8+c.PacketOverhead) + c.Latency
	if applied != sim.Time(0).Add(oneWay+c.MemReadLatency) || done != applied.Add(oneWay) {
		t.Fatalf("atomic applied %v done %v", applied, done)
	}
}
