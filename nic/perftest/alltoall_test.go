package perftest

import (
	"reflect"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/sim"
)

func smallFatTree() topo.Spec {
	return topo.Spec{Kind: topo.KindFatTree, K: 4, Nodes: 16, GPUsPerNode: 1, LinkGbps: 100, HostPropNs: 1000, FabricPropNs: 1000}
}

// TestAllToAll runs a 16-host all-to-all on a k=4 fat tree and checks the
// packet counts against the workload, the ACKs against the ACK policy, the
// hop counts against the tree's shape and that a rerun is identical.
func TestAllToAll(t *testing.T) {
	const size = 64 << 10 // 16 packets of 4 KiB
	for _, every := range []int{1, 0} {
		o := AllToAllOptions{Topo: smallFatTree(), Bytes: size, AckEvery: every, Seed: 1}
		r, err := AllToAll(o)
		if err != nil {
			t.Fatal(err)
		}
		s := r.Stats()
		t.Logf("ack-every %d: %d events, %d traversals, %d data, %d ACKs, %d CNPs, completion %v, fct %+v",
			every, r.Events, r.Traversals, r.DataPackets, r.ACKs, r.CNPs, r.Completion, s)
		if r.Flows != 16*15 || len(r.FCT) != r.Flows {
			t.Fatalf("flows %d", r.Flows)
		}
		if got, want := r.DataPackets, uint64(16*15*16); got != want {
			t.Errorf("data packets %d, want %d", got, want)
		}
		// Per source: 1 peer under its edge switch, 2 more in its pod and
		// 12 in other pods, 2, 4 and 6 links away. Data packets spread
		// evenly over the pairs; so do the ACKs when there is one per
		// message; a CNP crosses 2 to 6 links.
		perHost := uint64(1*2 + 2*4 + 12*6)
		lo, hi := r.DataPackets*perHost/15+2*(r.ACKs+r.CNPs), r.DataPackets*perHost/15+6*(r.ACKs+r.CNPs)
		if r.ACKs == uint64(r.Flows) {
			lo, hi = lo+r.ACKs*perHost/15-2*r.ACKs, hi+r.ACKs*perHost/15-6*r.ACKs
		}
		if r.Retransmits == 0 && (r.Traversals < lo || r.Traversals > hi) {
			t.Errorf("traversals %d, want [%d, %d]", r.Traversals, lo, hi)
		}
		if every == 1 && (r.ACKs < r.DataPackets/4 || r.ACKs > r.DataPackets) {
			t.Errorf("ack-every 1: %d ACKs for %d packets", r.ACKs, r.DataPackets)
		}
		if every == 0 && r.ACKs > r.DataPackets/8 {
			t.Errorf("default AckReqEvery: %d ACKs for %d packets", r.ACKs, r.DataPackets)
		}
		// 15 × 64 KiB leave each 100 Gb/s port: at least 78.6 us.
		if s.Max < 78*1000*1000 || r.Completion.Sub(0) < s.Max {
			t.Errorf("completion %v, max FCT %v", r.Completion, s.Max)
		}
		again, err := AllToAll(o)
		if err != nil {
			t.Fatal(err)
		}
		if again.Events != r.Events || again.Completion != r.Completion || again.Stats() != s {
			t.Errorf("rerun differs: %d/%v vs %d/%v", again.Events, again.Completion, r.Events, r.Completion)
		}
	}
}

// BenchmarkAllToAll16 is a 16-host, 64 KiB-per-pair all-to-all of RC QPs
// on a k=4 fat tree (100 Gb/s, 1 us links).
func BenchmarkAllToAll16(b *testing.B) {
	var ev, hops uint64
	b.ReportAllocs()
	for b.Loop() {
		r, err := AllToAll(AllToAllOptions{Topo: smallFatTree(), Bytes: 64 << 10, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		ev, hops = ev+r.Events, hops+r.Traversals
	}
	b.ReportMetric(float64(ev)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(hops)/b.Elapsed().Seconds(), "packet-hops/s")
}

// TestAlltoallWorkersDoNotChangeTheRun runs all-to-alls on a World, on a
// fat tree and a rail-optimised cluster (with small buffers: ECN marks,
// CNPs, drops and retransmits), partitioned per node and over 3
// partitions, on the sequential kernel, with the serial Exec and with pools
// of 1, 2 and 4 workers: the result (FCTs, packet counts, every port's
// counters, events, windows) and every packet each NIC sent, with its
// time, must be the same for every kernel and Exec. A World of one partition must give the lone Sim's result; the
// test reports how far other partitionings are from it.
func TestAlltoallWorkersDoNotChangeTheRun(t *testing.T) {
	tight := topo.SwitchSpec{PortBufferKiB: 48, ECNKminKiB: 8, ECNKmaxKiB: 32}
	rail := topo.Spec{Kind: topo.KindRail, Nodes: 4, GPUsPerNode: 4, Spines: 2, LinkGbps: 100, Switch: tight}
	fat := smallFatTree()
	fat.Switch = tight
	type sent struct {
		at       sim.Time
		id       uint64
		dst      fabric.EndpointID
		psn      uint32
		op       uint8
		ecn, cor bool
	}
	for _, c := range []struct {
		name  string
		spec  topo.Spec
		parts []int
	}{{"fattree", fat, []int{1, 16, 3}}, {"rail", rail, []int{4, 3}}} {
		lone, err := AllToAll(AllToAllOptions{Topo: c.spec, Bytes: 16 << 10, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, parts := range c.parts {
			var ref *AllToAllResult
			var refTap [][]sent
			for _, workers := range []int{0, -1, 1, 2, 4} {
				// 0: the serial Exec; -1: the sequential kernel.
				o := AllToAllOptions{Topo: c.spec, Bytes: 16 << 10, Seed: 3, Parts: parts, Sequential: workers < 0}
				if workers > 0 {
					p := par.NewPool(workers)
					defer p.Close()
					o.Exec = p.Exec
				}
				tap := make([][]sent, lone.Hosts)
				o.Tap = func(h int, at sim.Time, p *fabric.Packet) {
					tap[h] = append(tap[h], sent{at, p.ID, p.Dst, p.Hdr.PSN, uint8(p.Hdr.Opcode), p.ECN == 3, p.Corrupt})
				}
				r, err := AllToAll(o)
				if err != nil {
					t.Fatalf("%s parts %d workers %d: %v", c.name, parts, workers, err)
				}
				if r.Parts != parts || r.Windows == 0 {
					t.Fatalf("%s: %d partitions, %d windows", c.name, r.Parts, r.Windows)
				}
				if ref == nil {
					ref, refTap = r, tap
					ls, ws := lone.Stats(), r.Stats()
					t.Logf("%s parts %d: %d events (lone %d), %d windows, %d data, %d retransmits, %d drops, %d ECN marks, %d CNPs; mean FCT %v (lone %v), max %v (lone %v)",
						c.name, parts, r.Events, lone.Events, r.Windows, r.DataPackets, r.Retransmits, r.Drops, r.ECNMarks, r.CNPs, ws.Mean, ls.Mean, ws.Max, ls.Max)
					if parts == 1 {
						// One partition: the lone Sim's run, window by window.
						l := *lone
						l.Parts, l.Windows = r.Parts, r.Windows
						if !reflect.DeepEqual(r, &l) {
							t.Errorf("%s: a World of one partition differs from the lone Sim", c.name)
						}
					}
					if r.DataPackets != lone.DataPackets {
						t.Errorf("%s parts %d: %d data packets, the lone Sim %d", c.name, parts, r.DataPackets, lone.DataPackets)
					}
					continue
				}
				if !reflect.DeepEqual(r, ref) {
					t.Errorf("%s parts %d: %d workers changed the result:\n%+v\nvs\n%+v", c.name, parts, workers, r, ref)
				}
				if !reflect.DeepEqual(tap, refTap) {
					t.Errorf("%s parts %d: %d workers changed the packets sent", c.name, parts, workers)
				}
			}
		}
	}
}

// BenchmarkAllToAllKernels runs a 64-host, 64 KiB-per-pair all-to-all on
// a k=8 fat tree (100 Gb/s, 1 us links) on the sequential kernel and on
// Worlds of 1, 2 and 64 partitions (one per host), with 1 worker and with
// every core, side by side.
func BenchmarkAllToAllKernels(b *testing.B) {
	spec := topo.Spec{Kind: topo.KindFatTree, Nodes: 64, GPUsPerNode: 1, LinkGbps: 100, HostPropNs: 1000, FabricPropNs: 1000}
	for _, c := range []struct {
		name           string
		parts, workers int
	}{{"lone", 0, 0}, {"parts1", 1, 1}, {"parts2", 2, 1}, {"parts2-all", 2, -1}, {"parts64", 64, 1}, {"parts64-all", 64, -1}} {
		b.Run(c.name, func(b *testing.B) {
			o := AllToAllOptions{Topo: spec, Bytes: 64 << 10, Seed: 1, Parts: c.parts}
			if c.workers != 0 {
				p := par.NewPool(max(c.workers, 0))
				defer p.Close()
				o.Exec = p.Exec
			}
			var ev uint64
			for b.Loop() {
				r, err := AllToAll(o)
				if err != nil {
					b.Fatal(err)
				}
				ev += r.Events
			}
			b.ReportMetric(float64(ev)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
