package pcie

import (
	"testing"

	"github.com/ginsim/ginsim/sim"
)

// node0 builds host <- sw0 <- {gpu0, nic0}, sw1 <- {gpu1, nic1}.
func node0(t *testing.T) (*Tree, Config, [4]DevID) {
	t.Helper()
	cfg := DefaultConfig()
	tr := NewTree(sim.New(sim.Config{}), cfg)
	s0, s1 := tr.AddSwitch("sw0"), tr.AddSwitch("sw1")
	return tr, cfg, [4]DevID{tr.AddDevice("gpu0", s0), tr.AddDevice("nic0", s0), tr.AddDevice("gpu1", s1), tr.AddDevice("nic1", s1)}
}

func TestHops(t *testing.T) {
	tr, _, d := node0(t)
	for _, c := range []struct {
		a, b DevID
		want int
	}{{d[0], d[1], 2}, {d[1], tr.Host(), 2}, {tr.Host(), d[3], 2}, {d[0], d[3], 4}, {d[2], d[2], 0}} {
		if got := tr.Hops(c.a, c.b); got != c.want {
			t.Errorf("Hops(%s,%s)=%d, want %d", tr.Name(c.a), tr.Name(c.b), got, c.want)
		}
	}
}

func TestMMIODoorbell(t *testing.T) {
	tr, c, d := node0(t)
	tx := c.LinkRate.TxTime(8 + c.TLPOverhead)
	want := sim.Time(0).Add(c.RootComplexLatency + tx + c.LinkLatency + c.SwitchLatency + tx + c.LinkLatency)
	if got := tr.Write(0, tr.Host(), d[1], 8); got != want {
		t.Fatalf("CPU doorbell lands at %v, want %v", got, want)
	}
	// GPU -> NIC doorbell under the same switch: no root complex.
	tr, c, d = node0(t)
	want = sim.Time(0).Add(tx + c.LinkLatency + c.SwitchLatency + tx + c.LinkLatency)
	if got := tr.Write(0, d[0], d[1], 8); got != want {
		t.Fatalf("GPU doorbell lands at %v, want %v", got, want)
	}
	if want > 300*sim.Time(sim.Nanosecond) || want < 150*sim.Time(sim.Nanosecond) {
		t.Fatalf("GPU->NIC MMIO latency %v outside the plausible 150-300ns", want)
	}
}

func TestDMARead4KiB(t *testing.T) {
	tr, c, d := node0(t)
	o := c.TLPOverhead
	r := c.LinkRate
	// 8 read requests (MRRS 512) up two links; the first reaches the root
	// complex after one TLP on each link plus link+switch and link+RC.
	reqFirst := r.TxTime(o) + c.LinkLatency + c.SwitchLatency + r.TxTime(o) + c.LinkLatency + c.RootComplexLatency
	// 16 completions of 256 B + overhead stream back, cut through the switch.
	cpl := 4096 + 16*o
	want := sim.Time(0).Add(reqFirst + c.HostMemReadLatency + r.TxTime(cpl) + c.LinkLatency + c.SwitchLatency + r.TxTime(256+o) + c.LinkLatency)
	got := tr.Read(0, d[1], tr.Host(), 4096)
	if got != want {
		t.Fatalf("4 KiB DMA read done at %v, want %v", got, want)
	}
	if got < sim.Time(600*sim.Nanosecond) || got > sim.Time(900*sim.Nanosecond) {
		t.Fatalf("4 KiB host read %v outside the plausible 0.6-0.9us", got)
	}
	st := tr.Stats()
	// sw0 down link carried exactly the completions.
	if st[1].Bytes != cpl || st[0].Bytes != 8*o {
		t.Fatalf("sw0 link bytes up=%d down=%d, want %d and %d", st[0].Bytes, st[1].Bytes, 8*o, cpl)
	}
}

func TestTwoReadersContend(t *testing.T) {
	tr, c, d := node0(t)
	n := sim.Bytes(64 * 1024)
	a := tr.Read(0, d[0], tr.Host(), n)
	b := tr.Read(0, d[1], tr.Host(), n)
	cpl := n + (n/c.MaxPayload)*c.TLPOverhead
	if b.Sub(a) != c.LinkRate.TxTime(cpl) {
		t.Fatalf("second reader finished %v after the first, want one completion train %v", b.Sub(a), c.LinkRate.TxTime(cpl))
	}
	// Readers under different switches do not contend (no root complex limit).
	tr, _, d = node0(t)
	a = tr.Read(0, d[0], tr.Host(), n)
	b = tr.Read(0, d[2], tr.Host(), n)
	if a != b {
		t.Fatalf("independent readers finished at %v and %v", a, b)
	}
}

func TestWriteBandwidth(t *testing.T) {
	tr, c, d := node0(t)
	n := sim.Bytes(1 << 20)
	got := tr.Write(0, d[1], d[0], n) // NIC -> GPU, P2P under one switch
	wire := n + (n/c.MaxPayload)*c.TLPOverhead
	want := sim.Time(0).Add(c.LinkRate.TxTime(wire) + c.LinkLatency + c.SwitchLatency + c.LinkRate.TxTime(c.MaxPayload+c.TLPOverhead) + c.LinkLatency)
	if got != want {
		t.Fatalf("1 MiB P2P write done at %v, want %v", got, want)
	}
	gbps := float64(n) / got.Sub(0).Seconds() / 1e9
	if gbps < 55 || gbps > 58 {
		t.Fatalf("effective write bandwidth %.1f GB/s, want ~57 (256 B MPS efficiency on Gen5 x16)", gbps)
	}
}

func TestAtomic(t *testing.T) {
	tr, c, d := node0(t)
	applied, done := tr.Atomic(0, d[1], d[0])
	tx := c.LinkRate.TxTime(8 + c.TLPOverhead)
	oneWay := 2*tx + 2*c.LinkLatency + c.SwitchLatency
	if applied != sim.Time(0).Add(oneWay+c.DevMemReadLatency) || done != applied.Add(oneWay) {
		t.Fatalf("atomic applied %v done %v, want %v and %v", applied, done, oneWay+c.DevMemReadLatency, 2*oneWay+c.DevMemReadLatency)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.MaxPayload = 0
	if err := c.Validate(); err == nil {
		t.Fatal("MaxPayload 0 accepted")
	}
}
