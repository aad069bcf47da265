package bench

import (
	"fmt"
	"strings"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// EnvConfig describes a two-rank GIN setup.
type EnvConfig struct {
	// Profile is a machine preset or cluster file (default "h100-ib").
	Profile string
	// Backend is "gdaki", "proxy" or "lsa".
	Backend string
	// Version is the NCCL behaviour profile (default 2.30).
	Version gin.Version
	// Seed seeds the simulation.
	Seed uint64
	// Contexts, Signals, Counters and QueueDepth are the DevComm
	// requirements (0: 1 context, 4 signals, 4 counters, backend depth;
	// Counters < 0: none).
	Contexts, Signals, Counters, QueueDepth int
	// WindowBytes is the size of the symmetric window (default 4 MiB).
	WindowBytes uint64
	// Backed stores window bytes (needed only to check contents).
	Backed bool
	// WorldGinBarriers is the devComm's worldGinBarrierCount (GIN
	// backends, 2.30).
	WorldGinBarriers int
	// RailGinBarriers and LSABarriers are railGinBarrierCount (GIN
	// backends) and lsaBarrierCount (LSA).
	RailGinBarriers, LSABarriers int
	// GDAKI and Proxy are the backends' configurations (zero: defaults).
	GDAKI *gdaki.Config
	Proxy *proxy.Config
	// Tune, when set, adjusts the hardware profile before the machine is
	// built (timing perturbation, mutants).
	Tune func(*machine.Profile)
	// FourRanks makes the GIN communicator two nodes of two GPUs (ranks
	// 0-3) instead of one GPU on each of two nodes.
	FourRanks bool
	// BarrierCount is the devComm's barrierCount (hybrid barriers).
	BarrierCount int
	// Mutations are the gin front end's mutants (gin/verify).
	Mutations gin.Mutations
	// Strict registers a second 4 KiB window "flag" with
	// NCCL_WIN_STRICT_ORDERING (VA signals; GIN backends).
	Strict bool
	// Exec, when set, builds the machine on a sim.World of one partition
	// per node whose windows it runs (sim.Serial, or a par.Pool's Exec);
	// nil builds it on a lone Sim.
	Exec sim.Exec
}

// Env is a built two-rank communicator: ranks 0 and 1 on two nodes (GDAKI,
// proxy) or on two GPUs of one node (LSA).
type Env struct {
	// Sim is the simulation: partition 0 of World on a World (Run runs
	// either).
	Sim     *sim.Sim
	World   *sim.World // EnvConfig.Exec's World, nil on a lone Sim
	Machine *machine.Machine
	Comm    *gin.Comm
	Dev     *gin.DevComm
	Win     *gin.Window
	GDAKI   *gdaki.Backend
	Proxy   *proxy.Backend
	Backend gin.Backend // nil for LSA
	Ranks   []*gin.Rank
	// Flag is the LSA backend's window of 8-byte flag words (the signals
	// of LSA puts); for GIN backends the strictly ordered window of
	// EnvConfig.Strict, else nil.
	Flag *gin.Window

	bus *obs.Bus // Observe's bus
}

// NewEnv builds the machine and the communicator of c.
func NewEnv(c EnvConfig) (*Env, error) {
	if c.Profile == "" {
		c.Profile = "h100-ib"
	}
	if c.Version == 0 {
		c.Version = gin.V2_30
	}
	if c.WindowBytes == 0 {
		c.WindowBytes = 4 << 20
	}
	spec, err := machine.Resolve(c.Profile)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	spec.GPUsPerNode = 2
	if spec.Nodes != 0 && spec.Nodes < 2 && c.Backend != "lsa" {
		return nil, fmt.Errorf("bench: cluster %q has one node; GIN benchmarks need two", spec.Name)
	}
	nodes := 2
	if spec.Nodes == 1 {
		nodes = 1
	}
	var m *machine.Machine
	if c.Exec != nil {
		w := sim.NewWorld(sim.Config{Seed: c.Seed}, nodes, machine.Lookahead(spec, nodes))
		w.SetExec(c.Exec)
		m, err = machine.BuildWorld(w, spec, nodes, c.Tune)
	} else {
		m, err = machine.BuildTuned(sim.New(sim.Config{Seed: c.Seed}), spec, nodes, c.Tune)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	e := &Env{Sim: m.Sim, World: m.World, Machine: m}
	pick := []int{0, 2} // one GPU on each node
	if c.FourRanks && c.Backend != "lsa" {
		pick = []int{0, 1, 2, 3} // two nodes of two GPUs: LSA teams {0,1}, {2,3}
	}
	if c.Backend == "lsa" {
		pick = []int{0, 1}
	}
	for i, w := range pick {
		r := *m.Ranks[w]
		r.World = i
		e.Ranks = append(e.Ranks, &r)
	}
	cfg := gin.CommConfig{Version: c.Version, Backends: map[gin.Type]gin.Backend{}, Mutations: c.Mutations}
	typ := gin.TypeNone
	switch c.Backend {
	case "gdaki", "":
		gc := gdaki.DefaultConfig()
		if c.GDAKI != nil {
			gc = *c.GDAKI
		}
		if e.GDAKI, err = gdaki.New(gc); err != nil {
			return nil, err
		}
		cfg.Backends[gin.TypeGDAKI], typ, e.Backend = e.GDAKI, gin.TypeGDAKI, e.GDAKI
	case "proxy":
		pc := proxy.DefaultConfig()
		if c.Proxy != nil {
			pc = *c.Proxy
		}
		if e.Proxy, err = proxy.New(pc); err != nil {
			return nil, err
		}
		cfg.Backends[gin.TypeProxy], typ, e.Backend = e.Proxy, gin.TypeProxy, e.Proxy
	case "lsa":
		if e.Ranks[0].Node != e.Ranks[1].Node {
			return nil, fmt.Errorf("bench: backend lsa needs two GPUs of one node")
		}
		return e.lsaComm(c)
	default:
		return nil, fmt.Errorf("bench: unknown backend %q (want gdaki, proxy or lsa)", c.Backend)
	}
	if e.Comm, err = gin.NewComm(e.Ranks, cfg); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	counters := max(c.Counters, 4)
	if c.Counters < 0 {
		counters = 0
	}
	req := gin.Requirements{GinContextCount: max(c.Contexts, 1), GinSignalCount: max(c.Signals, 4),
		GinCounterCount: counters, GinQueueDepth: c.QueueDepth, ConnectionType: gin.ConnFull, Type: typ,
		WorldGinBarrierCount: c.WorldGinBarriers, RailGinBarrierCount: c.RailGinBarriers, BarrierCount: c.BarrierCount}
	if e.Dev, err = e.Comm.DevCommCreate(req); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.Win, err = e.Comm.WindowRegister("buf", sim.Bytes(c.WindowBytes), gin.WinDefault, c.Backed); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if c.Strict {
		if e.Flag, err = e.Comm.WindowRegister("flag", 4096, gin.WinStrictOrdering, true); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	return e, nil
}

// lsaComm builds the LSA-only communicator: no GIN resources, a data
// window and a flag window the ranks store into over NVLink.
func (e *Env) lsaComm(c EnvConfig) (*Env, error) {
	var err error
	if e.Comm, err = gin.NewComm(e.Ranks, gin.CommConfig{Version: c.Version, Mutations: c.Mutations}); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.Comm.LSASize() != len(e.Ranks) {
		return nil, fmt.Errorf("bench: backend lsa: LSA team of %d ranks, want %d", e.Comm.LSASize(), len(e.Ranks))
	}
	if e.Dev, err = e.Comm.DevCommCreate(gin.Requirements{ConnectionType: gin.ConnNone, LSABarrierCount: c.LSABarriers}); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.Win, err = e.Comm.WindowRegister("buf", sim.Bytes(c.WindowBytes), gin.WinDefault, c.Backed); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.Flag, err = e.Comm.WindowRegister("flag", 4096, gin.WinDefault, false); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return e, nil
}

// Run runs the simulation (the World on a World) until nothing is
// pending, or it stops or fails.
func (e *Env) Run() error {
	if e.World != nil {
		return e.World.Run()
	}
	return e.Sim.Run()
}

// Log is an event timeline of one run merged from the backends' step
// traces, the packets on both NIC ports and the memory effects on the
// windows, signal and counter words and CQ rings: the text of golden
// scripts and of the round-trip breakdown.
type Log struct {
	Lines []string
	Start sim.Time
}

func (l *Log) add(at sim.Time, who, what string) {
	l.Lines = append(l.Lines, fmt.Sprintf("%10.3fus %-22s %s", at.Sub(l.Start).Us(), who, what))
}

// String returns the log, one event a line.
func (l *Log) String() string { return strings.Join(l.Lines, "\n") + "\n" }

// Observe wires one obs.Bus through the whole env (fabric, NICs,
// communicator, backend) and subscribes obs to it; later calls add
// subscribers to the same bus. It returns the bus: on a World a split
// bus (obs.Split), whose subscribers see the merged stream.
func (e *Env) Observe(subs ...obs.Observer) *obs.Bus {
	if e.bus == nil {
		e.bus = obs.NewBus()
		if e.World != nil {
			e.bus = obs.Split(e.World)
		}
		e.Machine.SetObserver(e.bus)
		e.Comm.SetObserver(e.bus)
		if e.GDAKI != nil {
			e.GDAKI.SetObserver(e.bus)
		}
		if e.Proxy != nil {
			e.Proxy.SetObserver(e.bus)
		}
	}
	for _, o := range subs {
		e.bus.Subscribe(o)
	}
	return e.bus
}

// Record starts logging e's run into a new Log: the backend's steps (as
// gdaki.Describe or proxy.Describe render them) and the packets leaving
// and reaching each rank's first NIC port from the observer, memory
// effects from the memory observer. Not on a World (the memory observer
// is called from every partition).
func (e *Env) Record() *Log {
	if e.World != nil {
		panic("bench: Record on a World")
	}
	l := &Log{Start: e.Sim.Now()}
	describe := gdaki.Describe
	if e.Proxy != nil {
		describe = proxy.Describe
	}
	net := e.Machine.Net
	tx := map[uint64]string{} // uplink port -> NIC name
	rx := map[uint64]string{} // endpoint -> NIC name
	for _, r := range e.Ranks {
		n := r.NICs[0]
		tx[uint64(net.EndpointPort(n.Endpoint()))] = n.Name()
		rx[uint64(n.Endpoint())] = n.Name()
	}
	pkt := func(ev obs.Event, dir string) string {
		return fmt.Sprintf("%s %v psn=%d qp=%#x len=%d", dir, roce.Opcode(ev.Code), ev.PSN, ev.QP, ev.Bytes)
	}
	e.Observe(obs.Func(func(ev obs.Event) {
		switch ev.Kind {
		case obs.Hop:
			if name, ok := tx[ev.Value]; ok {
				l.add(ev.At, name, pkt(ev, "tx"))
			}
		case obs.Received:
			if name, ok := rx[ev.Value]; ok {
				l.add(ev.At, name, pkt(ev, "rx"))
			}
		default:
			if what, ok := describe(ev); ok {
				l.add(ev.At, ev.Who, what)
			}
		}
	}))
	e.Machine.Mem.SetObserver(memLog{l})
	return l
}

type memLog struct{ l *Log }

// Observe logs the effects that matter for a GIN timeline: NIC writes into
// windows, atomics on signal/counter words, CQE landings, ci/pi updates.
func (m memLog) Observe(e *mem.Effect) {
	n := e.Region.Name()
	switch {
	case strings.HasSuffix(n, "/ring") || strings.HasSuffix(n, "/sq") || strings.HasSuffix(n, "/ctrl") ||
		strings.HasSuffix(n, "/pis") || strings.HasSuffix(n, "/inlines") || strings.HasSuffix(n, "/signalOffsets"):
		return // GPU/CPU bookkeeping already in the step trace
	case strings.HasSuffix(n, "/cq"):
		m.l.add(e.At, e.Agent, fmt.Sprintf("CQE #%d landed in %s", e.New-1, n))
	case e.Op == mem.OpWrite:
		m.l.add(e.At, e.Agent, fmt.Sprintf("%v %d B at %s+%d", e.Op, e.Len, n, e.Off))
	default:
		m.l.add(e.At, e.Agent, fmt.Sprintf("%v %s+%d: %d -> %d", e.Op, n, e.Off, e.Old, e.New))
	}
}
