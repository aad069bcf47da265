package fabric

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/sim"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files under testdata")

// incastLog runs a small leaf/spine incast with every mechanism on (ECMP,
// cut-through, finite buffers, ECN, loss, corruption, duplication, jitter)
// and returns the packet log: every transmission on every port, every drop
// and every delivery.
func incastLog(t *testing.T, seed uint64) string {
	s := sim.New(sim.Config{Seed: seed})
	n := New(s, Config{})
	lc := LinkConfig{Rate: 400 * sim.Gbps, Prop: 50 * sim.Nanosecond}
	sc := SwitchConfig{Latency: 300 * sim.Nanosecond, CutThrough: true, PortBuffer: 8 * 1024,
		ECN: ECNConfig{Enabled: true, Kmin: 2 * 1024, Kmax: 6 * 1024, Pmax: 0.5}}
	leaves := [2]NodeID{n.AddSwitch("leaf0", sc), n.AddSwitch("leaf1", sc)}
	for l, lf := range leaves {
		for e := range 3 {
			if _, err := n.Connect(n.Node(n.AddEndpoint(fmt.Sprintf("h%d%d", l, e))), lf, lc); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 2 {
		sp := n.AddSwitch(fmt.Sprint("spine", i), sc)
		for _, lf := range leaves {
			l, err := n.Connect(lf, sp, lc)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.SetLinkFaults(l, Faults{Loss: 0.03, Corrupt: 0.03, Duplicate: 0.03, Jitter: 100 * sim.Nanosecond}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.Build(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for p := range n.Ports() {
		name := n.PortName(PortID(p))
		n.SetTap(PortID(p), p, func(_ int, at sim.Time, pk *Packet) {
			fmt.Fprintf(&b, "%v tx %s pkt=%d tag=%d ecn=%d\n", at, name, pk.ID, pk.Tag, pk.ECN)
		})
	}
	n.SetDropHook(func(p PortID, at sim.Time, pk *Packet, why DropReason) {
		fmt.Fprintf(&b, "%v drop %s pkt=%d tag=%d %v\n", at, n.PortName(p), pk.ID, pk.Tag, why)
	})
	k := bindSinks(n)
	// Three senders: h00 and h01 on leaf0 and h11 on leaf1, into h10.
	for i := range 8 {
		for _, src := range []EndpointID{0, 1, 4} {
			p := mtuPacket(n, src, 3, uint16(50000+i%2+int(src)*7), uint64(int(src)*100+i))
			p.ECN = 2
			p.PayloadLen = 1024
			n.Send(p)
		}
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	for _, r := range k[3].got {
		fmt.Fprintf(&b, "%v rx h10 pkt=%d tag=%d ecn=%d corrupt=%v hops=%d\n", r.at, r.id, r.tag, r.ecn, r.corrupt, r.hops)
	}
	return b.String()
}

func TestGoldenIncast(t *testing.T) {
	got := incastLog(t, 42)
	if again := incastLog(t, 42); again != got {
		t.Fatal("same seed produced different packet logs")
	}
	if other := incastLog(t, 43); other == got {
		t.Fatal("seeds 42 and 43 produced identical logs: faults or ECMP ignore the seed")
	}
	path := filepath.Join("testdata", "incast.golden")
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create)", err)
	}
	if got != string(want) {
		t.Fatalf("packet log differs from %s (rerun with -rewrite if the change is intended):\n%s", path, firstDiff(string(want), got))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n want %q\n got  %q", i+1, x, y)
		}
	}
	return ""
}
