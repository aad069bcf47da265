package fabric

import (
	"reflect"
	"testing"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
)

// partLeafSpine builds 2 leaves of 3 endpoints each joined by 2 spines, with
// small ECN-marking buffers: on a lone Sim (w nil) or over w's partitions,
// endpoint e on partition e % parts.
func partLeafSpine(s *sim.Sim, w *sim.World) *Network {
	var n *Network
	if w != nil {
		n = NewPartitioned(w, Config{})
	} else {
		n = New(s, Config{})
	}
	sc := SwitchConfig{Latency: 300 * sim.Nanosecond, CutThrough: true, PortBuffer: 40 << 10,
		ECN: ECNConfig{Enabled: true, Kmin: 8 << 10, Kmax: 32 << 10, Pmax: 0.5}}
	host := LinkConfig{Rate: 100 * sim.Gbps, Prop: 10 * sim.Nanosecond}
	core := LinkConfig{Rate: 100 * sim.Gbps, Prop: 100 * sim.Nanosecond}
	var leaves []NodeID
	for l := range 2 {
		leaves = append(leaves, n.AddSwitch("leaf"+string(rune('0'+l)), sc))
	}
	for sp := range 2 {
		x := n.AddSwitch("spine"+string(rune('0'+sp)), sc)
		for _, l := range leaves {
			if _, err := n.Connect(l, x, core); err != nil {
				panic(err)
			}
		}
	}
	for e := range 6 {
		id := n.AddEndpoint("ep" + string(rune('0'+e)))
		if w != nil {
			n.Place(id, e%w.Parts())
		}
		if _, err := n.Connect(n.Node(id), leaves[e/3], host); err != nil {
			panic(err)
		}
	}
	if err := n.Build(); err != nil {
		panic(err)
	}
	return n
}

// partRun sends, from every endpoint, bursts to every other endpoint (an
// incast on each leaf's downlinks: queues, ECN marks and drops), with a
// spine link down for a while, and returns what every endpoint received,
// without packet IDs, and the port counters.
func partRun(t *testing.T, parts, workers int) ([][]rx, []PortStats, *Network) {
	t.Helper()
	cfg := sim.Config{Seed: 5}
	var s *sim.Sim
	var w *sim.World
	if parts == 0 {
		s = sim.New(cfg)
	} else {
		w = sim.NewWorld(cfg, parts, 310*sim.Nanosecond)
		if workers > 1 {
			w.SetExec(func(n int, f func(int)) { // goroutines, as a pool would
				done := make(chan struct{})
				for i := range n {
					go func() { f(i); done <- struct{}{} }()
				}
				for range n {
					<-done
				}
			})
		}
	}
	n := partLeafSpine(s, w)
	if la, ok := n.Lookahead(); !ok || la != 310*sim.Nanosecond {
		t.Fatalf("lookahead %v %v", la, ok)
	}
	k := bindSinks(n)
	n.SetLinkDown(0, sim.Time(20*sim.Microsecond), sim.Time(30*sim.Microsecond))
	for e := range 6 {
		src := EndpointID(e)
		es := n.SimOf(src)
		for i := range 40 {
			es.At(sim.Time(sim.Duration(i)*sim.Microsecond+sim.Duration(e)*7*sim.Nanosecond), func() {
				for d := range 6 {
					if d == e {
						continue
					}
					p := n.NewPacketAt(src, 4096, false)
					p.Src, p.Dst, p.SrcPort, p.Tag, p.ECN = src, EndpointID(d), uint16(i%4+1), uint64(e<<16|i<<8|d), 2
					p.Hdr.Opcode = roce.OpWriteMiddle
					n.Send(p)
				}
			})
		}
	}
	var err error
	if w != nil {
		err = w.Run()
	} else {
		err = s.Run()
	}
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]rx, len(k))
	for i, x := range k {
		for _, r := range x.got {
			r.id = 0
			got[i] = append(got[i], r)
		}
	}
	st := make([]PortStats, n.Ports())
	for p := range st {
		st[p] = n.PortStats(PortID(p))
	}
	return got, st, n
}

// TestPartitionedNetwork checks a network spread over a World's
// partitions: every worker count gives the same deliveries and counters;
// one partition gives the lone network's; several give the same packets
// (their ECN marks come from other streams); ports have the owners the
// package documents and every packet went back to its pool.
func TestPartitionedNetwork(t *testing.T) {
	lone, loneSt, _ := partRun(t, 0, 0)
	one, oneSt, _ := partRun(t, 1, 1)
	if !reflect.DeepEqual(one, lone) || !reflect.DeepEqual(oneSt, loneSt) {
		t.Fatal("a World of one partition differs from the lone network")
	}
	var drops, marks uint64
	for _, st := range loneSt {
		drops, marks = drops+st.Drops+st.Lost, marks+st.ECNMarks
	}
	if drops == 0 || marks == 0 {
		t.Fatalf("the run drops %d and marks %d packets: it should do both", drops, marks)
	}
	ref, refSt, n := partRun(t, 4, 1)
	for _, workers := range []int{2, 4} {
		got, st, _ := partRun(t, 4, workers)
		if !reflect.DeepEqual(got, ref) || !reflect.DeepEqual(st, refSt) {
			t.Fatalf("%d workers changed the run", workers)
		}
	}
	var sent, recv, lost uint64
	for p, st := range refSt {
		from, to := n.PortEnds(PortID(p))
		if from >= 4 { // an endpoint's transmit port (switches are nodes 0-3)
			sent += st.Packets
		}
		if to >= 4 {
			recv += st.Packets
		}
		lost += st.Drops + st.Lost
	}
	delivered := uint64(0)
	for _, g := range ref {
		delivered += uint64(len(g))
	}
	if delivered != recv || sent != 6*5*40 || delivered+lost != sent {
		t.Fatalf("sent %d, delivered %d of %d put on endpoint links, lost %d", sent, delivered, recv, lost)
	}
	// Owners: endpoint links by the endpoint's partition, the 8 switch
	// links in turn.
	k := 0
	for p := range n.Ports() {
		from, to := n.PortEnds(PortID(p))
		want := -1
		switch {
		case from >= 4:
			want = int(from-4) % 4
		case to >= 4:
			want = int(to-4) % 4
		default:
			want = k % 4
			k++
		}
		if n.PortPart(PortID(p)) != want {
			t.Errorf("port %s on partition %d, want %d", n.PortName(PortID(p)), n.PortPart(PortID(p)), want)
		}
	}
	for _, q := range n.parts {
		alive := int(q.chunks-1)*chunkSize + int(q.used) - len(q.free)
		for _, r := range n.parts {
			alive -= len(r.ret[q.idx])
		}
		if alive != 0 || q.ids == 0 {
			t.Errorf("partition %d made %d packets and has %d alive", q.idx, q.ids, alive)
		}
	}
}

// TestPartitionedPacketIDs checks the per-partition packet numbering.
func TestPartitionedPacketIDs(t *testing.T) {
	w := sim.NewWorld(sim.Config{}, 3, 400*sim.Nanosecond)
	n := partLeafSpine(nil, w)
	var ids []uint64
	for _, e := range []EndpointID{0, 1, 2, 0, 4, 3} { // partitions 0 1 2 0 1 0
		ids = append(ids, n.NewPacketAt(e, 0, false).ID)
	}
	if want := []uint64{1, 2, 3, 4, 5, 7}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("packet IDs %v, want %v", ids, want)
	}
}
