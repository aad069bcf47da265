//go:build unix

package check_test

import (
	"syscall"
	"testing"

	"github.com/ginsim/ginsim/gin/bench"
)

// BenchmarkOverhead is the checker's cost on a message-rate run (put with
// a signal from 4 CTAs, 2000 iterations each, 4 KiB): Off runs without an
// observer, Check with the bus and the checker (bench --check). Compare
// the two cpu-ns/op (process CPU time, which a shared machine disturbs
// far less than wall time).
func BenchmarkOverhead(b *testing.B) {
	for _, backend := range []string{"gdaki", "proxy"} {
		for _, on := range []bool{false, true} {
			name := backend + "/off"
			if on {
				name = backend + "/check"
			}
			b.Run(name, func(b *testing.B) {
				o := bench.Options{Env: bench.EnvConfig{Backend: backend, Seed: 1}, Op: "put_signal", Pattern: "bw",
					Sizes: []uint64{4096}, Iters: 2000, Warmup: 10, CTAs: 4, Threads: 1, Check: on}
				cpu0 := cpuNs()
				for b.Loop() {
					rows, err := bench.Run(o)
					if err != nil {
						b.Fatal(err)
					}
					if on && (rows[0].Check == nil || rows[0].Check.Ops == 0) {
						b.Fatal("the checker saw nothing")
					}
				}
				b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuNs is the process's user and system CPU time.
func cpuNs() int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return u.Utime.Nano() + u.Stime.Nano()
}
