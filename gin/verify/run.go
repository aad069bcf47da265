package verify

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/prog"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
)

// Backends are the backends the suite runs on.
var Backends = []string{"gdaki", "proxy", "lsa"}

// Options select what a Runner runs.
type Options struct {
	// Backends and Versions to run on (empty: all).
	Backends []string
	Versions []gin.Version
	// Tests names the tests to run (empty: all).
	Tests []string
	// Schedules is how many explored schedules each (test, backend,
	// version) gets (0: 8).
	Schedules int
	// Schedule, when set, runs only that schedule (a replay).
	Schedule *Schedule
	// Mutant, when set, is switched on in every run.
	Mutant *Mutant
	// Stop, when set, is asked before each run; true ends the run early
	// (a wall-clock budget kept by the caller).
	Stop func() bool
	// Program, when set, replaces the suite: the user's programs are run
	// under every schedule and checked for errors and for outcomes that
	// depend on the schedule.
	Program *prog.File
	// ProgramName is how replay commands name Program's file.
	ProgramName string
	// Exhaustive, when above 0, replaces the seeded exploration by the
	// enumeration of every order of same-instant events that deviates
	// from the scheduling order at most Exhaustive times, on the
	// unperturbed model (seed 1, no faults).
	Exhaustive int
	// MaxSchedules caps an exhaustive enumeration per test, backend and
	// version (0: 5000).
	MaxSchedules int
	// AnyOrder lets tie perturbations reorder even one component's
	// same-instant events (see Schedule.AnyOrder).
	AnyOrder bool
	// Exec runs the (test, backend, version) runs, possibly at once
	// (nil: one after another; internal/par.Pool's Exec from the CLI).
	// The report does not depend on it; Stop must then be safe to call
	// from several goroutines.
	Exec sim.Exec
}

// Result is the verdict of one test on one backend and version.
type Result struct {
	Name      string `json:"name"`
	Guarantee string `json:"guarantee"`
	Kind      string `json:"kind"`
	Backend   string `json:"backend"`
	NCCL      string `json:"nccl"`
	Passed    bool   `json:"passed"`
	// Schedules is how many schedules ran.
	Schedules int `json:"schedules"`
	// Failure says why it failed (empty when it passed).
	Failure string `json:"failure,omitempty"`
	// Replay is the command that replays the failure (or, for a passing
	// non-guarantee, the schedule that showed the surprise).
	Replay string `json:"replay,omitempty"`
	// Shrunk is the minimal failing program (program mode), if shrinking
	// removed ops.
	Shrunk *prog.File `json:"-"`
	// Outcomes is how many distinct outcomes an exhaustive enumeration
	// saw; Exhausted is true when it explored every schedule within its
	// bound (false: stopped by MaxSchedules, the budget or a verdict).
	Outcomes  int  `json:"outcomes,omitempty"`
	Exhausted bool `json:"exhausted,omitempty"`
}

// Report is a run's results.
type Report struct {
	Tests  []Result `json:"tests"`
	Passed int      `json:"passed"`
	Failed int      `json:"failed"`
	// Stopped is true when the budget ended the run early.
	Stopped bool `json:"stopped,omitempty"`
}

// Runner runs litmus tests.
type Runner struct {
	opt      Options
	patterns [][]byte
}

// NewRunner returns a runner for opt.
func NewRunner(opt Options) *Runner {
	if opt.Schedules <= 0 {
		opt.Schedules = 8
	}
	r := &Runner{opt: opt}
	// Built up front: runs may go side by side (Exec) and then only read.
	for rank := range cachedPatterns {
		r.patterns = append(r.patterns, pattern(rank))
	}
	return r
}

// cachedPatterns is how many ranks' window patterns a Runner keeps (the
// suite's programs use at most four ranks).
const cachedPatterns = 8

func (r *Runner) pattern(rank int) []byte {
	if rank < len(r.patterns) {
		return r.patterns[rank]
	}
	return pattern(rank)
}

func (r *Runner) stop() bool { return r.opt.Stop != nil && r.opt.Stop() }

// Run runs the selected tests and returns the report.
func (r *Runner) Run() *Report {
	rep := &Report{}
	tests := Suite()
	if r.opt.Program != nil {
		tests = []Test{programTest(r.opt.Program, r.opt.ProgramName)}
	}
	type job struct {
		t *Test
		b string
		v gin.Version
	}
	var jobs []job
	for i := range tests {
		t := &tests[i]
		if len(r.opt.Tests) > 0 && !slices.Contains(r.opt.Tests, t.Name) {
			continue
		}
		for _, b := range t.Backends {
			if len(r.opt.Backends) > 0 && !slices.Contains(r.opt.Backends, b) {
				continue
			}
			if m := r.opt.Mutant; m != nil && m.Backends != nil && !slices.Contains(m.Backends, b) {
				continue
			}
			for _, v := range t.Versions {
				if len(r.opt.Versions) > 0 && !slices.Contains(r.opt.Versions, v) {
					continue
				}
				jobs = append(jobs, job{t, b, v})
			}
		}
	}
	// Each run builds its own machines: they may run at once, and the
	// report keeps the suite's order whatever the Exec.
	res := make([]Result, len(jobs))
	ran := make([]bool, len(jobs))
	exec := r.opt.Exec
	if exec == nil {
		exec = sim.Serial
	}
	exec(len(jobs), func(i int) {
		if r.stop() {
			return
		}
		res[i], ran[i] = r.runOne(jobs[i].t, jobs[i].b, jobs[i].v), true
	})
	for i := range jobs {
		if !ran[i] {
			rep.Stopped = true
			break
		}
		rep.Tests = append(rep.Tests, res[i])
		if res[i].Passed {
			rep.Passed++
		} else {
			rep.Failed++
		}
	}
	return rep
}

// schedules returns the schedules to explore.
func (r *Runner) schedules() []Schedule {
	if r.opt.Schedule != nil {
		return []Schedule{*r.opt.Schedule}
	}
	out := make([]Schedule, r.opt.Schedules)
	for i := range out {
		out[i] = Explore(i)
		out[i].AnyOrder = r.opt.AnyOrder && out[i].Ties != 0
	}
	return out
}

// scheduler hands out the schedules of one test: the explored list, or an
// exhaustive enumeration driven by what each run's choices were.
type scheduler struct {
	list []Schedule
	i    int

	exh      bool
	any      bool
	bound    int
	max      int
	prefix   []int // next schedule's choices; nil when the enumeration is over
	outcomes map[string]bool
	ran      int
}

func (r *Runner) scheduler() *scheduler {
	if r.opt.Exhaustive <= 0 || r.opt.Schedule != nil {
		return &scheduler{list: r.schedules()}
	}
	m := r.opt.MaxSchedules
	if m <= 0 {
		m = 5000
	}
	return &scheduler{exh: true, any: r.opt.AnyOrder, bound: r.opt.Exhaustive, max: m, prefix: []int{}, outcomes: map[string]bool{}}
}

// next returns the next schedule to run, false when there is none.
func (sc *scheduler) next() (Schedule, bool) {
	if !sc.exh {
		if sc.i >= len(sc.list) {
			return Schedule{}, false
		}
		sc.i++
		return sc.list[sc.i-1], true
	}
	if sc.prefix == nil || sc.ran >= sc.max {
		return Schedule{}, false
	}
	return Schedule{Seed: 1, Choices: sc.prefix, AnyOrder: sc.any}, true
}

// done records the outcome of the schedule next returned and, when
// enumerating, moves to the next order in depth-first order: the last
// choice point that has an untried alternative within the bound on
// deviations from the scheduling order.
func (sc *scheduler) done(o *Outcome) {
	if !sc.exh {
		return
	}
	sc.ran++
	sc.outcomes[outcomeKey(o)] = true
	c := o.choices
	sc.prefix = nil
	if c == nil {
		return
	}
	dev := make([]int, len(c.picks)+1) // dev[j]: deviations among picks[:j]
	for j, p := range c.picks {
		dev[j+1] = dev[j]
		if p != 0 {
			dev[j+1]++
		}
	}
	for j := len(c.picks) - 1; j >= 0; j-- {
		if c.picks[j]+1 < c.n[j] && dev[j]+1 <= sc.bound {
			sc.prefix = append(slices.Clone(c.picks[:j]), c.picks[j]+1)
			return
		}
	}
}

// exhausted reports whether the enumeration explored every schedule.
func (sc *scheduler) exhausted() bool { return sc.exh && sc.prefix == nil }

// replayable is s with its trailing default choices trimmed, for a replay
// command (no choices left: the kernel's own order).
func replayable(s Schedule) Schedule {
	if s.Choices == nil {
		return s
	}
	c := s.Choices
	for len(c) > 0 && c[len(c)-1] == 0 {
		c = c[:len(c)-1]
	}
	s.Choices = nil
	if len(c) > 0 {
		s.Choices = slices.Clone(c)
	}
	return s
}

// outcomeKey identifies what a run observed: its error, and every op's
// value and bytes.
func outcomeKey(o *Outcome) string {
	h := fnv.New64a()
	if o.Err != nil {
		fmt.Fprintf(h, "err %v\n", class(o.Err))
		if class(o.Err) == nil {
			h.Write([]byte(o.Err.Error()))
		}
	}
	if o.Res != nil {
		for _, p := range o.Res.Ops {
			for _, x := range p {
				fmt.Fprintf(h, "%t %d %x;", x.Done, x.Value, x.Bytes)
			}
			h.Write([]byte{'\n'})
		}
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// verdict is one schedule's judgement: bad (a guarantee broken or a rule
// not reported), surprise (a non-guarantee shown).
type verdict struct {
	bad      error
	surprise bool
	out      *Outcome
}

func (r *Runner) judge(t *Test, o *Outcome) verdict {
	v := verdict{out: o}
	switch t.Kind {
	case Rule:
		if !errors.Is(o.Err, t.Expect) {
			v.bad = fmt.Errorf("the violation was not reported as %v (run error: %v)", t.Expect, o.Err)
		}
	case NonGuarantee:
		if o.Err != nil {
			v.bad = o.Err
		} else if t.Allowed(o) != nil {
			v.surprise = true
		}
	default:
		if o.Err != nil {
			v.bad = o.Err
		} else if err := t.Allowed(o); err != nil {
			v.bad = err
		}
	}
	return v
}

func (r *Runner) runOne(t *Test, b string, v gin.Version) (res Result) {
	res = Result{Name: t.Name, Guarantee: t.Spec, Kind: t.Kind.String(), Backend: b, NCCL: v.String()}
	f := t.Program(v, b)
	var first *Outcome
	if t.Kind == programKind && r.opt.Schedule != nil {
		// A replayed race compares with the unperturbed schedule.
		if o := r.exec(t, f, b, v, Explore(0)); o.Err == nil {
			first = o
		}
	}
	sc := r.scheduler()
	defer func() {
		if sc.exh {
			res.Outcomes, res.Exhausted = len(sc.outcomes), sc.exhausted()
		}
	}()
	for {
		s, ok := sc.next()
		if !ok || (res.Schedules > 0 && r.stop()) {
			break
		}
		o := r.exec(t, f, b, v, s)
		sc.done(o)
		s = replayable(s)
		res.Schedules++
		vd := r.judge(t, o)
		if t.Kind == programKind && vd.bad == nil {
			if first == nil {
				first = o
			} else if err := sameOutcome(f, first, o); err != nil {
				vd.bad = fmt.Errorf("the outcome depends on the schedule (a race on what GIN does not order): %v (schedule %v vs %v)", err, Explore(0), s)
				// Shrinking compares with schedule 0; keep it first.
			}
		}
		switch {
		case vd.bad != nil:
			s, f2 := r.shrink(t, f, b, v, s, class(vd.bad))
			res.Failure = vd.bad.Error()
			res.Replay = r.replay(t, b, v, s)
			if len(opsOf(f2)) < len(opsOf(f)) {
				res.Shrunk = f2
			}
			return res
		case vd.surprise:
			res.Passed = true
			res.Replay = r.replay(t, b, v, s)
			return res
		}
	}
	if t.Kind == NonGuarantee {
		res.Failure = fmt.Sprintf("the surprising outcome was never produced in %d schedules", res.Schedules)
		res.Replay = r.replay(t, b, v, Explore(0))
		return res
	}
	res.Passed = true
	return res
}

// replay is the command that reruns one schedule of a test.
func (r *Runner) replay(t *Test, b string, v gin.Version, s Schedule) string {
	cmd := "ginsim verify"
	if r.opt.Program != nil {
		cmd += " --program " + r.opt.ProgramName
	} else {
		cmd += " --test " + t.Name
	}
	cmd += fmt.Sprintf(" --backend %s --nccl %s --schedule %s", b, v, s)
	if r.opt.Mutant != nil {
		cmd += " --mutant " + r.opt.Mutant.Name
	}
	return cmd
}

// errRace classes a schedule-dependent outcome.
var errRace = errors.New("race")

// class is what shrinking must preserve of a failure: the gin error kind,
// a deadlock, a race, or any other failure.
func class(err error) error {
	var ge *gin.Error
	var de *gin.DeadlockError
	switch {
	case errors.As(err, &ge):
		return ge.Kind
	case errors.As(err, &de):
		return gin.ErrDeadlock
	case strings.Contains(err.Error(), "depends on the schedule"):
		return errRace
	}
	return nil
}

// fails reports whether schedule s of program f still breaks t the same
// way (class want).
func (r *Runner) fails(t *Test, f *prog.File, b string, v gin.Version, s Schedule, want error) bool {
	o := r.exec(t, f, b, v, s)
	vd := r.judge(t, o)
	if t.Kind != programKind {
		return vd.bad != nil
	}
	if want == errRace {
		if o.Err != nil {
			return false
		}
		base := r.exec(t, f, b, v, Explore(0))
		return base.Err == nil && sameOutcome(f, base, o) != nil
	}
	return vd.bad != nil && class(vd.bad) == want
}

// shrink makes a failure smaller: fewer schedule perturbations, then (for
// user programs) fewer ops, as long as it still fails.
func (r *Runner) shrink(t *Test, f *prog.File, b string, v gin.Version, s Schedule, want error) (Schedule, *prog.File) {
	if r.opt.Schedule != nil {
		return s, f
	}
	for again := true; again; {
		again = false
		for _, c := range s.simpler() {
			if r.fails(t, f, b, v, c, want) {
				s, again = c, true
				break
			}
		}
	}
	if t.Kind != programKind {
		return s, f
	}
	for tries := 0; tries < 200; {
		removed := false
		for pi := range f.Programs {
			for oi := range f.Programs[pi].Ops {
				tries++
				g := withoutOp(f, pi, oi)
				if r.fails(t, g, b, v, s, want) {
					f, removed = g, true
					break
				}
			}
			if removed {
				break
			}
		}
		if !removed {
			break
		}
	}
	return s, f
}

func opsOf(f *prog.File) []prog.Op {
	var out []prog.Op
	for _, p := range f.Programs {
		out = append(out, p.Ops...)
	}
	return out
}

func withoutOp(f *prog.File, pi, oi int) *prog.File {
	g := *f
	g.Programs = slices.Clone(f.Programs)
	g.Programs[pi].Ops = slices.Delete(slices.Clone(f.Programs[pi].Ops), oi, oi+1)
	return &g
}

// exec runs program f of test t once.
func (r *Runner) exec(t *Test, f *prog.File, b string, v gin.Version, s Schedule) *Outcome {
	o := &Outcome{Pattern: r.pattern}
	cfg := bench.EnvConfig{Backend: b, Version: v, Seed: s.Seed, Contexts: max(1, t.Setup.Contexts), Signals: 8, Counters: 4,
		WindowBytes: winLen, Backed: true, RailGinBarriers: t.Setup.RailGinBarriers, LSABarriers: t.Setup.LSABarriers,
		Strict: b != "lsa" && v == gin.V2_30, FourRanks: t.Setup.FourRanks, BarrierCount: t.Setup.Barriers}
	if t.Setup.WorldGinBarrier && v == gin.V2_30 {
		cfg.WorldGinBarriers = 1
	}
	switch b {
	case "gdaki":
		c := gdaki.DefaultConfig()
		cfg.GDAKI = &c
	case "proxy":
		c := proxy.DefaultConfig()
		// Seeds alternate where the thread's consumer indices and counters
		// live, both placements NCCL builds: odd seeds (seed=1 is the
		// unperturbed schedule) in GPU memory behind GDRCopy, where the
		// GPU posts faster than the thread retires; even seeds in pinned
		// host memory, NCCL's default, where every credit check and
		// counter poll crosses PCIe.
		c.GDRCopy = s.Seed%2 == 1
		if k := sim.Duration(s.Stall); k > 1 {
			c.PassCost *= k
			c.YieldCost *= k
			c.PollCQCost *= k
		}
		cfg.Proxy = &c
	}
	k := max(sim.Duration(s.Poll), 1)
	if k > 1 || s.Faults == "jitter" {
		jitter := s.Faults == "jitter"
		cfg.Tune = func(p *machine.Profile) {
			p.GPU.PollInterval *= k
			p.NIC.AckDelay *= k
			if jitter {
				p.GPU.WriteJitter = 2 * sim.Microsecond
			}
		}
	}
	if r.opt.Mutant != nil {
		r.opt.Mutant.Apply(&cfg)
	}
	e, err := bench.NewEnv(cfg)
	if err != nil {
		o.Err = err
		return o
	}
	defer e.Sim.Shutdown()
	if c, order := s.chooser(); c != nil {
		e.Sim.SetTies(c, order)
		o.choices = c
	}
	if s.Faults != "" && b != "lsa" {
		if err := e.Machine.Net.SetGlobalFaults(s.faults()); err != nil {
			o.Err = err
			return o
		}
	}
	for rk := range e.Ranks {
		e.Win.Region(rk).Write(0, r.pattern(rk), winLen, "init")
	}
	_, res, err := prog.LaunchResults(e.Dev, f)
	o.Res = res
	if err != nil {
		o.Err = err
		return o
	}
	if err := e.Sim.Run(); err != nil {
		o.Err = err
		return o
	}
	if err := e.Comm.CheckDeadlock(); err != nil {
		o.Err = err
		return o
	}
	for pi, p := range res.Ops {
		for oi, x := range p {
			if !x.Done {
				o.Err = fmt.Errorf("program %d (rank %d) op %d (%s) never returned", pi, f.Programs[pi].Rank, oi, f.Programs[pi].Ops[oi].Op)
				return o
			}
		}
	}
	return o
}

// programKind marks a user program run (--program).
const programKind Kind = 100

// programTest wraps a user's program file as a test: it must run without
// errors, and what its reads return must not depend on the schedule.
func programTest(f *prog.File, name string) Test {
	v := gin.V2_30
	if f.NCCL == "2.28" {
		v = gin.V2_28
	}
	t := Test{Name: "program", Spec: "user program " + name, Kind: programKind, Backends: Backends, Versions: []gin.Version{v},
		Program: func(gin.Version, string) *prog.File { return f },
		Allowed: func(*Outcome) error { return nil }}
	for _, p := range f.Programs {
		for _, op := range p.Ops {
			t.Setup.Contexts = max(t.Setup.Contexts, op.Ctx+1)
			if op.Op == "barrier" {
				switch op.Kind {
				case "rail_gin":
					t.Setup.RailGinBarriers = max(t.Setup.RailGinBarriers, op.Index+1)
				case "world_gin":
					t.Setup.WorldGinBarrier = true
				case "lsa":
					t.Setup.LSABarriers = max(t.Setup.LSABarriers, op.Index+1)
				}
			}
		}
	}
	return t
}

// sameOutcome compares what the reads of two runs returned (window bytes,
// signal and counter reads; waits may see any value past their threshold).
func sameOutcome(f *prog.File, a, b *Outcome) error {
	for pi, p := range f.Programs {
		for oi, op := range p.Ops {
			x, y := a.Res.Ops[pi][oi], b.Res.Ops[pi][oi]
			switch op.Op {
			case "read":
				if !bytes.Equal(x.Bytes, y.Bytes) {
					return fmt.Errorf("program %d (rank %d) op %d read different bytes", pi, p.Rank, oi)
				}
			case "read_signal", "read_counter":
				if x.Value != y.Value {
					return fmt.Errorf("program %d (rank %d) op %d (%s) read %d, then %d", pi, p.Rank, oi, op.Op, x.Value, y.Value)
				}
			}
		}
	}
	return nil
}

// String is a one-line summary of a result.
func (r Result) String() string {
	verdict := "ok  "
	if !r.Passed {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("%s %-28s %-6s %s  %2d schedules  [%s] %s", verdict, r.Name, r.Backend, r.NCCL, r.Schedules, r.Kind, r.Guarantee)
	if r.Outcomes > 0 {
		s += fmt.Sprintf(" (%d outcomes", r.Outcomes)
		if r.Exhausted {
			s += ", exhaustive"
		}
		s += ")"
	}
	if !r.Passed {
		s += "\n     " + strings.ReplaceAll(r.Failure, "\n", "\n     ") + "\n     replay: " + r.Replay
	}
	return s
}
