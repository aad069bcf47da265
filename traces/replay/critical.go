package replay

import (
	"strconv"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces/critpath"
	"github.com/ginsim/ginsim/traces/workload"
)

// stepObs is a step's observation: one bus that the fabric, every NIC,
// every communicator's front end and backends emit into, with the
// critical-path tracker (traces/critpath) on it and, with Options.Check,
// the semantic checker.
type stepObs struct {
	bus *obs.Bus
	trk *critpath.Tracker
}

func newStepObs(m *machine.Machine, w *sim.World) *stepObs {
	trk := critpath.NewTracker()
	trk.Signals = true // a receiver waits on signals: data-only puts are never its op
	// One bus per partition, merged after every window: the tracker and
	// every other subscriber see one stream. The merge and the
	// subscribers run beside the next window (their stream is complete
	// when the World's Run returns): every subscriber of a step's bus
	// (the tracker, the checker, the timeline's detail, the workloads'
	// packet counts) reads the events alone.
	so := &stepObs{bus: obs.SplitOverlapped(w, trk), trk: trk}
	m.SetObserver(so.bus)
	return so
}

// comm wires a new communicator and its backends to the bus.
func (so *stepObs) comm(c *gin.Comm, bs map[gin.Type]gin.Backend) {
	c.SetObserver(so.bus)
	for _, t := range []gin.Type{gin.TypeGDAKI, gin.TypeProxy} {
		if o, ok := bs[t].(check.Observable); ok {
			o.SetObserver(so.bus)
		}
	}
}

// critical is a phase's critical path: its breakdown, where its signal
// went, and the instants the timeline draws.
type critical struct {
	b workload.Breakdown
	c *workload.Crossing
	// slow is the rank that finished last; from the sender of its last
	// signal. With a GIN op (op), the op was called at call, its
	// descriptor and doorbell were out at issued and its effect applied
	// at effect; the receiver saw it at seen and finished at done.
	slow, from                 int
	op                         bool
	call, issued, effect, seen sim.Time
	done                       sim.Time
	valid                      bool
}

// criticalOf computes ph's critical path: the op that released the
// slowest rank's last receiver, as the tracker followed it, and the
// resources of the phase (res: all of them, ids: the ports' names).
func criticalOf(e *workload.Env, ph *workload.Phase, trk *critpath.Tracker, res []machine.Resource,
	ids []machine.PortID) critical {
	us := func(d sim.Duration) float64 { return round3(d.Us()) }
	slow, end := ph.Slowest(), ph.End()
	cr := critical{slow: slow, done: end}
	b := &cr.b
	b.TotalUS = us(end.Sub(ph.Start))
	s := ph.Last[slow]
	if !s.Valid {
		b.GPUIssueUS = b.TotalUS
		return cr
	}
	cr.valid, cr.from = true, s.From
	// Milestones in path order, each clamped into [previous, end]: a part
	// is the difference of two, so the parts add up to the phase time.
	cur := ph.Start
	to := func(part *float64, t sim.Time) {
		t = min(max(t, cur), end)
		*part += us(t.Sub(cur))
		cur = t
	}
	row, ok := trk.Row(s.Op)
	// A word's last op is found by its region's name: an op between other
	// ranks would be another communicator's like-named word.
	ok = ok && row.Peer == s.To
	cr.c = &workload.Crossing{From: s.From, To: s.To, Via: "nvlink"}
	if s.From == s.To {
		cr.c.Via = "local"
	}
	if ok {
		cr.op, cr.call = true, row.Start
		P := &row.Phases
		t := row.Start.Add(P[critpath.Issue])
		to(&b.GPUIssueUS, t)
		if row.Proxy {
			t = t.Add(P[critpath.Descriptor])
			to(&b.PCIeUS, t)
		} else {
			t = t.Add(P[critpath.Descriptor])
			to(&b.GPUIssueUS, t)
		}
		cr.issued = cur
		t = t.Add(P[critpath.Proxy])
		to(&b.ProxyUS, t)
		t = t.Add(P[critpath.Doorbell] + P[critpath.Fetch] + P[critpath.Payload])
		to(&b.PCIeUS, t)
		t = t.Add(P[critpath.NIC])
		to(&b.NICUS, t)
		t = t.Add(P[critpath.Wire])
		to(&b.WireUS, t)
		to(&b.RemoteWriteUS, row.Effect())
		cr.effect = cur
		cr.c.Via = "rdma"
		cr.c.Links, b.Bound = bindParts(e, &row, b, res, ids)
	}
	to(&b.SignalSeenUS, s.At)
	cr.seen = cur
	to(&b.ReceiverUS, end)
	return cr
}

// resKey names a resource of a phase.
type resKey struct {
	kind machine.Kind
	name string
	dir  string
}

// bindParts names the NIC ports the op's path left and reached and, for
// each part of the breakdown that crossed shared resources, the busiest
// of those it crossed over the phase.
func bindParts(e *workload.Env, row *critpath.Row, b *workload.Breakdown, res []machine.Resource,
	ids []machine.PortID) ([]string, *workload.PartBound) {
	util := make(map[resKey]float64, len(res))
	for _, r := range res {
		util[resKey{r.Kind, r.Name, r.Dir}] = r.Util
	}
	busiest := func(ks []resKey) *workload.ResourceUse {
		var u *workload.ResourceUse
		for _, k := range ks {
			if v, ok := util[k]; ok && (u == nil || v > u.Util) {
				u = &workload.ResourceUse{Kind: string(k.kind), Name: k.name, Dir: k.dir, Util: round3(v)}
			}
		}
		return u
	}
	m := e.M
	src, dst := -1, -1
	for i, n := range m.NICs {
		if n.Name() == row.NIC {
			src = i
		}
		if int(n.Endpoint()) == row.DstEP {
			dst = i
		}
	}
	if src < 0 || dst < 0 {
		return nil, nil
	}
	// The PCIe links on each side: the rank's GPU's, the NIC's and the
	// uplink of the NIC's switch (host memory: the proxy's GFDs and SQ).
	pcie := func(rank, ni int) []resKey {
		rk, n := m.Ranks[rank], m.NICs[ni]
		g := "n" + strconv.Itoa(rk.Node) + "/gpu" + strconv.Itoa(rk.Local)
		t := m.PCIe[rk.Node]
		sw := t.SwitchName(t.Switch(n.Dev()))
		var ks []resKey
		for _, d := range []string{"up", "down"} {
			ks = append(ks, resKey{machine.KindGPUPCIe, g, d}, resKey{machine.KindNICPCIe, n.Name(), d},
				resKey{machine.KindPCIeSwitch, sw, d})
		}
		return ks
	}
	pb := &workload.PartBound{}
	if b.PCIeUS > 0 {
		pb.PCIe = busiest(pcie(row.Rank, src))
	}
	if b.NICUS > 0 {
		pb.NIC = busiest([]resKey{{machine.KindNIC, m.NICs[src].Name(), "tx"}})
	}
	if b.WireUS > 0 {
		var ks []resKey
		for _, p := range row.Ports {
			if p < len(ids) {
				ks = append(ks, resKey{ids[p].Kind, ids[p].Name, ids[p].Dir})
			}
		}
		pb.Wire = busiest(ks)
	}
	if b.RemoteWriteUS > 0 {
		pb.RemoteWrite = busiest(pcie(row.Peer, dst))
	}
	links := []string{portName(e, m.NICs[src].Endpoint()), portName(e, m.NICs[dst].Endpoint())}
	return links, pb
}

// portName is a NIC port's name in a faults section: rankR/nicJ, J its
// index among rank R's ports.
func portName(e *workload.Env, ep fabric.EndpointID) string {
	r, j := e.EPRank[ep], 0
	for x := range ep {
		if e.EPRank[x] == r {
			j++
		}
	}
	return "rank" + strconv.Itoa(r) + "/nic" + strconv.Itoa(j)
}
