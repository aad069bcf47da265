package par

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// ForEach runs f(0), ..., f(n-1), jobs at a time (at least one), each on
// its own goroutine, and returns the error of the lowest i that failed.
// They are launched in order, and no new one is launched once a failure
// has been seen, so every i below a failing one has run: the error does
// not depend on jobs. progress, when set, is called with (done, n) after
// each success, one call at a time.
func ForEach(n, jobs int, progress func(done, total int), f func(i int) error) error {
	errs := make([]error, n)
	var (
		mu     sync.Mutex
		done   int
		failed atomic.Bool
		g      errgroup.Group
	)
	g.SetLimit(max(jobs, 1))
	for i := range n {
		if failed.Load() {
			break
		}
		g.Go(func() error {
			if err := f(i); err != nil {
				errs[i] = err
				failed.Store(true)
				return nil
			}
			if progress != nil {
				mu.Lock()
				done++
				progress(done, n)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through errs
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
