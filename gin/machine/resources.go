package machine

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/link"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
)

// Kind says what a Resource is. The order of the constants is the order
// of a sorted snapshot.
type Kind string

// Resource kinds.
const (
	// KindNIC is a NIC's network port: Dir "tx" is its transmit direction
	// (NIC to switch), "rx" the switch's egress towards it.
	KindNIC Kind = "nic"
	// KindGPUPCIe is a GPU's PCIe link to its switch: Dir "up" carries
	// what leaves the GPU (a NIC's read of GPU memory returns this way),
	// "down" what enters it (a NIC's writes into GPU memory).
	KindGPUPCIe Kind = "gpu-pcie"
	// KindNICPCIe is a NIC's PCIe link to its switch: "up" carries the
	// NIC's writes and read requests, "down" its read completions.
	KindNICPCIe Kind = "nic-pcie"
	// KindPCIeSwitch is a PCIe switch's uplink to the root complex (host
	// memory, the proxy's doorbells and GDRCopy traffic).
	KindPCIeSwitch Kind = "pcie-switch"
	// KindNVLink is a GPU's NVLink port: "out" to the NVSwitch, "in" from it.
	KindNVLink Kind = "nvlink"
	// KindSwitch is a network switch's egress port towards another switch.
	KindSwitch Kind = "switch"
	// KindCPU is a host CPU thread (a proxy progress thread).
	KindCPU Kind = "cpu"
)

var kindOrder = []Kind{KindNIC, KindGPUPCIe, KindNICPCIe, KindPCIeSwitch, KindNVLink, KindSwitch, KindCPU}

// Resource is one link direction, port or thread of a built machine with
// its accounting over a span: cumulative since the machine was built in a
// Snapshot, the difference of two snapshots after Since.
type Resource struct {
	// Name names the device: "n0g1/nic0", "n0/gpu1", "leaf0->spine0",
	// "n0g1/proxy".
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Dir is the direction (see the Kind constants); empty for a thread.
	Dir string `json:"dir,omitempty"`
	// Rate is the line rate in bit/s (0 for a thread).
	Rate sim.BitRate `json:"rate_bps,omitempty"`
	// Bytes are the wire bytes carried (with the link's framing or TLP
	// overheads).
	Bytes sim.Bytes `json:"bytes"`
	// Busy is the time spent serialising (a thread: doing work).
	Busy sim.Duration `json:"busy_ps"`
	// Poll is a thread's time on passes that found nothing.
	Poll sim.Duration `json:"poll_ps,omitempty"`
	// Util is Busy over the span. A PCIe or NVLink transfer counts as
	// busy when it is reserved, which can be ahead of when it serialises,
	// so over a short span (a sampling interval) Util can exceed 1.
	Util float64 `json:"util"`
	// Transfers counts packets or reservations.
	Transfers uint64 `json:"transfers,omitempty"`
	// Wait sums the queueing delay the resource added to its transfers;
	// WaitMean is Wait per transfer. A NIC's tx port reports none: the NIC
	// paces itself to its port, so its queue is the send queues'.
	Wait     sim.Duration `json:"wait_ps,omitempty"`
	WaitMean sim.Duration `json:"wait_mean_ps,omitempty"`
	// WaitMax is the largest single queueing delay since the machine was
	// built (a maximum: Since keeps the later snapshot's).
	WaitMax sim.Duration `json:"wait_max_ps,omitempty"`
}

// Snapshot is the cumulative accounting of every resource at one instant.
type Snapshot struct {
	At        sim.Time   `json:"at_ps"`
	Resources []Resource `json:"resources"`
}

// Snapshot reads every resource's counters now: each NIC port both ways,
// each GPU's and NIC's PCIe link both ways, each PCIe switch's uplink,
// each NVLink port, each inter-switch port, and the given proxy threads
// (none: pass nil). Util is over the time since the machine was built
// (sim time 0). Resources are sorted by Kind, Name and Dir.
//
// On a World call it between runs (or from an OnWindow hook, as a Sampler
// does): it reads every partition's state, at the World's time.
func (m *Machine) Snapshot(threads []*proxy.Server) Snapshot {
	return m.snapshot(m.now(), threads)
}

// now returns the machine's time: its Sim's, or on a World the World's.
func (m *Machine) now() sim.Time {
	if m.World != nil {
		return m.World.Now()
	}
	return m.Sim.Now()
}

func (m *Machine) snapshot(now sim.Time, threads []*proxy.Server) Snapshot {
	span := sim.Duration(now)
	var rs []Resource
	g, k := m.Spec.GPUsPerNode, m.Spec.NICsPerGPU
	for p, id := range m.PortIDs() {
		r := portResource(m.Net, fabric.PortID(p))
		r.Name, r.Kind, r.Dir = id.Name, id.Kind, id.Dir
		rs = append(rs, r)
	}
	for n := range m.Nodes {
		t := m.PCIe[n]
		for sw := range t.Switches() {
			up, dn := t.SwitchLink(sw)
			rs = append(rs, pipeResource(t.SwitchName(sw), KindPCIeSwitch, "up", up),
				pipeResource(t.SwitchName(sw), KindPCIeSwitch, "down", dn))
		}
		for l := range g {
			gn := "n" + strconv.Itoa(n) + "/gpu" + strconv.Itoa(l)
			up, dn := t.Link(m.Topo.GPUDev(n, l))
			rs = append(rs, pipeResource(gn, KindGPUPCIe, "up", up), pipeResource(gn, KindGPUPCIe, "down", dn))
			out, in := m.NVLink[n].Port(l)
			rs = append(rs, pipeResource(gn, KindNVLink, "out", out), pipeResource(gn, KindNVLink, "in", in))
			for j := range k {
				nc := m.NICs[(n*g+l)*k+j]
				up, dn := t.Link(nc.Dev())
				rs = append(rs, pipeResource(nc.Name(), KindNICPCIe, "up", up), pipeResource(nc.Name(), KindNICPCIe, "down", dn))
			}
		}
	}
	for _, s := range threads {
		st := s.Stats()
		rs = append(rs, Resource{Name: s.Name(), Kind: KindCPU, Busy: st.Busy, Poll: st.Poll, Transfers: st.GFDs})
	}
	for i := range rs {
		rs[i].finish(span)
	}
	sortResources(rs)
	return Snapshot{At: now, Resources: rs}
}

// PortID names a network port as a Snapshot's resource.
type PortID struct {
	Name string
	Kind Kind
	Dir  string
}

// PortIDs names every network port (indexed by fabric.PortID) as Snapshot
// names its resource: a NIC's port by the NIC ("tx" leaving it, "rx" the
// switch's egress towards it), a port between switches by the network's
// name, numbered from the second of parallel links on ("#1").
func (m *Machine) PortIDs() []PortID {
	epOf := map[fabric.NodeID]int{}
	for i, nc := range m.NICs {
		epOf[m.Net.Node(nc.Endpoint())] = i
	}
	seen := map[string]int{}
	ids := make([]PortID, m.Net.Ports())
	for p := range ids {
		pid := fabric.PortID(p)
		from, to := m.Net.PortEnds(pid)
		if i, ok := epOf[from]; ok {
			ids[p] = PortID{m.NICs[i].Name(), KindNIC, "tx"}
		} else if i, ok := epOf[to]; ok {
			ids[p] = PortID{m.NICs[i].Name(), KindNIC, "rx"}
		} else {
			// Parallel links between two switches share a name: number
			// the second and later ones.
			name := m.Net.PortName(pid)
			if c := seen[name]; c > 0 {
				seen[name] = c + 1
				name += "#" + strconv.Itoa(c)
			} else {
				seen[name] = 1
			}
			ids[p] = PortID{name, KindSwitch, "out"}
		}
	}
	return ids
}

func portResource(net *fabric.Network, p fabric.PortID) Resource {
	st := net.PortStats(p)
	return Resource{Rate: net.PortRate(p), Bytes: st.Bytes, Busy: st.Busy, Transfers: st.Packets,
		Wait: st.Wait, WaitMax: st.MaxWait}
}

func pipeResource(name string, k Kind, dir string, st link.Stats) Resource {
	// The pipe's Rate is not in its Stats; Util and Busy say enough.
	return Resource{Name: name, Kind: k, Dir: dir, Bytes: st.Bytes, Busy: st.Busy, Transfers: st.Transfers,
		Wait: st.Wait, WaitMax: st.MaxWait}
}

// finish sets the derived fields over span.
func (r *Resource) finish(span sim.Duration) {
	r.Util = 0
	if span > 0 {
		r.Util = float64(r.Busy) / float64(span)
	}
	r.WaitMean = 0
	if r.Transfers > 0 {
		r.WaitMean = r.Wait / sim.Duration(r.Transfers)
	}
}

func sortResources(rs []Resource) {
	slices.SortStableFunc(rs, func(a, b Resource) int {
		return cmp.Or(cmp.Compare(slices.Index(kindOrder, a.Kind), slices.Index(kindOrder, b.Kind)),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Dir, b.Dir))
	})
}

// Since returns the accounting between prev and s (both from the same
// machine; a zero prev means since the machine was built), with Util over
// s.At − prev.At. Resources absent from prev count from zero.
func (s Snapshot) Since(prev Snapshot) []Resource {
	type key struct {
		name string
		kind Kind
		dir  string
	}
	old := make(map[key]Resource, len(prev.Resources))
	for _, r := range prev.Resources {
		old[key{r.Name, r.Kind, r.Dir}] = r
	}
	span := s.At.Sub(prev.At)
	out := make([]Resource, len(s.Resources))
	for i, r := range s.Resources {
		o := old[key{r.Name, r.Kind, r.Dir}]
		r.Bytes -= o.Bytes
		r.Busy -= o.Busy
		r.Poll -= o.Poll
		r.Transfers -= o.Transfers
		r.Wait -= o.Wait
		r.finish(span)
		out[i] = r
	}
	return out
}

// Binding names the resource that bound a span: the most utilised one,
// with the runner-up of another kind for contrast.
type Binding struct {
	// Top is the most utilised resource (ties: the first in sort order).
	Top Resource `json:"top"`
	// Other is the most utilised resource of a kind other than Top's; its
	// Name is empty when every resource is of Top's kind.
	Other Resource `json:"other"`
}

// Bind returns the binding resource of rs (a Since or Snapshot result).
func Bind(rs []Resource) Binding {
	var b Binding
	for _, r := range rs {
		if b.Top.Name == "" || r.Util > b.Top.Util {
			b.Top = r
		}
	}
	for _, r := range rs {
		if r.Kind != b.Top.Kind && (b.Other.Name == "" || r.Util > b.Other.Util) {
			b.Other = r
		}
	}
	return b
}

// String says what bound the span, e.g. "gpu-pcie n0/gpu0 up 97.1% (next:
// nic n0g0/nic0 tx 48.3%)"; a GPU's PCIe link binding means the NICs
// could not be fed (or drained) faster than the GPU's x16 link.
func (b Binding) String() string {
	if b.Top.Name == "" {
		return "no resources"
	}
	s := fmt.Sprintf("%s %s %s %.1f%%", b.Top.Kind, b.Top.Name, b.Top.Dir, 100*b.Top.Util)
	if b.Other.Name != "" {
		s += fmt.Sprintf(" (next: %s %s %s %.1f%%)", b.Other.Kind, b.Other.Name, b.Other.Dir, 100*b.Other.Util)
	}
	return s
}

// WriteTable writes rs as an aligned text table, one row per resource
// with Util at least minUtil (0: all), keeping rs's order.
func WriteTable(w io.Writer, rs []Resource, minUtil float64) error {
	_, err := fmt.Fprintf(w, "%-11s %-22s %-4s %8s %10s %10s %10s %10s\n",
		"kind", "resource", "dir", "util%", "MB", "busy_us", "wait_mean", "wait_max")
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Util < minUtil {
			continue
		}
		_, err := fmt.Fprintf(w, "%-11s %-22s %-4s %8.1f %10.3f %10.3f %10.3f %10.3f\n",
			r.Kind, r.Name, r.Dir, 100*r.Util, float64(r.Bytes)/1e6, us(r.Busy), us(r.WaitMean), us(r.WaitMax))
		if err != nil {
			return err
		}
	}
	return nil
}

func us(d sim.Duration) float64 { return float64(d) / float64(sim.Microsecond) }

// Sampler takes a Snapshot of a machine every interval until Stop (or
// until nothing else is pending), for utilisation drawn over time
// (Perfetto counter tracks). Its events only read state: a run with a
// sampler behaves exactly as one without, except for the event count.
// Stop it when the work of interest ends (a phase's last receiver):
// timers such as DCQCN's keep a simulation's queue non-empty long after.
//
// On a World the sampler runs between windows (sim.World.OnWindow), when
// no partition runs: a sample is taken at the end of the first window
// that reaches its time, and stamped with that window's end (the instant
// every partition has reached), so samples fall on window ends, within a
// lookahead after their lone-Sim times. Stop it from a partition's event
// with StopIn; the last sample is taken at the end of that window.
type Sampler struct {
	m       *Machine
	every   sim.Duration
	threads []*proxy.Server
	snaps   []Snapshot
	stopped bool
	// On a World: the next sample's time, and per partition whether a
	// StopIn was called in the current window.
	next   sim.Time
	stopIn []bool
}

// Sample starts a Sampler on m that snapshots now and every interval
// (> 0) after, including the given proxy threads.
func (m *Machine) Sample(every sim.Duration, threads []*proxy.Server) *Sampler {
	if every <= 0 {
		panic(fmt.Sprintf("machine: sample interval %v", every))
	}
	sp := &Sampler{m: m, every: every, threads: threads}
	if w := m.World; w != nil {
		sp.stopIn = make([]bool, w.Parts())
		sp.snaps = append(sp.snaps, m.snapshot(w.Now(), threads))
		sp.next = w.Now().Add(every)
		w.OnWindow(sp.window)
		return sp
	}
	sp.take()
	return sp
}

// window is the World's sampler, after every window ending at end.
func (sp *Sampler) window(end sim.Time) {
	if sp.stopped {
		return
	}
	stop := false
	for i, s := range sp.stopIn {
		stop = stop || s
		sp.stopIn[i] = false
	}
	if stop || end >= sp.next {
		sp.snaps = append(sp.snaps, sp.m.snapshot(end, sp.threads))
		sp.next = end.Add(sp.every)
	}
	sp.stopped = stop
}

// StopIn is Stop called from an event of partition s of the machine's
// World (on a lone Sim, Stop): the last sample is taken at the end of
// the current window and no more after it.
func (sp *Sampler) StopIn(s *sim.Sim) {
	if sp.stopIn == nil {
		sp.Stop()
		return
	}
	sp.stopIn[s.Part()] = true
}

func (sp *Sampler) take() {
	sp.snaps = append(sp.snaps, sp.m.Snapshot(sp.threads))
	if !sp.stopped && sp.m.Sim.Pending() > 0 {
		sp.m.Sim.Post(sp.m.Sim.Now().Add(sp.every), sp, 0)
	}
}

// Handle implements sim.Handler: one sample.
func (sp *Sampler) Handle(*sim.Sim, uint64) {
	if !sp.stopped {
		sp.take()
	}
}

// Stop takes a last sample now and schedules no more. On a World call it
// between runs only (from an event, use StopIn).
func (sp *Sampler) Stop() {
	sp.stopped = true
	now := sp.m.now()
	if len(sp.snaps) == 0 || sp.snaps[len(sp.snaps)-1].At != now {
		sp.snaps = append(sp.snaps, sp.m.snapshot(now, sp.threads))
	}
}

// Snapshots returns the samples taken so far, in time order.
func (sp *Sampler) Snapshots() []Snapshot { return sp.snaps }

// Series is one resource's utilisation per sampling interval: Util[i] is
// its busy fraction over [At[i], At[i+1]); the last value is repeated at
// the last sample time so a counter track ends there.
type Series struct {
	Name string
	Kind Kind
	Dir  string
	At   []sim.Time
	Util []float64
}

// Series returns every resource's utilisation over each interval between
// consecutive samples, in the Snapshot order (nil with fewer than two
// samples).
func (sp *Sampler) Series() []Series {
	if len(sp.snaps) < 2 {
		return nil
	}
	first := sp.snaps[0].Resources
	out := make([]Series, len(first))
	for i, r := range first {
		out[i] = Series{Name: r.Name, Kind: r.Kind, Dir: r.Dir}
	}
	for k := 1; k < len(sp.snaps); k++ {
		d := sp.snaps[k].Since(sp.snaps[k-1])
		for i := range out {
			out[i].At = append(out[i].At, sp.snaps[k-1].At)
			out[i].Util = append(out[i].Util, d[i].Util)
		}
	}
	for i := range out {
		out[i].At = append(out[i].At, sp.snaps[len(sp.snaps)-1].At)
		out[i].Util = append(out[i].Util, out[i].Util[len(out[i].Util)-1])
	}
	return out
}
