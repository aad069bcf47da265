package traces

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	for _, c := range []struct {
		v    []int
		p    int
		want int
	}{
		{[]int{7}, 50, 7},
		{[]int{7}, 99, 7},
		{[]int{1, 2}, 50, 1},
		{[]int{1, 2}, 51, 2},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 91, 10},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 1, 1},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100, 10},
	} {
		if got := Percentile(c.v, c.p); got != c.want {
			t.Errorf("Percentile(%v, %d) = %d, want %d", c.v, c.p, got, c.want)
		}
	}
	// The nearest rank is ceil(p/100 × n), counted from 1, for every size.
	for n := 1; n <= 300; n++ {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i)
		}
		for _, p := range []int{1, 50, 90, 99, 100} {
			want := v[max(int(math.Ceil(float64(p)*float64(n)/100))-1, 0)]
			if got := Percentile(v, p); got != want {
				t.Fatalf("n=%d p=%d: %v, want %v", n, p, got, want)
			}
		}
	}
}
