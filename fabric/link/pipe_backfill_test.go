package link

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ginsim/ginsim/sim"
)

// A backfilling pipe carries a transfer that is ready while the link idles
// before a later reservation; a FIFO pipe queues it behind.
func TestPipeBackfillUsesIdleGap(t *testing.T) {
	for _, bf := range []bool{false, true} {
		p := Pipe{Name: "x", Rate: 8 * sim.Gbps, Backfill: bf} // 1 ns per byte
		s1, e1 := p.ReserveStream(sim.Time(10*sim.Microsecond), 1000, 0)
		s2, e2 := p.ReserveStream(0, 100, 0)
		if s1 != sim.Time(10*sim.Microsecond) || e1 != s1.Add(1000*sim.Nanosecond) {
			t.Fatalf("backfill=%v: first [%v,%v)", bf, s1, e1)
		}
		want := sim.Time(0)
		if !bf {
			want = e1
		}
		if s2 != want || e2 != s2.Add(100*sim.Nanosecond) {
			t.Errorf("backfill=%v: second [%v,%v), want start %v", bf, s2, e2, want)
		}
		// Too long for the gap: it goes after the reservation.
		s3, _ := p.ReserveStream(sim.Time(9900*sim.Nanosecond), 500, 0)
		if s3 < e1 {
			t.Errorf("backfill=%v: a 500 ns transfer at 9.9 us started at %v, inside [%v,%v)", bf, s3, s1, e1)
		}
	}
}

// Random reservations on a backfilling pipe never overlap, never start
// before they are ready, and hold at least until minEnd.
func TestPipeBackfillNeverDoubleBooks(t *testing.T) {
	type iv struct{ a, b sim.Time }
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		p := Pipe{Name: "x", Rate: 8 * sim.Gbps, Backfill: true}
		var got []iv
		now := sim.Time(0)
		for range 400 {
			now = now.Add(sim.Duration(r.IntN(200)) * sim.Nanosecond)
			p.Forget(now)
			at := now.Add(sim.Duration(r.IntN(3000)) * sim.Nanosecond)
			n := sim.Bytes(r.IntN(400) + 1)
			var minEnd sim.Time
			if r.IntN(4) == 0 {
				minEnd = at.Add(sim.Duration(r.IntN(800)) * sim.Nanosecond)
			}
			s, e := p.ReserveStream(at, n, minEnd)
			if s < at || e < s.Add(p.Rate.TxTime(n)) || e < minEnd {
				t.Fatalf("seed %d: [%v,%v) for at %v, %d B, minEnd %v", seed, s, e, at, n, minEnd)
			}
			got = append(got, iv{s, e})
		}
		slices.SortFunc(got, func(x, y iv) int { return int(x.a - y.a) })
		for i := 1; i < len(got); i++ {
			if got[i].a < got[i-1].b {
				t.Fatalf("seed %d: [%v,%v) overlaps [%v,%v)", seed, got[i].a, got[i].b, got[i-1].a, got[i-1].b)
			}
		}
	}
}

// PCIe order on a backfilling pipe: a source's later transfer never passes
// its earlier posted write, even if it would fit a gap; a posted write may
// pass the same source's earlier completion; another source may use the gap.
func TestPipeReserveOrdered(t *testing.T) {
	ns := func(n int64) sim.Time { return sim.Time(n * int64(sim.Nanosecond)) }
	p := Pipe{Name: "x", Rate: 8 * sim.Gbps, Backfill: true} // 1 ns per byte
	// Source 1 books a posted write for 10 us, then a small write ready at 0.
	w1, _ := p.ReserveOrdered(1, true, ns(10000), 1000, 0)
	w2, _ := p.ReserveOrdered(1, true, 0, 100, 0)
	if w1 != ns(10000) || w2 < w1 {
		t.Errorf("source 1's second write started at %v, before its first at %v", w2, w1)
	}
	// Source 2 may use the gap before 10 us.
	if s, _ := p.ReserveOrdered(2, true, 0, 100, 0); s != 0 {
		t.Errorf("source 2's write started at %v, want 0 (the gap)", s)
	}
	// Source 3: a completion booked for 20 us, then a write ready at 1 us
	// may pass it; a read request after that write may not pass the write.
	c, _ := p.ReserveOrdered(3, false, ns(20000), 100, 0)
	w, _ := p.ReserveOrdered(3, true, ns(1000), 100, 0)
	r, _ := p.ReserveOrdered(3, false, ns(500), 10, 0)
	if w >= c {
		t.Errorf("source 3's write at %v did not pass its completion at %v", w, c)
	}
	if r < w {
		t.Errorf("source 3's read at %v passed its earlier write at %v", r, w)
	}
}

// Stats sums the queueing delay each reservation met and keeps the largest.
func TestPipeWaitStats(t *testing.T) {
	for _, bf := range []bool{false, true} {
		p := Pipe{Name: "x", Rate: 8 * sim.Gbps, Backfill: bf} // 1 ns per byte
		p.Reserve(0, 100)                                      // [0,100ns)
		p.Reserve(0, 100)                                      // waits 100 ns
		p.Reserve(sim.Time(50*sim.Nanosecond), 10)             // waits 150 ns
		p.Reserve(sim.Time(sim.Microsecond), 10)               // idle link: no wait
		st := p.Stats()
		if st.Wait != 250*sim.Nanosecond || st.MaxWait != 150*sim.Nanosecond || st.Busy != 220*sim.Nanosecond || st.Transfers != 4 {
			t.Errorf("backfill=%v: %+v", bf, st)
		}
	}
}
