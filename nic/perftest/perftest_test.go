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
