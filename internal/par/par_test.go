package par

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every index runs once, results land by index, progress counts every
// success once and in order, and at most jobs run at a time.
func TestForEachRunsEachOnce(t *testing.T) {
	for _, jobs := range []int{0, 1, 3, 16} {
		t.Run(fmt.Sprint(jobs), func(t *testing.T) {
			const n = 40
			out := make([]int, n)
			var running, peak atomic.Int32
			var calls []int
			var totals []int
			err := ForEach(n, jobs, func(done, total int) {
				calls, totals = append(calls, done), append(totals, total)
			}, func(i int) error {
				r := running.Add(1)
				for {
					p := peak.Load()
					if r <= p || peak.CompareAndSwap(p, r) {
						break
					}
				}
				out[i] = i * i
				running.Add(-1)
				return nil
			})
			require.NoError(t, err)
			for i := range out {
				require.Equal(t, i*i, out[i])
			}
			require.Len(t, calls, n)
			for i, c := range calls {
				require.Equal(t, i+1, c)
				require.Equal(t, n, totals[i])
			}
			require.LessOrEqual(t, int(peak.Load()), max(jobs, 1))
		})
	}
}

// The error is the lowest failing index's whatever the number of jobs.
// With one job at most one more call starts after the failing one (the
// launch loop may already wait for its slot). With more, how many start
// after a failure depends on when the failing goroutine runs, which a
// loaded machine can delay past every launch: only the error is checked.
func TestForEachEarliestError(t *testing.T) {
	for _, jobs := range []int{1, 2, 8} {
		var started atomic.Int32
		err := ForEach(100, jobs, nil, func(i int) error {
			started.Add(1)
			if i == 5 || i == 7 {
				return fmt.Errorf("step %d", i)
			}
			return nil
		})
		require.EqualError(t, err, "step 5", "jobs %d", jobs)
		if jobs == 1 {
			require.LessOrEqual(t, int(started.Load()), 7, "one job: launches stop after the failure")
		}
	}
	require.NoError(t, ForEach(0, 4, nil, func(int) error { return errors.New("never") }))
}
