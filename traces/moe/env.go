package moe

import (
	"fmt"
	"strings"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces"
)

// env is one step's simulation: the machine, the routing, the workload's
// parameters and the accounting of the phase running now.
type env struct {
	s      *sim.Sim
	m      *machine.Machine
	st     *step
	opt    *Options
	p      Params
	ph     *phase
	disp   phase
	comb   phase
	hdr    traces.Header
	hidden int
	// epRank maps NIC endpoints to ranks.
	epRank []int
	// atomics lists, per (source rank, destination rank), the tap times of
	// atomic (signal) packets, for the critical-path breakdown.
	atomics map[[2]int][]wireTimes
	issues  map[sigKey]issueRec
	newComm func() (*gin.Comm, error)
	// posts records the Proxy backend's host path of signal GFDs.
	posts *proxyPosts
}

// wireTimes are the tap instants of one atomic (signal) packet.
type wireTimes struct {
	qp     uint32
	psn    uint32
	tx, rx sim.Time
}

// phase is the accounting of one dispatch or combine phase.
type phase struct {
	name      string
	start     sim.Time
	left      []int      // per rank: receiver groups not yet done
	done      []sim.Time // per rank: when its last receiver finished
	ranksLeft int
	msgs      int64
	sigs      int64
	rdmaBytes int64
	bwBytes   []int64 // per rank: DeepEP bandwidth numerator
	last      []sigPath
	nccl      *NCCLFacts // the NCCL baseline's paths (nil for GIN workloads)
}

// sigPath is the path of the signal a receiver group saw last.
type sigPath struct {
	valid       bool
	issueStart  sim.Time // sender warp began issuing the signal op
	issueEnd    sim.Time // the issue returned
	from, to    int      // sending and receiving rank
	landed      sim.Time // the signal word changed at the receiver
	seen        sim.Time // the receiver's wait returned
	done        sim.Time // the receiver group finished
	proxyQueued sim.Time // host path: descriptor ready for the CPU (0: none)
	proxyPosted sim.Time // host path: CPU posted the work request
	rdma        bool
}

func (e *env) begin(ph *phase, name string, receivers []int) {
	ep := e.st.ep
	*ph = phase{name: name, start: e.s.Now(), left: receivers, done: make([]sim.Time, ep), ranksLeft: ep,
		bwBytes: make([]int64, ep), last: make([]sigPath, ep)}
	for r, n := range receivers {
		if n == 0 {
			ph.done[r] = ph.start
			ph.ranksLeft--
		}
	}
	e.ph = ph
}

// beginOne begins a phase in which each rank has one receiver (a final
// reduction or the end of a kernel).
func (e *env) beginOne(ph *phase, name string) {
	one := make([]int, e.st.ep)
	for r := range one {
		one[r] = 1
	}
	e.begin(ph, name, one)
}

// receiverDone marks one receiver group of rank r finished; path is the
// signal it waited for last (may be invalid).
func (e *env) receiverDone(r int, path sigPath) {
	ph := e.ph
	now := e.s.Now()
	path.done = now
	if path.valid && (!ph.last[r].valid || path.seen >= ph.last[r].seen) {
		ph.last[r] = path
	}
	ph.left[r]--
	if ph.left[r] < 0 {
		panic(fmt.Sprintf("moe: t=%v rank %d: more receivers done than launched in %s", now, r, ph.name))
	}
	if ph.left[r] == 0 {
		ph.done[r] = now
		ph.ranksLeft--
		if ph.ranksLeft == 0 {
			e.s.Stop()
		}
	}
}

// run runs the simulation until every rank's receivers are done.
func (e *env) run() error {
	err := e.s.Run()
	if err != nil {
		return fmt.Errorf("moe: %s: %w", e.ph.name, err)
	}
	if e.ph.ranksLeft > 0 {
		var b strings.Builder
		for i, p := range e.s.Blocked() {
			if i == 8 {
				fmt.Fprintf(&b, "; ...")
				break
			}
			fmt.Fprintf(&b, "; %v", p)
		}
		return fmt.Errorf("moe: %s: deadlock at t=%v: %d ranks never finished%s", e.ph.name, e.s.Now(), e.ph.ranksLeft, b.String())
	}
	return nil
}

// tap records atomic packets' NIC transmit and receive times.
func (e *env) tap(iface int, at sim.Time, p *fabric.Packet) {
	if p.Hdr.Opcode != roce.OpFetchAdd {
		return
	}
	k := [2]int{e.epRank[p.Src], e.epRank[p.Dst]}
	if fabric.EndpointID(iface) == p.Src {
		e.atomics[k] = append(e.atomics[k], wireTimes{qp: p.Hdr.DestQP, psn: p.Hdr.PSN, tx: at})
		return
	}
	l := e.atomics[k]
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].qp == p.Hdr.DestQP && l[i].psn == p.Hdr.PSN && l[i].rx == 0 {
			l[i].rx = at
			return
		}
	}
}

// landWatch records when a watched signal word changes.
type landWatch struct {
	at sim.Time
	s  *sim.Sim
}

func (w *landWatch) WordChanged(r *mem.Region, off uint64) { w.at = w.s.Now() }

// result turns the phase into its report.
func (e *env) result(ph *phase) PhaseReport {
	pr := PhaseReport{Messages: ph.msgs, Signals: ph.sigs, RDMABytes: ph.rdmaBytes, NCCL: ph.nccl}
	var end sim.Time
	slow := 0
	for r, d := range ph.done {
		if d > end {
			end, slow = d, r
		}
	}
	t := end.Sub(ph.start)
	pr.US = round3(t.Us())
	for r, d := range ph.done {
		pr.RecvDoneUS = append(pr.RecvDoneUS, round3(d.Sub(ph.start).Us()))
		pr.BandwidthBytes += ph.bwBytes[r]
	}
	if t > 0 {
		var gbps float64
		for _, b := range ph.bwBytes {
			gbps += float64(b) / t.Seconds() / 1e9
		}
		pr.GBps = round3(gbps / float64(len(ph.bwBytes)))
	}
	pr.Breakdown = e.breakdown(ph.last[slow], ph.start, end)
	return pr
}

// breakdown attributes the critical path. Each boundary is clamped to be
// monotone; missing instants (no tap for an NVLink signal) fold the part
// into the next one that is known.
func (e *env) breakdown(p sigPath, start, end sim.Time) Breakdown {
	us := func(a, b sim.Time) float64 {
		if b < a {
			return 0
		}
		return round3(b.Sub(a).Us())
	}
	b := Breakdown{TotalUS: us(start, end)}
	if !p.valid {
		b.GPUIssueUS = b.TotalUS
		return b
	}
	// The signal's packet: the latest atomic from the sender to the
	// receiver that arrived by the time the word changed.
	var w wireTimes
	if p.rdma {
		for _, x := range e.atomics[[2]int{p.from, p.to}] {
			if x.rx != 0 && x.rx <= p.landed && x.rx >= w.rx {
				w = x
			}
		}
	}
	clamp := func(t, lo sim.Time) sim.Time {
		if t < lo {
			return lo
		}
		return t
	}
	t1 := clamp(p.issueEnd, start)
	tq := t1
	if p.proxyQueued != 0 {
		tq = clamp(p.proxyPosted, t1)
	}
	landed := clamp(p.landed, tq)
	seen := clamp(p.seen, landed)
	b.GPUIssueUS = us(start, t1)
	b.ProxyQueueUS = us(t1, tq)
	if p.rdma && w.tx != 0 && w.rx != 0 {
		tx := clamp(w.tx, tq)
		rx := clamp(w.rx, tx)
		landed = clamp(landed, rx)
		seen = clamp(seen, landed)
		// The doorbell and PCIe part ends where the NIC has the WQE and
		// its payload; the tap gives only the first bit on the wire, so
		// queueing in the NIC behind earlier WQEs counts as NIC time and
		// the fixed doorbell/fetch latency as PCIe (see Notes).
		pcieEnd := clamp(tq.Add(e.p.doorbellPath(e)), tq)
		if pcieEnd > tx {
			pcieEnd = tx
		}
		b.DoorbellPCIeUS = us(tq, pcieEnd)
		b.NICUS = us(pcieEnd, tx)
		b.WireSwitchUS = us(tx, rx)
		b.RemoteWriteUS = us(rx, landed)
	} else {
		b.RemoteWriteUS = us(tq, landed)
	}
	b.SignalVisibilityUS = us(landed, clamp(end, seen))
	return b
}
