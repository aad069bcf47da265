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
	want := sim.Time(0).Add(c.PortRate.TxTime(wire) + c.Latency + c.PortRate.TxTime(c.MaxPayload+c.PacketOverhead) + c.WriteLatency)
	if got != want {
		t.Fatalf("16 MiB write done at %v, want %v", got, want)
	}
	gbs := float64(n) / got.Sub(0).Seconds() / 1e9
	if gbs < 350 || gbs > 362 {
		t.Fatalf("NVLink write bandwidth %.1f GB/s, want ~360 (450 GB/s × 128/160)", gbs)
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

// An atomic into a GPU whose ingress is busy gets its response reserved on
// the target's egress for when it will have been applied. Packets the
// target sends before then go first: the reservation for later does not
// hold the port (it did when ports served calls in order, and a burst of
// atomics then convoyed, one round trip each).
func TestFutureResponseDoesNotHoldPort(t *testing.T) {
	c := DefaultConfig()
	d := NewDomain(sim.New(sim.Config{}), c, 8)
	// GPU 0's ingress: ~10 us of data; its last packet has passed the
	// port WriteLatency before it lands.
	busy := d.Write(0, 2, 0, 4<<20).Add(-c.WriteLatency)
	at := sim.Time(sim.Microsecond)
	applied, done := d.Atomic(at, 1, 0)
	if applied < busy {
		t.Fatalf("atomic applied at %v, before the ingress backlog ends at %v", applied, busy)
	}
	w := d.Write(at, 0, 3, 256)
	if w >= applied {
		t.Fatalf("GPU 0's 256 B write ready at 1 us landed at %v: it waited for the atomic response reserved at %v", w, applied)
	}
	// Atomics from GPU 1 to GPU 3 are not held up by the response either.
	_, done2 := d.Atomic(at, 1, 3)
	if done2 >= done {
		t.Fatalf("second atomic done %v, not before the first's %v", done2, done)
	}
}

// A GPU's writes keep their order: a small write (a flag) issued after a
// large one to the same GPU lands after it, even though the port could
// fit it earlier.
func TestWritesFromOneGPUStayOrdered(t *testing.T) {
	c := DefaultConfig()
	d := NewDomain(sim.New(sim.Config{}), c, 8)
	d.Write(0, 2, 1, 1<<20)         // GPU 1's ingress busy first
	data := d.Write(0, 0, 1, 1<<20) // queued behind it at the ingress
	flag := d.Write(0, 0, 1, 8)
	if flag <= data {
		t.Fatalf("flag landed at %v, data at %v: the flag passed the data", flag, data)
	}
}

// ReadRoundTrip is an unloaded Read without the request packets' wire
// time: two traversals, the service time and the response on the wire.
func TestReadRoundTrip(t *testing.T) {
	c := DefaultConfig()
	for _, n := range []sim.Bytes{8, 128, 512, 16 << 10} {
		d := NewDomain(sim.New(sim.Config{}), c, 2)
		got := d.ReadRoundTrip(n)
		read := d.Read(0, 0, 1, n).Sub(0)
		req := 2 * c.PortRate.TxTime(c.PacketOverhead) // the first request packet, out and in
		if got > read || read-got > req+c.PortRate.TxTime(c.MaxPayload+c.PacketOverhead) {
			t.Errorf("%d B: round trip %v, an unloaded Read %v", n, got, read)
		}
		if want := 2*c.Latency + c.MemReadLatency; got < want {
			t.Errorf("%d B: round trip %v below the latencies %v", n, got, want)
		}
	}
}
