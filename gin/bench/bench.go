package bench

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Ops are the benchmark operations (nccl-tests' GIN device API perf tests).
var Ops = []string{"put", "put_signal", "put_counter", "signal", "put_value", "get"}

// Options configure one benchmark.
type Options struct {
	Env     EnvConfig
	Op      string // one of Ops
	Pattern string // ping, pingpong, bw
	Sizes   []uint64
	Iters   int // measured iterations per size (-n)
	Warmup  int // warm-up iterations per size (-w)
	CTAs    int // bw: CTAs (-c); each CTA uses its own context
	Threads int // bw: threads per CTA (-t), each a ncclCoopThread issuer
	Sharing gin.Sharing
	// Aggregate, SkipCredit and Strong are --gin_ag,
	// --gin_skip_credit_check and --gin_strong_signal.
	Aggregate, SkipCredit, Strong bool
	// Check runs the semantic checker (gin/check) beside each size's run:
	// Row.Check holds its report, and a violation fails the run.
	Check bool
}

// Row is one size's result.
type Row struct {
	Bytes uint64 `json:"bytes"`
	// LatencyUs is the one-way latency: time per iteration for ping,
	// half the round trip for pingpong, time per message for bw.
	LatencyUs float64 `json:"latency_us"`
	// BandwidthGBps is bytes moved per second (1e9).
	BandwidthGBps float64 `json:"bandwidth_GBps"`
	// MsgRateM is operations per microsecond (millions per second).
	MsgRateM float64 `json:"msg_rate_mops"`
	// ProxyCPU is the busiest proxy thread's utilisation (busy/span)
	// over the measured iterations; 0 for GDAKI.
	ProxyCPU float64 `json:"proxy_cpu_util,omitempty"`
	// Stats is the backend's accounting of the whole run of this size.
	Stats gin.BackendStats `json:"-"`
	// Check is the semantic checker's report (Options.Check).
	Check *check.Report `json:"check,omitempty"`
}

// Validate reports an unusable option set.
func (o *Options) Validate() error {
	ok := false
	for _, x := range Ops {
		ok = ok || x == o.Op
	}
	switch {
	case !ok:
		return fmt.Errorf("bench: unknown operation %q", o.Op)
	case o.Pattern != "ping" && o.Pattern != "pingpong" && o.Pattern != "bw":
		return fmt.Errorf("bench: unknown pattern %q (ping, pingpong, bw)", o.Pattern)
	case o.Pattern == "pingpong" && o.Op != "put_signal" && o.Op != "signal":
		return fmt.Errorf("bench: pingpong needs a signal to hand the turn over: use put_signal or signal, not %s", o.Op)
	case o.Iters < 1 || o.Warmup < 0:
		return fmt.Errorf("bench: iterations %d and warm-up %d", o.Iters, o.Warmup)
	case o.Pattern != "bw" && (o.CTAs > 1 || o.Threads > 1):
		return fmt.Errorf("bench: latency patterns run one thread (-c 1 -t 1)")
	case o.Aggregate && o.Pattern != "bw":
		return fmt.Errorf("bench: --gin_ag applies to bw only")
	case len(o.Sizes) == 0:
		return fmt.Errorf("bench: no sizes")
	case o.Env.Backend == "lsa" && o.Op != "put" && o.Op != "put_signal" && o.Op != "signal":
		return fmt.Errorf("bench: backend lsa runs put, put_signal and signal, not %s", o.Op)
	case o.Env.Backend == "lsa" && o.Aggregate:
		return fmt.Errorf("bench: --gin_ag applies to GIN backends, not lsa")
	case o.Env.Backend == "lsa" && o.Check:
		return fmt.Errorf("bench: --check applies to GIN backends, not lsa")
	}
	for _, n := range o.Sizes {
		if n > o.Env.WindowBytes && o.Env.WindowBytes != 0 {
			return fmt.Errorf("bench: size %d exceeds the window (%d)", n, o.Env.WindowBytes)
		}
	}
	return nil
}

// Run runs the benchmark once per size, each on a fresh machine.
func Run(o Options) ([]Row, error) {
	if o.CTAs < 1 {
		o.CTAs = 1
	}
	if o.Threads < 1 {
		o.Threads = 1
	}
	if o.Env.WindowBytes == 0 {
		o.Env.WindowBytes = max(4<<20, maxOf(o.Sizes))
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Pattern == "bw" {
		o.Env.Contexts = max(o.Env.Contexts, o.CTAs)
	}
	var rows []Row
	for _, n := range o.Sizes {
		r, err := runSize(o, n)
		if err != nil {
			return rows, fmt.Errorf("bench: %s %s %d B: %w", o.Op, o.Pattern, n, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func maxOf(xs []uint64) uint64 {
	var m uint64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// issuer carries out one iteration's operation.
type issuer struct {
	o     *Options
	e     *Env
	bytes uint64
}

func (is *issuer) flags() []gin.OptFlags {
	var f gin.OptFlags
	if is.o.SkipCredit {
		f |= gin.OptMaySkipCreditCheck
	}
	return []gin.OptFlags{f}
}

func (is *issuer) remote() gin.RemoteAction {
	return gin.SignalInc{Signal: 0, Weak: !is.o.Strong}
}

// op issues one operation from rank to peer on g; off selects the slot.
func (is *issuer) op(g *gin.Gin, rank, peer int, off uint64, extra gin.OptFlags) {
	e, team := is.e, is.e.Dev.World(rank)
	fl := is.flags()
	fl[0] |= extra
	w := e.Win
	switch is.o.Op {
	case "put":
		g.Put(team, peer, w, off, w, off, is.bytes, nil, nil, fl...)
	case "put_signal":
		g.Put(team, peer, w, off, w, off, is.bytes, is.remote(), nil, fl...)
	case "put_counter":
		g.Put(team, peer, w, off, w, off, is.bytes, nil, gin.CounterInc{Counter: 0}, fl...)
	case "signal":
		g.Signal(team, peer, is.remote(), fl...)
	case "put_value":
		g.PutValue(team, peer, w, off, 0x0123456789abcdef, int(min(is.bytes, 8)), nil, fl...)
	case "get":
		g.Get(team, peer, w, off, w, off, is.bytes, fl...)
	}
}

func runSize(o Options, n uint64) (Row, error) {
	if o.Env.Backend == "lsa" {
		return runLSA(o, n)
	}
	e, err := NewEnv(o.Env)
	if err != nil {
		return Row{}, err
	}
	is := &issuer{o: &o, e: e, bytes: n}
	var chk *check.Checker
	if o.Check {
		chk = check.New()
		e.Observe(chk)
	}
	total := o.Warmup + o.Iters
	var t0, t1 sim.Time
	var busy0 sim.Duration
	var span0 sim.Duration
	mark := func(t *gpu.Group, i int) {
		if i == o.Warmup {
			t0 = t.Now()
			busy0, span0 = proxyBusy(e)
		}
	}
	g0, g1 := e.Ranks[0].GPU, e.Ranks[1].GPU
	depth := e.Dev.QueueDepth()
	if depth == 0 {
		depth = 128
	}
	flushEvery := max(depth/2, 1)
	switch o.Pattern {
	case "ping":
		g0.Launch("ping", 1, func(t *gpu.Group) {
			g := e.Dev.GinShared(t, 0, 0, o.Sharing)
			for i := range total {
				mark(t, i)
				is.op(g, 0, 1, 0, 0)
				switch o.Op {
				case "put_counter":
					g.WaitCounter(0, uint64(i+1), 56)
				default:
					g.Flush()
				}
			}
			t1 = t.Now()
		})
	case "pingpong":
		for rank, gp := range []*gpu.GPU{g0, g1} {
			gp.Launch(fmt.Sprintf("pingpong%d", rank), 1, func(t *gpu.Group) {
				g := e.Dev.GinShared(t, rank, 0, o.Sharing)
				for i := range total {
					if rank == 0 {
						mark(t, i)
						if i > 0 {
							g.WaitSignal(0, uint64(i), 64)
						}
						is.op(g, 0, 1, 0, 0)
					} else {
						g.WaitSignal(0, uint64(i+1), 64)
						is.op(g, 1, 0, 0, 0)
					}
					if o.SkipCredit && i%flushEvery == 0 {
						g.Flush()
					}
				}
				if rank == 0 {
					g.WaitSignal(0, uint64(total), 64)
					t1 = t.Now()
				}
				g.Flush()
			})
		}
	case "bw":
		slots := max(o.Env.WindowBytes/max(n, 1), 1)
		bar := g0.Alloc("bench/ctabar", sim.Bytes(8*o.CTAs), true)
		for c := range o.CTAs {
			for th := range o.Threads {
				off := (uint64(c*o.Threads+th) % slots) * n
				g0.Launch(fmt.Sprintf("bw/cta%d/t%d", c, th), 1, func(t *gpu.Group) {
					g := e.Dev.GinShared(t, 0, c, o.Sharing)
					lastT := th == o.Threads-1
					perIter := o.Threads
					fe := max(depth/2/perIter, 1)
					for i := range total {
						if c == 0 && th == 0 {
							mark(t, i)
						}
						if o.Aggregate && !lastT {
							is.op(g, 0, 1, off, gin.OptAggregateRequests)
						}
						ctaBarrier(t, bar, c, o.Threads, uint64(2*i+1))
						if !o.Aggregate || lastT {
							is.op(g, 0, 1, off, 0)
						}
						if o.SkipCredit && i%fe == 0 {
							g.Flush()
						}
						ctaBarrier(t, bar, c, o.Threads, uint64(2*i+2))
					}
					g.Flush()
					if t.Now() > t1 {
						t1 = t.Now()
					}
				})
			}
		}
	}
	runErr := e.Sim.Run()
	if chk != nil {
		chk.End(runErr != nil)
		if runErr == nil {
			runErr = chk.Err()
		}
	}
	if runErr != nil {
		return Row{}, runErr
	}
	if t1 == 0 {
		return Row{}, fmt.Errorf("the benchmark kernel did not finish (deadlock: %v)", blocked(e))
	}
	el := t1.Sub(t0)
	msgs := float64(o.Iters)
	if o.Pattern == "bw" {
		msgs *= float64(o.CTAs * o.Threads)
	}
	r := Row{Bytes: n, Stats: e.Backend.Stats()}
	if chk != nil {
		rep := chk.Report()
		r.Check = &rep
	}
	lat := el.Us() / float64(o.Iters)
	if o.Pattern == "pingpong" {
		lat /= 2
	}
	r.LatencyUs = lat
	if o.Pattern == "bw" {
		r.LatencyUs = el.Us() / msgs
	}
	if el > 0 {
		r.BandwidthGBps = float64(n) * msgs / el.Seconds() / 1e9
		r.MsgRateM = msgs / el.Us()
	}
	if e.Proxy != nil {
		busy1, span1 := proxyBusy(e)
		if span1 > span0 {
			r.ProxyCPU = float64(busy1-busy0) / float64(el) / float64(len(e.Proxy.Servers()))
		}
	}
	return r, nil
}

// ctaBarrier is __syncthreads for groups standing for one CTA's threads: an
// arrival counter in GPU memory and a spin until all arrived.
func ctaBarrier(t *gpu.Group, r *mem.Region, cta, threads int, gen uint64) {
	if threads <= 1 {
		return
	}
	off := 8 * uint64(cta)
	t.AtomicAdd64(r, off, 1, gpu.ScopeBlock)
	want := gen * uint64(threads)
	t.WaitWord(r, off, "bench __syncthreads", func(v uint64) bool { return v >= want })
}

func proxyBusy(e *Env) (busy, span sim.Duration) {
	if e.Proxy == nil {
		return 0, 0
	}
	for _, s := range e.Proxy.Servers() {
		st := s.Stats()
		busy += st.Busy
		span += st.Span
	}
	return busy, span
}

func blocked(e *Env) []string {
	var out []string
	procs := e.Sim.Blocked
	if e.World != nil {
		procs = e.World.Blocked // every partition's, not partition 0's
	}
	for _, p := range procs() {
		_, why := p.Parked()
		out = append(out, p.Name()+": "+why)
	}
	return out
}
