package backendtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// Putter is a sending warp without a process: N puts of 4 KiB with a
// SignalInc to peer 1, through PutThen (SignalThen for the odd ones with
// Sig; with Agg all but the last aggregate; Opts on every one).
type Putter struct {
	E    *bench.Env
	T    *gpu.Group
	N    int
	Agg  bool
	Sig  bool
	Opts []gin.OptFlags

	g *gin.Gin
	i int
}

// Handle implements sim.Handler: the next operation, or the end.
func (p *Putter) Handle(*sim.Sim, uint64) {
	if p.g == nil {
		p.g = p.E.Dev.Gin(p.T, 0, 0)
	}
	if p.i == p.N {
		p.T.End()
		return
	}
	i := p.i
	p.i++
	opts := p.Opts
	if p.Agg && i < p.N-1 {
		opts = append(opts, gin.OptAggregateRequests)
	}
	if p.Sig && i%2 == 1 {
		p.g.SignalThen(p, 0, p.E.Dev.World(0), 1, gin.SignalAdd{Signal: 1, Value: uint64(i)}, opts...)
		return
	}
	p.g.PutThen(p, 0, p.E.Dev.World(0), 1, p.E.Win, uint64(i)*4096, p.E.Win, 0, 4096, gin.SignalInc{Signal: 0}, nil, opts...)
}

// TwoSenders runs two 32-thread warps on rank 0 of the env of cfg that
// each issue six operations on one channel (4 KiB puts with a signal;
// with sig, the odd ones are signals; with agg, all but the last
// aggregate) and returns the recorded timeline: with then the warps are
// Putters without a process, otherwise processes (Put, Signal).
func TwoSenders(t *testing.T, cfg bench.EnvConfig, then, agg, sig bool) string {
	t.Helper()
	e, err := bench.NewEnv(cfg)
	require.NoError(t, err)
	l := e.Record()
	for w := range 2 {
		name := "w" + string(rune('0'+w))
		if then {
			p := &Putter{E: e, N: 6, Agg: agg, Sig: sig}
			p.T = e.Ranks[0].GPU.LaunchHandler(name, 32, p, 0)
			continue
		}
		e.Ranks[0].GPU.Launch(name, 32, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			for i := range 6 {
				var opts []gin.OptFlags
				if agg && i < 5 {
					opts = append(opts, gin.OptAggregateRequests)
				}
				if sig && i%2 == 1 {
					g.Signal(e.Dev.World(0), 1, gin.SignalAdd{Signal: 1, Value: uint64(i)}, opts...)
					continue
				}
				g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*4096, e.Win, 0, 4096, gin.SignalInc{Signal: 0}, nil, opts...)
			}
		})
	}
	require.NoError(t, e.Sim.Run())
	return l.String()
}

// flusher puts n records to peer 1, flushes and puts once more, as a
// state machine (PutThen, FlushThen).
type flusher struct {
	e    *bench.Env
	t    *gpu.Group
	g    *gin.Gin
	n, i int
	end  *sim.Time
}

func (f *flusher) Handle(*sim.Sim, uint64) {
	if f.g == nil {
		f.g = f.e.Dev.Gin(f.t, 0, 0)
	}
	i := f.i
	f.i++
	switch {
	case i < f.n:
		f.g.PutThen(f, 0, f.e.Dev.World(0), 1, f.e.Win, uint64(i)*4096, f.e.Win, 0, 4096, nil, nil)
	case i == f.n:
		f.g.FlushThen(f, 0)
	case i == f.n+1:
		*f.end = f.t.Now()
		f.g.PutThen(f, 0, f.e.Dev.World(0), 1, f.e.Win, 0, f.e.Win, 0, 4096, nil, nil)
	default:
		f.t.End()
	}
}

// Flush runs, on rank 0 of the env of cfg, a 32-thread warp that puts five
// 4-KiB records to peer 1, flushes and puts once more, and returns the
// recorded timeline and when the flush returned: with then the warp is a
// state machine (PutThen, FlushThen), otherwise a process (Put, Flush).
// With get another warp first reads 4 KiB from peer 1 on the same
// context.
func Flush(t *testing.T, cfg bench.EnvConfig, get, then bool) (string, sim.Time) {
	t.Helper()
	e, err := bench.NewEnv(cfg)
	require.NoError(t, err)
	l := e.Record()
	var end sim.Time
	if get {
		e.Ranks[0].GPU.Launch("g", 32, func(tg *gpu.Group) {
			e.Dev.Gin(tg, 0, 0).Get(e.Dev.World(0), 1, e.Win, 0, e.Win, 1<<20, 4096)
		})
	}
	if then {
		f := &flusher{e: e, n: 5, end: &end}
		f.t = e.Ranks[0].GPU.LaunchHandler("f", 32, f, 0)
	} else {
		e.Ranks[0].GPU.Launch("f", 32, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			for i := range 5 {
				g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*4096, e.Win, 0, 4096, nil, nil)
			}
			g.Flush()
			end = tg.Now()
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 4096, nil, nil)
		})
	}
	require.NoError(t, e.Sim.Run())
	return l.String(), end
}
