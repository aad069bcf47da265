package par

import (
	"runtime"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines that run the partitions of a
// sim.World window by window (its Exec method is a sim.Exec).
//
// Each Exec hands every worker it needs one start token on the worker's
// own channel and waits for one done token: one token each way per Exec,
// so no wake-up can be lost or taken for another Exec's. Indices are
// handed out from per-worker ranges: worker w first takes the indices of
// its own share, in order, from a counter on its own cache line (so a
// partition usually runs on the same core window after window), then
// takes what is left of the others' shares. Which goroutine runs which
// index never changes a World's results.
type Pool struct {
	workers int
	ws      []worker // ws[0] is the caller of Exec
	left    atomic.Int32
	f       func(int)
	done    chan struct{}
	closed  bool
}

// worker is one goroutine's share of the indices, padded to its own cache
// lines so that claiming an index does not disturb the others.
type worker struct {
	next  atomic.Int64
	end   int64
	start chan struct{}
	_     [104]byte
}

// NewPool returns a pool of workers goroutines (at least one; the caller
// of Exec is one of them). workers <= 0 means runtime.GOMAXPROCS(0).
func NewPool(workers int) *Pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &Pool{workers: workers, ws: make([]worker, workers), done: make(chan struct{}, 1)}
	for w := 1; w < workers; w++ {
		c := make(chan struct{}, 1)
		p.ws[w].start = c
		go func() {
			for range c {
				p.drain(w)
				if p.left.Add(-1) == 0 {
					p.done <- struct{}{}
				}
			}
		}()
	}
	return p
}

// Workers returns the number of goroutines that run work, the caller's
// included.
func (p *Pool) Workers() int { return p.workers }

// Exec runs f(0), ..., f(n-1) on the pool and returns when all have
// returned. It must not be called concurrently or after Close.
func (p *Pool) Exec(n int, f func(i int)) {
	k := min(p.workers, n)
	if k <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	p.f = f
	for w := range p.ws {
		lo, hi := int64(w*n/k), int64((w+1)*n/k)
		if w >= k {
			lo, hi = int64(n), int64(n)
		}
		p.ws[w].next.Store(lo)
		p.ws[w].end = hi
	}
	p.left.Store(int32(k - 1))
	for w := 1; w < k; w++ {
		p.ws[w].start <- struct{}{} // publishes f and the shares
	}
	p.drain(0)
	<-p.done // the last worker's token: every index has run
	p.f = nil
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

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed {
		return
	}
	p.closed = true
	for w := 1; w < p.workers; w++ {
		close(p.ws[w].start)
	}
}
