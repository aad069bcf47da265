package replay

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces"
)

func TestZZHeap(t *testing.T) {
	tr, _ := traces.OpenExample("deepseek-v3-ll-ep16.jsonl.gz")
	spec, _ := machine.Preset("h100-ib")
	var rec obs.Recorder
	recordCheck = &rec
	Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends, Check: true})
	recordCheck = nil
	var m0, m1 runtime.MemStats
	peak := uint64(0)
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c := check.New()
	for i, e := range rec.Events {
		c.Observe(e)
		if i%50000 == 0 || i == len(rec.Events)-1 {
			runtime.GC()
			runtime.ReadMemStats(&m1)
			if d := m1.HeapAlloc - m0.HeapAlloc; d > peak {
				peak = d
			}
			fmt.Printf("%d: %.1f MB live %d\n", i, float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, c.Report().Live)
		}
	}
	fmt.Printf("peak %.1f MB\n", float64(peak)/1e6)
	runtime.KeepAlive(c)
}
