package fabric

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
)

// sink is a test endpoint that records what it receives.
type sink struct {
	n   *Network
	got []rx
}

type rx struct {
	at      sim.Time
	id      uint64
	tag     uint64
	src     EndpointID
	ecn     uint8
	corrupt bool
	hops    int
}

func (k *sink) Receive(p *Packet) {
	k.got = append(k.got, rx{k.n.SimOf(p.Dst).Now(), p.ID, p.Tag, p.Src, p.ECN, p.Corrupt, p.Hops()})
	k.n.Free(p)
}

func bindSinks(n *Network) []*sink {
	out := make([]*sink, n.Endpoints())
	for i := range out {
		out[i] = &sink{n: n}
		n.Bind(EndpointID(i), out[i])
	}
	return out
}

// mtuPacket returns a 4096-byte RDMA WRITE middle packet from src to dst.
func mtuPacket(n *Network, src, dst EndpointID, sport uint16, tag uint64) *Packet {
	p := n.NewPacket(4096, false)
	p.Src, p.Dst, p.SrcPort, p.Tag = src, dst, sport, tag
	p.Hdr.Opcode = roce.OpWriteMiddle
	return p
}

func TestSerialisationExact(t *testing.T) {
	s := sim.New(sim.Config{})
	rate := 400 * sim.Gbps
	n := NewSingleSwitch(s, 2, rate, 10*sim.Nanosecond)
	k := bindSinks(n)
	const N = 1000
	var last sim.Time
	for i := range N {
		last = n.Send(mtuPacket(n, 0, 1, 1, uint64(i)))
	}
	w := mtuPacket(n, 0, 1, 1, 0).WireLen(false)
	// 400 Gb/s is 20 ps per byte: the sum is exact, no rounding.
	if want := sim.Time(N * int64(w) * 20); last != want {
		t.Fatalf("%d back-to-back packets of %d B leave at %v, want %v", N, w, last, want)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	tx := rate.TxTime(w)
	for i, r := range k[1].got {
		if want := sim.Time(0).Add(sim.Duration(i+2)*tx + 20*sim.Nanosecond); r.at != want || r.hops != 2 {
			t.Fatalf("packet %d received at %v after %d hops, want %v after 2", i, r.at, r.hops, want)
		}
	}
	if len(k[1].got) != N {
		t.Fatalf("received %d packets, want %d", len(k[1].got), N)
	}
}

func TestTwoSendersQueue(t *testing.T) {
	s := sim.New(sim.Config{})
	rate := 400 * sim.Gbps
	prop := 10 * sim.Nanosecond
	n := NewSingleSwitch(s, 3, rate, prop)
	k := bindSinks(n)
	n.Send(mtuPacket(n, 0, 2, 1, 0))
	n.Send(mtuPacket(n, 1, 2, 1, 1))
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	tx := rate.TxTime(mtuPacket(n, 0, 1, 1, 0).WireLen(false))
	g := k[2].got
	if len(g) != 2 || g[0].at != sim.Time(2*tx+2*prop) || g[1].at != sim.Time(3*tx+2*prop) {
		t.Fatalf("incast arrivals %+v, want at %v and %v", g, 2*tx+2*prop, 3*tx+2*prop)
	}
	// The switch's egress to endpoint 2 serialised both and queued the
	// second behind the first; the senders' own ports queue nothing.
	for p := range n.Ports() {
		from, to := n.PortEnds(PortID(p))
		st := n.PortStats(PortID(p))
		switch {
		case to == n.Node(2):
			if st.Busy != 2*tx || st.Wait != tx || st.MaxWait != 2*tx {
				t.Errorf("egress to 2: busy %v wait %v max %v, want %v, %v, %v", st.Busy, st.Wait, st.MaxWait, 2*tx, tx, 2*tx)
			}
		case from == n.Node(0) || from == n.Node(1):
			if st.Busy != tx || st.Wait != 0 {
				t.Errorf("sender port %s: busy %v wait %v, want %v, 0", n.PortName(PortID(p)), st.Busy, st.Wait, tx)
			}
		}
		if n.PortRate(PortID(p)) != rate {
			t.Errorf("port %d rate %v", p, n.PortRate(PortID(p)))
		}
	}
}

func TestCutThroughLatency(t *testing.T) {
	for _, cut := range []bool{false, true} {
		s := sim.New(sim.Config{})
		n := New(s, Config{})
		sw := n.AddSwitch("sw", SwitchConfig{Latency: 300 * sim.Nanosecond, CutThrough: cut})
		lc := LinkConfig{Rate: 400 * sim.Gbps, Prop: 10 * sim.Nanosecond}
		for i := range 2 {
			if _, err := n.Connect(n.Node(n.AddEndpoint(fmt.Sprint("ep", i))), sw, lc); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Build(); err != nil {
			t.Fatal(err)
		}
		k := bindSinks(n)
		n.Send(mtuPacket(n, 0, 1, 1, 0))
		n.Send(mtuPacket(n, 0, 1, 1, 1))
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		tx := lc.Rate.TxTime(mtuPacket(n, 0, 1, 1, 0).WireLen(false))
		want := 2*tx + 2*lc.Prop + 300*sim.Nanosecond
		if cut {
			want -= tx
		}
		if k[1].got[0].at != sim.Time(want) || k[1].got[1].at != sim.Time(want+tx) {
			t.Errorf("cut=%v: arrivals %v %v, want %v %v", cut, k[1].got[0].at, k[1].got[1].at, want, want+tx)
		}
	}
}

// twoRate builds ep0 --400G-- sw --100G-- ep1 with the given switch.
func twoRate(t *testing.T, cfg SwitchConfig) (*Network, []*sink) {
	t.Helper()
	s := sim.New(sim.Config{Seed: 1})
	n := New(s, Config{})
	sw := n.AddSwitch("sw", cfg)
	for i, r := range []sim.BitRate{400 * sim.Gbps, 100 * sim.Gbps} {
		if _, err := n.Connect(n.Node(n.AddEndpoint(fmt.Sprint("ep", i))), sw, LinkConfig{Rate: r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Build(); err != nil {
		t.Fatal(err)
	}
	return n, bindSinks(n)
}

func TestBufferOverflowDropsTail(t *testing.T) {
	w := sim.Bytes(4178) // wire bytes of a 4096 B WRITE middle over IPv4
	n, k := twoRate(t, SwitchConfig{PortBuffer: 2 * w})
	if got := mtuPacket(n, 0, 1, 1, 0).WireLen(false); got != w {
		t.Fatalf("wire length %d, want %d", got, w)
	}
	var drops []uint64
	n.SetDropHook(func(_ PortID, _ sim.Time, p *Packet, why DropReason) {
		if why != DropBuffer {
			t.Errorf("drop reason %v", why)
		}
		drops = append(drops, p.Tag)
	})
	for i := range 10 {
		n.Send(mtuPacket(n, 0, 1, 1, uint64(i+1)))
	}
	if err := n.Sim().Run(); err != nil {
		t.Fatal(err)
	}
	// Packets arrive every t and drain every 4t: packet k finds
	// (freeAt-kt)/4t packets queued. 1, 2 fit; 3, 4 find 1.5 and 1.25
	// queued; 5 finds exactly 1; then every fourth fits.
	var got []uint64
	for _, r := range k[1].got {
		got = append(got, r.tag)
	}
	if fmt.Sprint(got) != "[1 2 5 9]" || fmt.Sprint(drops) != "[3 4 6 7 8 10]" {
		t.Fatalf("delivered %v dropped %v, want [1 2 5 9] and [3 4 6 7 8 10]", got, drops)
	}
	var st PortStats
	for p := range n.Ports() {
		if _, to := n.PortEnds(PortID(p)); to == n.Node(1) {
			st = n.PortStats(PortID(p))
		}
	}
	if st.Drops != 6 || st.Packets != 4 || st.MaxQueue != 2*w {
		t.Fatalf("port stats %+v, want 6 drops, 4 packets, max queue %d", st, 2*w)
	}
}

func TestECNMarking(t *testing.T) {
	w := sim.Bytes(4178)
	cfg := SwitchConfig{ECN: ECNConfig{Enabled: true, Kmin: 4 * w, Kmax: 40 * w, Pmax: 0.5}}
	n, k := twoRate(t, cfg)
	for i := range 400 {
		p := mtuPacket(n, 0, 1, 1, uint64(i))
		p.ECN = 2
		if i%2 == 1 {
			p.ECN = 0 // not ECN-capable: never marked
		}
		n.Send(p)
	}
	if err := n.Sim().Run(); err != nil {
		t.Fatal(err)
	}
	// Packet i arrives to a backlog of 3i/4 packets (minus the one in
	// service): none marked up to Kmin, all ECT ones above Kmax.
	var marked, between, betweenMarked int
	for _, r := range k[1].got {
		q := float64(r.tag) * 3 / 4
		switch {
		case r.tag%2 == 1 && r.ecn != 0:
			t.Fatalf("non-ECT packet %d has ECN %d", r.tag, r.ecn)
		case r.tag%2 == 1:
		case q < 4 && r.ecn == 3:
			t.Fatalf("packet %d marked below Kmin", r.tag)
		case q > 42 && r.ecn != 3:
			t.Fatalf("packet %d not marked above Kmax", r.tag)
		case q > 5 && q < 38:
			between++
			if r.ecn == 3 {
				betweenMarked++
			}
		}
		if r.ecn == 3 {
			marked++
		}
	}
	if between == 0 || betweenMarked == 0 || betweenMarked == between {
		t.Fatalf("between Kmin and Kmax %d of %d marked: want a fraction", betweenMarked, between)
	}
	var st PortStats
	for p := range n.Ports() {
		st.ECNMarks += n.PortStats(PortID(p)).ECNMarks
	}
	if st.ECNMarks != uint64(marked) {
		t.Fatalf("ECNMarks %d, want %d", st.ECNMarks, marked)
	}
}

// leafSpine builds 2 leaves × spines with eps endpoints per leaf.
func leafSpine(t testing.TB, seed uint64, spines, eps int) (*Network, []*sink) {
	t.Helper()
	s := sim.New(sim.Config{Seed: seed})
	n := New(s, Config{})
	lc := LinkConfig{Rate: 400 * sim.Gbps, Prop: 100 * sim.Nanosecond}
	sc := DefaultSwitchConfig()
	var leaves [2]NodeID
	for l := range leaves {
		leaves[l] = n.AddSwitch(fmt.Sprint("leaf", l), sc)
		for e := range eps {
			if _, err := n.Connect(n.Node(n.AddEndpoint(fmt.Sprintf("l%de%d", l, e))), leaves[l], lc); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range spines {
		sp := n.AddSwitch(fmt.Sprint("spine", i), sc)
		for _, l := range leaves {
			if _, err := n.Connect(l, sp, lc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.Build(); err != nil {
		t.Fatal(err)
	}
	return n, bindSinks(n)
}

// spineLoad sends one packet on each of 256 flows from leaf 0 to leaf 1 and
// returns how many packets each leaf0->spine port carried.
func spineLoad(t *testing.T, seed uint64) []uint64 {
	n, k := leafSpine(t, seed, 4, 2)
	for f := range 256 {
		n.Send(mtuPacket(n, 0, 2, uint16(49152+f), 0))
	}
	if err := n.Sim().Run(); err != nil {
		t.Fatal(err)
	}
	if len(k[2].got) != 256 || k[2].got[0].hops != 4 {
		t.Fatalf("got %d packets with %d hops", len(k[2].got), k[2].got[0].hops)
	}
	var out []uint64
	for p := range n.Ports() {
		from, to := n.PortEnds(PortID(p))
		if n.NodeName(from) == "leaf0" && strings.HasPrefix(n.NodeName(to), "spine") {
			out = append(out, n.PortStats(PortID(p)).Packets)
		}
	}
	return out
}

func TestECMPSpreadsAndIsDeterministic(t *testing.T) {
	a := spineLoad(t, 7)
	for i, c := range a {
		if c < 40 || c > 90 { // 64 expected; binomial sd ~7
			t.Fatalf("seed 7: spine %d carried %d of 256 flows: %v", i, c, a)
		}
	}
	if b := spineLoad(t, 7); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different spreads: %v vs %v", a, b)
	}
	if c := spineLoad(t, 8); fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("seeds 7 and 8 spread flows identically: %v", a)
	}
}

func TestFaultRates(t *testing.T) {
	const N = 20000
	for _, c := range []struct {
		name string
		f    Faults
	}{
		{"loss", Faults{Loss: 0.05}},
		{"corrupt", Faults{Corrupt: 0.1}},
		{"duplicate", Faults{Duplicate: 0.02}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := NewSingleSwitch(sim.New(sim.Config{Seed: 3}), 2, 400*sim.Gbps, 0)
			k := bindSinks(n)
			if err := n.SetFaults(n.EndpointPort(0), c.f); err != nil {
				t.Fatal(err)
			}
			for i := range N {
				n.Send(mtuPacket(n, 0, 1, 1, uint64(i)))
			}
			if err := n.Sim().Run(); err != nil {
				t.Fatal(err)
			}
			var corrupt int
			for _, r := range k[1].got {
				if r.corrupt {
					corrupt++
				}
			}
			var got, p float64
			switch {
			case c.f.Loss > 0:
				got, p = float64(N-len(k[1].got))/N, c.f.Loss
			case c.f.Corrupt > 0:
				got, p = float64(corrupt)/N, c.f.Corrupt
			default:
				got, p = float64(len(k[1].got)-N)/N, c.f.Duplicate
			}
			if sd := math.Sqrt(p * (1 - p) / N); math.Abs(got-p) > 4*sd {
				t.Fatalf("rate %.4f, want %.4f ± %.4f", got, p, 4*sd)
			}
		})
	}
}

func TestJitterReorders(t *testing.T) {
	n := NewSingleSwitch(sim.New(sim.Config{Seed: 3}), 2, 400*sim.Gbps, 0)
	k := bindSinks(n)
	j := 2 * sim.Microsecond
	if err := n.SetFaults(n.EndpointPort(0), Faults{Jitter: j}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		n.Send(mtuPacket(n, 0, 1, 1, uint64(i)))
	}
	if err := n.Sim().Run(); err != nil {
		t.Fatal(err)
	}
	tx := n.LinkRate(0).TxTime(4178)
	var reordered int
	for i, r := range k[1].got {
		if i > 0 && r.tag < k[1].got[i-1].tag {
			reordered++
		}
		if lo := sim.Time(sim.Duration(r.tag+2) * tx); r.at < lo {
			t.Fatalf("packet %d arrived at %v before its jitter-free time %v", r.tag, r.at, lo)
		}
	}
	if len(k[1].got) != 200 || reordered == 0 {
		t.Fatalf("%d packets, %d reordered: want all, some reordered", len(k[1].got), reordered)
	}
}

func TestLinkDown(t *testing.T) {
	s := sim.New(sim.Config{})
	n := NewSingleSwitch(s, 2, 400*sim.Gbps, 0)
	k := bindSinks(n)
	var lost []uint64
	n.SetDropHook(func(_ PortID, _ sim.Time, p *Packet, why DropReason) {
		if why == DropLinkDown {
			lost = append(lost, p.Tag)
		}
	})
	// ep1's link (link 1) is down from 1us to 2us.
	n.SetLinkDown(1, sim.Time(sim.Microsecond), sim.Time(2*sim.Microsecond))
	for i := range 30 {
		s.At(sim.Time(sim.Duration(i)*100*sim.Nanosecond), func() { n.Send(mtuPacket(n, 0, 1, 1, uint64(i))) })
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	// Packet i leaves the switch at i*100ns + 83.56ns: 10..19 meet the down link.
	if fmt.Sprint(lost) != "[10 11 12 13 14 15 16 17 18 19]" || len(k[1].got) != 20 {
		t.Fatalf("lost %v, received %d", lost, len(k[1].got))
	}
	if !n.LinkUp(1) {
		t.Fatal("link 1 still down")
	}
}

// TestSetLinkRate degrades ep1's link to a quarter of the rate: the switch
// egress towards ep1 then serialises every packet at 100 Gb/s, so the
// stream drains at that rate, while the sender's own link is unchanged.
func TestSetLinkRate(t *testing.T) {
	s := sim.New(sim.Config{})
	n := NewSingleSwitch(s, 2, 400*sim.Gbps, 0)
	k := bindSinks(n)
	if err := n.SetLinkRate(1, 100*sim.Gbps); err != nil {
		t.Fatal(err)
	}
	if err := n.SetLinkRate(1, 0); err == nil {
		t.Fatal("SetLinkRate accepted a zero rate")
	}
	if got := n.LinkRate(1); got != 100*sim.Gbps {
		t.Fatalf("LinkRate(1) = %v after degrading it", got)
	}
	const N = 50
	var last sim.Time
	for i := range N {
		last = n.Send(mtuPacket(n, 0, 1, 1, uint64(i)))
	}
	w := mtuPacket(n, 0, 1, 1, 0).WireLen(false)
	if want := sim.Time(N * int64(w) * 20); last != want {
		t.Fatalf("sender's link: last bit leaves at %v, want %v (400 Gb/s)", last, want)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	got := k[1].got
	if len(got) != N {
		t.Fatalf("received %d packets, want %d", len(got), N)
	}
	if gap, want := got[N-1].at.Sub(got[N-2].at), (100 * sim.Gbps).TxTime(w); gap != want {
		t.Fatalf("arrivals %v apart, want %v (100 Gb/s)", gap, want)
	}
}

// TestLookahead checks the least link-plus-switch delay on topologies whose
// value follows from their configuration.
func TestLookahead(t *testing.T) {
	build := func(f func(n *Network)) *Network {
		n := New(sim.New(sim.Config{}), Config{})
		f(n)
		if err := n.Build(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	link := func(n *Network, a, b NodeID, prop sim.Duration) {
		if _, err := n.Connect(a, b, LinkConfig{Rate: 400 * sim.Gbps, Prop: prop}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		n    *Network
		want sim.Duration
		ok   bool
	}{
		{"single switch", build(func(n *Network) {
			sw := n.AddSwitch("sw", SwitchConfig{Latency: 300 * sim.Nanosecond, CutThrough: true})
			for i := range 3 {
				link(n, n.Node(n.AddEndpoint(fmt.Sprint("ep", i))), sw, 10*sim.Nanosecond)
			}
		}), 310 * sim.Nanosecond, true},
		// ep->leaf 50+200, leaf->spine 20+100, spine->leaf 20+200.
		{"two tiers", build(func(n *Network) {
			spine := n.AddSwitch("spine", SwitchConfig{Latency: 100 * sim.Nanosecond})
			for l := range 2 {
				leaf := n.AddSwitch(fmt.Sprint("leaf", l), SwitchConfig{Latency: 200 * sim.Nanosecond})
				link(n, leaf, spine, 20*sim.Nanosecond)
				for i := range 2 {
					link(n, n.Node(n.AddEndpoint(fmt.Sprint("ep", l, i))), leaf, 50*sim.Nanosecond)
				}
			}
		}), 120 * sim.Nanosecond, true},
		{"no switch", build(func(n *Network) {
			link(n, n.Node(n.AddEndpoint("a")), n.Node(n.AddEndpoint("b")), 5*sim.Nanosecond)
		}), 0, false},
	} {
		if d, ok := c.n.Lookahead(); d != c.want || ok != c.ok {
			t.Errorf("%s: Lookahead() = %v, %v; want %v, %v", c.name, d, ok, c.want, c.ok)
		}
	}
}
