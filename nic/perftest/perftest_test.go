package perftest

import "testing"

// TestWriteBWGoodput checks that a 400 Gb/s link reaches at least 97% of
// its rate as RDMA WRITE goodput at large messages.
func TestWriteBWGoodput(t *testing.T) {
	rows, err := WriteBW(Options{Sizes: []int64{1 << 20}, MaxVolume: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rows)
	if got, want := rows[0].BandwidthGBps, 0.97*50; got < want {
		t.Errorf("goodput %.2f GB/s, want >= %.2f", got, want)
	}
}

// TestWriteLat checks the small-message half round trip is in the range of
// a CX-7 through one switch (1-4 us) and deterministic.
func TestWriteLat(t *testing.T) {
	a, err := WriteLat(Options{Sizes: []int64{8, 4096}, MaxIters: 50})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := WriteLat(Options{Sizes: []int64{8, 4096}, MaxIters: 50})
	t.Logf("%+v", a)
	if a[0] != b[0] || a[1] != b[1] {
		t.Errorf("not deterministic: %+v vs %+v", a, b)
	}
	if l := a[0].LatencyUs; l < 1 || l > 4 {
		t.Errorf("8-byte latency %.3f us outside [1,4]", l)
	}
}

// TestAtomicLat checks that a fetch-add round trip through one switch
// costs more than a WRITE's half round trip (the responder's atomic unit
// and the response both sit on the path), that every add landed (AtomicLat
// checks the target word), and that the run is deterministic.
func TestAtomicLat(t *testing.T) {
	a, err := AtomicLat(Options{MaxIters: 50})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := AtomicLat(Options{MaxIters: 50})
	w, err := WriteLat(Options{Sizes: []int64{8}, MaxIters: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("atomic %+v write %+v", a, w)
	if a[0] != b[0] {
		t.Errorf("not deterministic: %+v vs %+v", a, b)
	}
	if a[0].Iters != 50 || a[0].Bytes != 8 {
		t.Errorf("row %+v: want 50 iterations of 8 bytes", a[0])
	}
	if a[0].LatencyUs <= w[0].LatencyUs || a[0].LatencyUs > 4*w[0].LatencyUs {
		t.Errorf("atomic round trip %.3f us, want in (%.3f, %.3f] (one to four write half round trips)",
			a[0].LatencyUs, w[0].LatencyUs, 4*w[0].LatencyUs)
	}
}
