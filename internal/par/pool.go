package par

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Pool is a fixed set of worker goroutines that run the partitions of a
// sim.World window by window (its Exec method is a sim.Exec).
//
// A window is short (tens of microseconds on a fine-grained model), so the
// hand-off costs as much as the work if it goes through the scheduler.
// Between Execs a worker spins on the pool's generation counter for up to
// Spin before it parks on its own channel; the caller of Exec waits for
// the workers the same way. Indices are handed out from per-worker
// ranges: worker w first takes the indices of its own share, in order,
// from a counter on its own cache line (so a partition usually runs on
// the same core window after window), then takes what is left of the
// others' shares. Which goroutine runs which index never changes a
// World's results.
type Pool struct {
	workers int
	spin    atomic.Int64 // time.Duration
	ws      []worker     // ws[0] is the caller of Exec
	gen     atomic.Uint32
	left    atomic.Int32 // workers (not the caller) still running this Exec
	f       func(int)
	n       int
	closed  atomic.Bool
	// The caller parks on done when the workers take long.
	waiting atomic.Bool
	done    chan struct{}
}

// worker is one goroutine's share of the indices, padded to its own cache
// lines so that claiming an index does not disturb the others.
type worker struct {
	next   atomic.Int64
	end    int64
	asleep atomic.Bool
	wake   chan struct{}
	_      [96]byte
}

// DefaultSpin is how long an idle worker spins before it parks.
const DefaultSpin = 50 * time.Microsecond

// NewPool returns a pool of workers goroutines (at least one; the caller
// of Exec is one of them). workers <= 0 means runtime.GOMAXPROCS(0).
func NewPool(workers int) *Pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &Pool{workers: workers, ws: make([]worker, workers), done: make(chan struct{}, 1)}
	p.spin.Store(int64(DefaultSpin))
	for w := 1; w < workers; w++ {
		p.ws[w].wake = make(chan struct{}, 1)
		go p.loop(w)
	}
	return p
}

// SetSpin sets how long idle goroutines spin before parking (0: park at
// once).
func (p *Pool) SetSpin(d time.Duration) { p.spin.Store(int64(max(d, 0))) }

// Workers returns the number of goroutines that run work, the caller's
// included.
func (p *Pool) Workers() int { return p.workers }

// Exec runs f(0), ..., f(n-1) on the pool and returns when all have
// returned. It must not be called concurrently or after Close.
func (p *Pool) Exec(n int, f func(i int)) {
	if n <= 1 || p.workers == 1 {
		for i := range n {
			f(i)
		}
		return
	}
	k := min(p.workers, n)
	p.f, p.n = f, n
	for w := range p.ws {
		lo, hi := int64(w*n/k), int64((w+1)*n/k)
		if w >= k {
			lo, hi = int64(n), int64(n)
		}
		p.ws[w].next.Store(lo)
		p.ws[w].end = hi
	}
	p.left.Store(int32(p.workers - 1))
	p.gen.Add(1) // publishes f, n and the shares
	for w := 1; w < p.workers; w++ {
		if x := &p.ws[w]; x.asleep.Load() && x.asleep.CompareAndSwap(true, false) {
			x.wake <- struct{}{}
		}
	}
	p.drain(0)
	if p.left.Load() != 0 {
		p.await()
	}
	p.f = nil
}

// await waits, spinning then parked, for the workers to finish the Exec.
func (p *Pool) await() {
	if spinUntil(time.Duration(p.spin.Load()), func() bool { return p.left.Load() == 0 }) {
		return
	}
	p.waiting.Store(true)
	if p.left.Load() == 0 && p.waiting.CompareAndSwap(true, false) {
		return
	}
	<-p.done // the last worker saw waiting and took it back
}

// loop is worker w's goroutine.
func (p *Pool) loop(w int) {
	x := &p.ws[w]
	var seen uint32 // the generation before the first Exec, which may come before this goroutine starts
	for {
		for p.gen.Load() == seen {
			if spinUntil(time.Duration(p.spin.Load()), func() bool { return p.gen.Load() != seen }) {
				break
			}
			x.asleep.Store(true)
			// Work that came while parking is taken here unless Exec
			// (or Close) has taken the flag back, and then sends. The
			// wake-up may be stale (sent by an Exec, still waking the
			// others, for work this worker has already done): then the
			// generation is unchanged and the worker waits again.
			if p.gen.Load() == seen || !x.asleep.CompareAndSwap(true, false) {
				<-x.wake
			}
		}
		seen = p.gen.Load()
		if p.closed.Load() {
			return
		}
		p.drain(w)
		if p.left.Add(-1) == 0 && p.waiting.Load() && p.waiting.CompareAndSwap(true, false) {
			p.done <- struct{}{}
		}
	}
}

// drain runs indices of worker w's share, then what is left of the
// others', until none is left.
func (p *Pool) drain(w int) {
	f := p.f
	k := len(p.ws)
	for v := range k {
		x := &p.ws[(w+v)%k]
		for {
			i := x.next.Add(1) - 1
			if i >= x.end {
				break
			}
			f(int(i))
		}
	}
}

// spinUntil polls cond for up to d, yielding the processor now and then,
// and reports whether cond became true.
func spinUntil(d time.Duration, cond func() bool) bool {
	if d <= 0 {
		return cond()
	}
	var deadline time.Time
	for i := 0; ; i++ {
		if cond() {
			return true
		}
		if i&63 == 63 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(d)
			} else if now.After(deadline) {
				return false
			}
			runtime.Gosched()
		}
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	p.gen.Add(1)
	for w := 1; w < p.workers; w++ {
		if x := &p.ws[w]; x.asleep.CompareAndSwap(true, false) {
			x.wake <- struct{}{}
		}
	}
}
