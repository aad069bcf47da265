package workload

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces"
)

// Env is one step's simulation: the machine, the routing, the workload's
// parameters and the accounting of the phase running now.
type Env struct {
	Sim    *sim.Sim
	M      *machine.Machine
	Step   *Step
	Cfg    Config
	P      Params
	Ph     *Phase
	Disp   Phase
	Comb   Phase
	Hdr    traces.Header
	Hidden int
	// EPRank maps NIC endpoints to ranks.
	EPRank []int
	// atomics lists, per (source rank, destination rank), the tap times of
	// atomic (signal) packets, for the critical-path breakdown.
	atomics map[[2]int][]wireTimes
	issues  map[sigKey]issueRec
	NewComm func() (*gin.Comm, error)
	// posts records the Proxy backend's host path of signal GFDs.
	posts *proxyPosts
}

// Backends a Config names.
const (
	BackendGDAKI = "gdaki" // GIN GDAKI: the GPU writes WQEs and rings doorbells
	BackendProxy = "proxy" // GIN Proxy: GFDs to a CPU thread that posts verbs
	BackendNCCL  = "nccl"  // host-initiated NCCL all-to-all-v baseline
)

// CtxsPerComm is DEEP_EP_NCCL_GIN_CTXS_PER_COMM in DeepEP PR #521: one GIN
// context per local expert, four per communicator.
const CtxsPerComm = 4

// NewEnv returns the Env of one step: st's routing on m, driven by s. The
// caller sets NewComm.
func NewEnv(s *sim.Sim, m *machine.Machine, st *Step, cfg Config, p Params, hdr traces.Header, hidden int) *Env {
	e := &Env{Sim: s, M: m, Step: st, Cfg: cfg, P: p, Hdr: hdr, Hidden: hidden,
		atomics: map[[2]int][]wireTimes{}, issues: map[sigKey]issueRec{}}
	e.EPRank = make([]int, len(m.NICs))
	for r, rk := range m.Ranks {
		for _, n := range rk.NICs {
			e.EPRank[n.Endpoint()] = r
		}
	}
	return e
}

// Config is what a workload reads of the replay options.
type Config struct {
	// Backend is the GIN backend (BackendGDAKI, BackendProxy) or
	// BackendNCCL.
	Backend string
	// NVLink sends intra-node traffic over NVLink instead of RDMA
	// loopback.
	NVLink bool
}

// wireTimes are the tap instants of one atomic (signal) packet.
type wireTimes struct {
	qp       uint32
	psn      uint32
	tx, rx   sim.Time
	src, dst fabric.EndpointID // the NIC ports it left and reached
}

// Phase is the accounting of one dispatch or combine phase.
type Phase struct {
	Name      string
	Start     sim.Time
	Left      []int      // per rank: receiver groups not yet done
	Done      []sim.Time // per rank: when its last receiver finished
	RanksLeft int
	Msgs      int64
	Sigs      int64
	RDMABytes int64
	BWBytes   []int64 // per rank: DeepEP bandwidth numerator
	Last      []SigPath
	NCCL      *NCCLFacts // the NCCL baseline's paths (nil for GIN workloads)
}

// SigPath is the path of the signal a receiver group saw last.
type SigPath struct {
	Valid       bool
	IssueStart  sim.Time // sender warp began issuing the signal op
	IssueEnd    sim.Time // the issue returned
	From, To    int      // sending and receiving rank
	Landed      sim.Time // the signal word changed at the receiver
	Seen        sim.Time // the receiver's wait returned
	Done        sim.Time // the receiver group finished
	ProxyQueued sim.Time // host path: descriptor ready for the CPU (0: none)
	ProxyPosted sim.Time // host path: CPU posted the work request
	RDMA        bool
}

func (e *Env) Begin(ph *Phase, name string, receivers []int) {
	ep := e.Step.EP
	*ph = Phase{Name: name, Start: e.Sim.Now(), Left: receivers, Done: make([]sim.Time, ep), RanksLeft: ep,
		BWBytes: make([]int64, ep), Last: make([]SigPath, ep)}
	for r, n := range receivers {
		if n == 0 {
			ph.Done[r] = ph.Start
			ph.RanksLeft--
		}
	}
	e.Ph = ph
}

// BeginOne begins a phase in which each rank has one receiver (a final
// reduction or the end of a kernel).
func (e *Env) BeginOne(ph *Phase, name string) {
	one := make([]int, e.Step.EP)
	for r := range one {
		one[r] = 1
	}
	e.Begin(ph, name, one)
}

// ReceiverDone marks one receiver group of rank r finished; path is the
// signal it waited for last (may be invalid).
func (e *Env) ReceiverDone(r int, path SigPath) {
	ph := e.Ph
	now := e.Sim.Now()
	path.Done = now
	if path.Valid && (!ph.Last[r].Valid || path.Seen >= ph.Last[r].Seen) {
		ph.Last[r] = path
	}
	ph.Left[r]--
	if ph.Left[r] < 0 {
		panic(fmt.Sprintf("workload: t=%v rank %d: more receivers done than launched in %s", now, r, ph.Name))
	}
	if ph.Left[r] == 0 {
		ph.Done[r] = now
		ph.RanksLeft--
		if ph.RanksLeft == 0 {
			e.Sim.Stop()
		}
	}
}

// Run runs the simulation until every rank's receivers are done.
func (e *Env) Run() error {
	err := e.Sim.Run()
	if err != nil {
		return fmt.Errorf("workload: %s: %w", e.Ph.Name, err)
	}
	if e.Ph.RanksLeft > 0 {
		var b strings.Builder
		for i, p := range e.Sim.Blocked() {
			if i == 8 {
				fmt.Fprintf(&b, "; ...")
				break
			}
			fmt.Fprintf(&b, "; %v", p)
		}
		return fmt.Errorf("workload: %s: deadlock at t=%v: %d ranks never finished%s", e.Ph.Name, e.Sim.Now(), e.Ph.RanksLeft, b.String())
	}
	return nil
}

// Tap records atomic packets' NIC transmit and receive times.
func (e *Env) Tap(iface int, at sim.Time, p *fabric.Packet) {
	if p.Hdr.Opcode != roce.OpFetchAdd {
		return
	}
	k := [2]int{e.EPRank[p.Src], e.EPRank[p.Dst]}
	if fabric.EndpointID(iface) == p.Src {
		e.atomics[k] = append(e.atomics[k], wireTimes{qp: p.Hdr.DestQP, psn: p.Hdr.PSN, tx: at, src: p.Src, dst: p.Dst})
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

// LandWatch records when a watched signal word changes.
type LandWatch struct {
	At  sim.Time
	Sim *sim.Sim
}

func (w *LandWatch) WordChanged(r *mem.Region, off uint64) { w.At = w.Sim.Now() }

// Result turns the phase into its report.
func (e *Env) Result(ph *Phase) PhaseReport {
	pr := PhaseReport{Messages: ph.Msgs, Signals: ph.Sigs, RDMABytes: ph.RDMABytes, NCCL: ph.NCCL}
	var end sim.Time
	slow := 0
	for r, d := range ph.Done {
		if d > end {
			end, slow = d, r
		}
	}
	t := end.Sub(ph.Start)
	pr.US = round3(t.Us())
	for r, d := range ph.Done {
		pr.RecvDoneUS = append(pr.RecvDoneUS, round3(d.Sub(ph.Start).Us()))
		pr.BandwidthBytes += ph.BWBytes[r]
	}
	if t > 0 {
		var gbps float64
		for _, b := range ph.BWBytes {
			gbps += float64(b) / t.Seconds() / 1e9
		}
		pr.GBps = round3(gbps / float64(len(ph.BWBytes)))
	}
	pr.Breakdown = e.breakdown(ph.Last[slow], ph.Start, end)
	pr.Critical = e.crossing(ph.Last[slow])
	return pr
}

// crossing names where the critical signal went: its sender and receiver
// and, over RDMA, the NIC ports its packet left and reached, named as a
// cluster file's faults section names links (rankR/nicJ).
func (e *Env) crossing(p SigPath) *Crossing {
	if !p.Valid {
		return nil
	}
	c := &Crossing{From: p.From, To: p.To, Via: "nvlink"}
	if !p.RDMA {
		return c
	}
	c.Via = "rdma"
	if w, ok := e.signalPacket(p); ok {
		c.Links = []string{e.portName(w.src), e.portName(w.dst)}
	}
	return c
}

// portName is a NIC port's name in a faults section: rankR/nicJ, J its
// index among rank R's ports.
func (e *Env) portName(ep fabric.EndpointID) string {
	r, j := e.EPRank[ep], 0
	for x := range fabric.EndpointID(ep) {
		if e.EPRank[x] == r {
			j++
		}
	}
	return "rank" + strconv.Itoa(r) + "/nic" + strconv.Itoa(j)
}

// signalPacket is the critical signal's packet: the latest atomic from
// the sender to the receiver that arrived by the time the word changed.
func (e *Env) signalPacket(p SigPath) (wireTimes, bool) {
	var w wireTimes
	for _, x := range e.atomics[[2]int{p.From, p.To}] {
		if x.rx != 0 && x.rx <= p.Landed && x.rx >= w.rx {
			w = x
		}
	}
	return w, w.rx != 0
}

// breakdown attributes the critical path. Each boundary is clamped to be
// monotone; missing instants (no tap for an NVLink signal) fold the part
// into the next one that is known.
func (e *Env) breakdown(p SigPath, start, end sim.Time) Breakdown {
	us := func(a, b sim.Time) float64 {
		if b < a {
			return 0
		}
		return round3(b.Sub(a).Us())
	}
	b := Breakdown{TotalUS: us(start, end)}
	if !p.Valid {
		b.GPUIssueUS = b.TotalUS
		return b
	}
	// The signal's packet: the latest atomic from the sender to the
	// receiver that arrived by the time the word changed.
	var w wireTimes
	if p.RDMA {
		w, _ = e.signalPacket(p)
	}
	clamp := func(t, lo sim.Time) sim.Time {
		if t < lo {
			return lo
		}
		return t
	}
	t1 := clamp(p.IssueEnd, start)
	tq := t1
	if p.ProxyQueued != 0 {
		tq = clamp(p.ProxyPosted, t1)
	}
	landed := clamp(p.Landed, tq)
	seen := clamp(p.Seen, landed)
	b.GPUIssueUS = us(start, t1)
	b.ProxyQueueUS = us(t1, tq)
	if p.RDMA && w.tx != 0 && w.rx != 0 {
		tx := clamp(w.tx, tq)
		rx := clamp(w.rx, tx)
		landed = clamp(landed, rx)
		seen = clamp(seen, landed)
		// The doorbell and PCIe part ends where the NIC has the WQE and
		// its payload; the tap gives only the first bit on the wire, so
		// queueing in the NIC behind earlier WQEs counts as NIC time and
		// the fixed doorbell/fetch latency as PCIe (see Notes).
		pcieEnd := clamp(tq.Add(e.P.doorbellPath(e)), tq)
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
