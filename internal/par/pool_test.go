package par

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPoolRunsEachIndexOnce runs many Execs of varied sizes and checks
// that every index ran exactly once per Exec and that Exec returned only
// after all had.
func TestPoolRunsEachIndexOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		p := NewPool(workers)
		for round := range 200 {
			n := round % 37
			counts := make([]atomic.Int32, n)
			p.Exec(n, func(i int) { counts[i].Add(1) })
			for i := range counts {
				require.EqualValues(t, 1, counts[i].Load(), "workers %d round %d index %d", workers, round, i)
			}
			if round%50 == 0 {
				time.Sleep(2 * time.Millisecond) // let the workers block
			}
		}
		p.Close()
		p.Close()
	}
}

// TestPoolSharesUnevenWork gives one index most of the work: the others'
// workers must take the rest of its share, so all indices run.
func TestPoolSharesUnevenWork(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	var sum atomic.Int64
	p.Exec(64, func(i int) {
		if i == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		sum.Add(int64(i))
	})
	require.EqualValues(t, 64*63/2, sum.Load())
}

func BenchmarkPoolEmptyExec(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	f := func(int) {}
	for b.Loop() {
		p.Exec(128, f)
	}
}

// TestPoolManyShortExecs runs many tiny Execs on more workers than
// indices: each Exec wakes only the workers it needs.
func TestPoolManyShortExecs(t *testing.T) {
	p := NewPool(8)
	defer p.Close()
	var sum atomic.Int64
	for range 3000 {
		p.Exec(2, func(i int) { sum.Add(int64(i + 1)) })
	}
	require.EqualValues(t, 3*3000, sum.Load())
}
