package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines that run the partitions of a
// sim.World window by window (its Exec method is a sim.Exec). Work is
// handed out one index at a time, so a slow partition does not hold up the
// others' workers; which goroutine runs which index never changes a
// World's results.
type Pool struct {
	workers int
	start   []chan struct{}
	wg      sync.WaitGroup
	next    atomic.Int64
	n       int64
	f       func(int)
	closed  bool
}

// NewPool returns a pool of workers goroutines (at least one; the caller
// of Exec is one of them). workers <= 0 means runtime.GOMAXPROCS(0).
func NewPool(workers int) *Pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &Pool{workers: workers}
	for range workers - 1 {
		c := make(chan struct{})
		p.start = append(p.start, c)
		go func() {
			for range c {
				p.drain()
				p.wg.Done()
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
	if n <= 1 || len(p.start) == 0 {
		for i := range n {
			f(i)
		}
		return
	}
	p.f, p.n = f, int64(n)
	p.next.Store(0)
	k := min(len(p.start), n-1)
	p.wg.Add(k)
	for _, c := range p.start[:k] {
		c <- struct{}{}
	}
	p.drain()
	p.wg.Wait()
	p.f = nil
}

func (p *Pool) drain() {
	for {
		i := p.next.Add(1) - 1
		if i >= p.n {
			return
		}
		p.f(int(i))
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed {
		return
	}
	p.closed = true
	for _, c := range p.start {
		close(c)
	}
}
