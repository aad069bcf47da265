package memsample

import (
	"testing"
	"time"
)

var sink [][]byte

// A buffer held while sampling shows in the peak, which never falls
// below what was in use at the last sample.
func TestPeakSeesLiveHeap(t *testing.T) {
	stop := Start(5 * time.Millisecond)
	const n = 64 << 20
	sink = append(sink, make([]byte, n))
	for i := range sink[0] {
		sink[0][i] = byte(i)
	}
	time.Sleep(30 * time.Millisecond)
	p := stop()
	sink = nil
	if p.Heap < n {
		t.Fatalf("peak heap %d B, below the %d B buffer held while sampling", p.Heap, n)
	}
	if p.Total != p.Heap+p.Stack || p.Stack == 0 {
		t.Fatalf("peak %+v: total must be heap plus a non-zero stack", p)
	}
}
