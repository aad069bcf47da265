package hw

import (
	"fmt"
	"hash/fnv"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/prog"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// Outcome is what a run of a file gave, on the model or on the device, in
// one shape: per rank, every op's status, value and times, and the final
// signals, counters and window checksums.
type Outcome struct {
	Ranks [Ranks]RankOutcome
	// Notes are facts about the run worth showing (NCCL bugs seen, ...).
	Notes []string
	// Err is the model's report of a program error (a rule of the device
	// API the program broke), if the run stopped on one.
	Err string
}

// RankOutcome is one rank's part of an Outcome. Times are from the rank's
// first op's start.
type RankOutcome struct {
	Ops                        []OpOutcome
	Signals, Counters, Windows []uint64
	// Finished is false when the rank's program did not complete.
	Finished bool
	Msg      string
}

// OpOutcome is one op: "ok", "timeout" (a bounded wait on the device gave
// up) or "not reached"; the value it read; its start and end; and for ops
// that post a descriptor, when the proxy posted it (Post < 0: unknown).
type OpOutcome struct {
	Kind       string
	Status     string
	Value      uint64
	Start, End sim.Duration
	Post       sim.Duration
}

// posts says whether an op becomes one GFD (one plugin post).
func posts(kind string) bool { return kind == "put" || kind == "put_value" || kind == "signal" }

// Model runs c's programs on the model's proxy backend: two ranks on
// different nodes of cluster (a preset name or YAML file), windows of
// WindowBytes filled as the executor fills them, NCCL behaviour v.
func Model(c Case, cluster string, v gin.Version) (*Outcome, error) {
	s, err := SetupOf(c.File)
	if err != nil {
		return nil, err
	}
	e, err := newEnv(cluster, v, s)
	if err != nil {
		return nil, err
	}
	defer e.sim.Shutdown()
	wins := make([]*gin.Window, len(s.Windows))
	for i, name := range s.Windows {
		if wins[i], err = e.comm.WindowRegister(name, WindowBytes, gin.WinDefault, true); err != nil {
			return nil, fmt.Errorf("hw: model window %q: %w", name, err)
		}
		for r := range Ranks {
			b := wins[i].Region(r).Bytes()
			for j := range b {
				b[j] = byte(r*31 + i*7 + j)
			}
		}
	}
	f := *c.File
	f.NCCL = v.String()
	out := &Outcome{}
	progRank := make([]int, len(f.Programs))
	for pi, p := range f.Programs {
		progRank[pi] = p.Rank
		out.Ranks[p.Rank].Ops = make([]OpOutcome, len(p.Ops))
		for oi, op := range p.Ops {
			out.Ranks[p.Rank].Ops[oi] = OpOutcome{Kind: op.Op, Status: "not reached", Post: -1}
		}
	}
	var origin [Ranks]sim.Time
	var started [Ranks]bool
	finished := func(pi, oi int, start, end sim.Time, value uint64) {
		r := progRank[pi]
		if !started[r] {
			origin[r], started[r] = start, true
		}
		o := &out.Ranks[r].Ops[oi]
		o.Status, o.Value, o.Start, o.End = "ok", value, start.Sub(origin[r]), end.Sub(origin[r])
	}
	// When the proxy posted each op's descriptor: its Doorbell event (at
	// ibv_post_send's return), paired with the op's ranks by its Issued.
	var taken [Ranks][Ranks][]sim.Time
	ranks := map[obs.OpID][2]uint64{}
	bus := obs.NewBus(obs.Func(func(ev obs.Event) {
		switch ev.Kind {
		case obs.Issued:
			ranks[ev.Op] = [2]uint64{ev.Index, ev.Value}
		case obs.Doorbell:
			if rp, ok := ranks[ev.Op]; ok && rp[0] < Ranks && rp[1] < Ranks {
				taken[rp[0]][rp[1]] = append(taken[rp[0]][rp[1]], ev.At)
			}
		}
	}))
	e.comm.SetObserver(bus)
	e.proxy.SetObserver(bus)
	if _, err := prog.LaunchObserved(e.dc, &f, finished); err != nil {
		return nil, err
	}
	if err := e.sim.Run(); err != nil {
		// A usage error the model checks (NCCL leaves it undefined): the
		// outcome is that error.
		out.Err = err.Error()
	}
	for r := range Ranks {
		ro := &out.Ranks[r]
		ro.Finished = true
		for _, o := range ro.Ops {
			if o.Status != "ok" {
				ro.Finished, ro.Msg = false, "blocked on "+o.Kind
				break
			}
		}
		var next [Ranks]int
		for i := range ro.Ops {
			o := &ro.Ops[i]
			p := f.Programs[progIndex(f.Programs, r)].Ops[i].Peer
			if !posts(o.Kind) || o.Status != "ok" {
				continue
			}
			if k := next[p]; k < len(taken[r][p]) {
				o.Post = taken[r][p][k].Sub(origin[r])
			}
			next[p]++
		}
		for id := range s.Signals {
			reg, off := e.proxy.SignalWord(e.dc, r, 0, id)
			ro.Signals = append(ro.Signals, reg.Load64(off))
		}
		for id := range s.Counters {
			reg, off := e.proxy.CounterWord(e.dc, r, 0, id)
			ro.Counters = append(ro.Counters, reg.Load64(off))
		}
		for _, w := range wins {
			h := fnv.New64a()
			h.Write(w.Region(r).Bytes())
			ro.Windows = append(ro.Windows, h.Sum64())
		}
	}
	return out, nil
}

func progIndex(ps []prog.Program, rank int) int {
	for i, p := range ps {
		if p.Rank == rank {
			return i
		}
	}
	return -1
}

// env is the model side of a device run: ranks 0 and 1 are GPU 0 of
// nodes 0 and 1 (two hosts, as NCCL_HOSTID makes them on the device),
// joined by the proxy backend.
type env struct {
	sim   *sim.Sim
	comm  *gin.Comm
	dc    *gin.DevComm
	proxy *proxy.Backend
}

func newEnv(cluster string, v gin.Version, s Setup) (*env, error) {
	spec, err := machine.Resolve(cluster)
	if err != nil {
		return nil, fmt.Errorf("hw: %w", err)
	}
	if spec.Nodes == 1 {
		return nil, fmt.Errorf("hw: cluster %q has one node; the device run's ranks are two hosts", spec.Name)
	}
	spec.GPUsPerNode = min(spec.GPUsPerNode, 2) // two GPUs a node keep the model small; rank 1 is node 1's GPU 0
	e := &env{sim: sim.New(sim.Config{})}
	m, err := machine.Build(e.sim, spec, 2)
	if err != nil {
		return nil, fmt.Errorf("hw: %w", err)
	}
	var ranks []*gin.Rank
	for i, w := range []int{0, spec.GPUsPerNode} {
		r := *m.Ranks[w]
		r.World = i
		ranks = append(ranks, &r)
	}
	if e.proxy, err = proxy.New(proxy.DefaultConfig()); err != nil {
		return nil, err
	}
	cfg := gin.CommConfig{Version: v, Backends: map[gin.Type]gin.Backend{gin.TypeProxy: e.proxy}}
	if e.comm, err = gin.NewComm(ranks, cfg); err != nil {
		return nil, fmt.Errorf("hw: %w", err)
	}
	req := gin.Requirements{GinContextCount: 1, GinSignalCount: s.Signals, GinCounterCount: s.Counters,
		RailGinBarrierCount: s.RailBarriers, ConnectionType: gin.ConnFull, Type: gin.TypeProxy}
	if e.dc, err = e.comm.DevCommCreate(req); err != nil {
		return nil, fmt.Errorf("hw: %w", err)
	}
	return e, nil
}
