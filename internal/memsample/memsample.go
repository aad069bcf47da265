package memsample

import (
	"runtime"
	"time"
)

// Peak is the largest heap-plus-stacks sample and its two parts, in bytes.
type Peak struct {
	Total, Heap, Stack uint64
}

// Start samples runtime.MemStats every period until the returned stop is
// called; stop waits for the sampler to end, takes one last sample and
// returns the peak. Each sample stops the world briefly (ReadMemStats),
// so keep period in the tens of milliseconds.
func Start(period time.Duration) (stop func() Peak) {
	var peak Peak
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if t := ms.HeapInuse + ms.StackInuse; t >= peak.Total {
			peak = Peak{Total: t, Heap: ms.HeapInuse, Stack: ms.StackInuse}
		}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return func() Peak {
		close(quit)
		<-done
		sample()
		return peak
	}
}
