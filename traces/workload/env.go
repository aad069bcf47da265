package workload

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces"
)

// Env is one step's simulation: the machine, the routing, the workload's
// parameters and the accounting of the phase running now.
//
// The machine runs on a sim.World of partitions. A rank's work runs on
// its partition, SimOf(rank), and touches only state of that partition: the phase accounting is per rank (Phase.Sent,
// Done, Left, Last, BWBytes) or per partition (the ranks still running),
// merged after the run or at window ends.
type Env struct {
	// Sim is partition 0 of World.
	Sim *sim.Sim
	// World is the World the machine runs on.
	World  *sim.World
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
	// Obs is the step's observation bus (nil: not observed): the
	// critical path (traces/critpath) reads its events, Saw its record of
	// which operation last changed a signal word. On a World its
	// subscribers run beside the partitions (obs.SplitOverlapped): they
	// may read the events and their own state only.
	Obs     *obs.Bus
	NewComm func() (*gin.Comm, error)
	// Comms are the communicators NewComm made, whose waiting coops a
	// deadlock report describes (NewComm's maker appends them).
	Comms []*gin.Comm

	sims []*sim.Sim // per rank of M: its GPU's Sim (a partition of World)
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

// NewEnv returns the Env of one step: st's routing on m, which runs on w.
// The caller sets NewComm.
func NewEnv(w *sim.World, m *machine.Machine, st *Step, cfg Config, p Params, hdr traces.Header, hidden int) *Env {
	e := &Env{Sim: w.Part(0), World: w, M: m, Step: st, Cfg: cfg, P: p, Hdr: hdr, Hidden: hidden}
	e.EPRank = make([]int, len(m.NICs))
	e.sims = make([]*sim.Sim, len(m.Ranks))
	for r, rk := range m.Ranks {
		for _, n := range rk.NICs {
			e.EPRank[n.Endpoint()] = r
		}
		e.sims[r] = rk.GPU.Sim()
	}
	// The phase ends at the end of the window in which its last rank
	// finished: the partitions count their ranks, the sum is taken here,
	// between windows.
	w.OnWindow(func(sim.Time) {
		if e.Ph != nil && e.Ph.running && e.Ph.RanksLeft() == 0 {
			e.Ph.running = false
			e.Sim.Stop()
		}
	})
	return e
}

// SimOf returns the Sim rank r's work runs on: its partition of the World.
func (e *Env) SimOf(r int) *sim.Sim { return e.sims[r] }

// ObsOf returns the bus rank r's work emits into and asks LastOp of (nil:
// not observed): its partition's bus of the step's split bus.
func (e *Env) ObsOf(r int) *obs.Bus {
	return e.Obs.Of(e.sims[r])
}

// Now returns the time of the step between runs (every partition's clock).
func (e *Env) Now() sim.Time { return e.World.Now() }

// Config is what a workload reads of the replay options.
type Config struct {
	// Backend is the GIN backend (BackendGDAKI, BackendProxy) or
	// BackendNCCL.
	Backend string
	// NVLink sends intra-node traffic over NVLink instead of RDMA
	// loopback.
	NVLink bool
}

// Phase is the accounting of one dispatch or combine phase.
type Phase struct {
	Name  string
	Start sim.Time
	Left  []int      // per rank: receiver groups not yet done
	Done  []sim.Time // per rank: when its last receiver finished
	// Sent is, per rank, what its code sent in the phase (Count).
	Sent    []Counts
	BWBytes []int64    // per rank: DeepEP bandwidth numerator
	Last    []Seen     // per rank: the signal its receivers saw last
	NCCL    *NCCLFacts // the NCCL baseline's paths (nil for GIN workloads)

	// left is, per partition, the ranks whose receivers still run;
	// running is set from Begin until the World's run is stopped.
	left    []int
	running bool
}

// Counts are the messages, signals and RDMA payload bytes a rank sent.
type Counts struct {
	Msgs, Sigs, RDMABytes int64
}

// Count returns rank r's counts of the phase, for r's code to add to.
func (ph *Phase) Count(r int) *Counts { return &ph.Sent[r] }

// Sum returns the phase's counts over every rank.
func (ph *Phase) Sum() Counts {
	var c Counts
	for _, x := range ph.Sent {
		c.Msgs += x.Msgs
		c.Sigs += x.Sigs
		c.RDMABytes += x.RDMABytes
	}
	return c
}

// RanksLeft returns the number of ranks whose receivers have not all
// finished.
func (ph *Phase) RanksLeft() int {
	n := 0
	for _, l := range ph.left {
		n += l
	}
	return n
}

// Seen is a signal a receiver saw: who sent it and the GIN operation
// whose update of the word the receiver's wait returned on (Env.Saw).
type Seen struct {
	Valid    bool
	From, To int // sending and receiving rank
	// Op is the operation that last changed the word (0: none, the word
	// was changed by an NVLink store or a local atomic, or the step is
	// not observed).
	Op obs.OpID
	// At is when the wait returned.
	At sim.Time
}

// Saw returns what rank to's receiver saw now on the signal word at off
// of reg, sent by rank from: the op that last changed it, by the step's
// bus.
func (e *Env) Saw(from, to int, reg *mem.Region, off uint64) Seen {
	s := Seen{Valid: true, From: from, To: to, At: e.SimOf(to).Now()}
	if b := e.ObsOf(to); b != nil {
		s.Op = b.LastOp(reg.Name(), off)
	}
	return s
}

func (e *Env) Begin(ph *Phase, name string, receivers []int) {
	ep := e.Step.EP
	*ph = Phase{Name: name, Start: e.Now(), Left: receivers, Done: make([]sim.Time, ep), Sent: make([]Counts, ep),
		BWBytes: make([]int64, ep), Last: make([]Seen, ep), left: make([]int, e.World.Parts()), running: true}
	for r, n := range receivers {
		if n == 0 {
			ph.Done[r] = ph.Start
		} else {
			ph.left[e.sims[r].Part()]++
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

// ReceiverDone marks one receiver group of rank r finished; seen is the
// signal it waited for last (may be invalid).
func (e *Env) ReceiverDone(r int, seen Seen) {
	ph := e.Ph
	s := e.sims[r]
	now := s.Now()
	e.NoteLast(r, seen)
	ph.Left[r]--
	if ph.Left[r] < 0 {
		panic(fmt.Sprintf("workload: t=%v rank %d: more receivers done than launched in %s", now, r, ph.Name))
	}
	if ph.Left[r] == 0 {
		ph.Done[r] = now
		p := s.Part()
		ph.left[p]-- // the World stops at the window's end (NewEnv)
	}
}

// Run runs the simulation until every rank's receivers are done.
func (e *Env) Run() error {
	err := e.World.Run()
	e.Ph.running = false
	if err != nil {
		return fmt.Errorf("workload: %s: %w", e.Ph.Name, err)
	}
	if left := e.Ph.RanksLeft(); left > 0 {
		return fmt.Errorf("workload: %s: deadlock at t=%v (the last event; the last rank done at t=%v): %d ranks never finished%s",
			e.Ph.Name, e.Now(), e.Ph.End(), left, e.waits(e.World.Blocked()))
	}
	return nil
}

// waits describes at most eight of what a deadlocked step waits for: the
// GIN waits of Comms (the signal or counter, the value awaited and the
// value seen), else the blocked processes and why they are parked. The
// run's end time says little: a QP's idle local ACK timer fires, doing
// nothing, one timeout (4.3 s at NCCL_IB_TIMEOUT 20) after it was armed.
func (e *Env) waits(blocked []*sim.Proc) string {
	var ws []string
	for _, c := range e.Comms {
		ws = append(ws, c.Waiters()...)
	}
	// GIN signal and counter waits ("rank R ctx C coop ...") first: the
	// grid syncs and barriers behind them only follow.
	slices.SortStableFunc(ws, func(a, b string) int {
		return cmp.Compare(ginWait(b), ginWait(a))
	})
	if len(ws) == 0 {
		for _, p := range blocked {
			_, why := p.Parked()
			ws = append(ws, fmt.Sprintf("%s (%s)", p.Name(), why))
		}
	}
	var b strings.Builder
	for i, w := range ws {
		if i == 8 {
			fmt.Fprintf(&b, "; ... (%d in all)", len(ws))
			break
		}
		fmt.Fprintf(&b, "; %s", w)
	}
	return b.String()
}

func ginWait(w string) int {
	if strings.Contains(w, " ctx ") {
		return 1
	}
	return 0
}

// End returns when the phase's last rank finished.
func (ph *Phase) End() sim.Time {
	var end sim.Time
	for _, d := range ph.Done {
		end = max(end, d)
	}
	return end
}

// Slowest returns the rank that finished last (the lowest of equals).
func (ph *Phase) Slowest() int {
	slow := 0
	for r, d := range ph.Done {
		if d > ph.Done[slow] {
			slow = r
		}
	}
	return slow
}

// Result turns the phase into its report; the caller fills its critical
// path (Breakdown, Critical) from the step's observation.
func (e *Env) Result(ph *Phase) PhaseReport {
	c := ph.Sum()
	pr := PhaseReport{Messages: c.Msgs, Signals: c.Sigs, RDMABytes: c.RDMABytes, NCCL: ph.NCCL}
	end := ph.End()
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
	return pr
}
