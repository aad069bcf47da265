//go:build unix

package replay

import (
	"syscall"
	"testing"

	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces"
	"github.com/stretchr/testify/require"
)

// BenchmarkCheckOverhead is the cost of Options.Check (replay --check) on
// the default replay (the LL EP16 example, one step) over GDAKI and the
// Proxy: compare the cpu-ns/op of off and check (process CPU time, which
// a shared machine disturbs far less than wall time). To profile the
// checker's share:
//
//	go test -c -o /tmp/replay.test ./traces/replay
//	/tmp/replay.test -test.run '^$' -test.bench 'CheckOverhead/gdaki/check' \
//	    -test.benchtime 5x -test.cpuprofile /tmp/cpu.out
func BenchmarkCheckOverhead(b *testing.B) {
	tr, err := traces.OpenExample("deepseek-v3-ll-ep16.jsonl.gz")
	require.NoError(b, err)
	spec, _ := machine.Preset("h100-ib")
	for _, backend := range []string{BackendGDAKI, BackendProxy} {
		for _, on := range []bool{false, true} {
			name := backend + "/off"
			if on {
				name = backend + "/check"
			}
			b.Run(name, func(b *testing.B) {
				cpu0 := cpuNs()
				for b.Loop() {
					rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: backend, Seed: 1, Backends: backends, Check: on})
					require.NoError(b, err)
					if on && (rep.Check == nil || rep.Check.Ops == 0 || rep.Check.Violations != 0) {
						b.Fatalf("check: %+v", rep.Check)
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

// BenchmarkCheckerStream feeds the recorded event stream of the default
// replay (GDAKI) to a fresh checker: the checker's own cost, without the
// run that produces the events.
func BenchmarkCheckerStream(b *testing.B) {
	tr, err := traces.OpenExample("deepseek-v3-ll-ep16.jsonl.gz")
	require.NoError(b, err)
	spec, _ := machine.Preset("h100-ib")
	for _, backend := range []string{BackendGDAKI, BackendProxy} {
		b.Run(backend, func(b *testing.B) {
			var rec obs.Recorder
			recordCheck = &rec
			_, err := Run(tr, spec, Options{Mode: ModeLL, Backend: backend, Seed: 1, Backends: backends, Check: true})
			recordCheck = nil
			require.NoError(b, err)
			b.ResetTimer()
			cpu0 := cpuNs()
			for b.Loop() {
				c := check.New()
				for _, e := range rec.Events {
					c.Observe(e)
				}
				c.End(false)
				if r := c.Report(); r.Violations != 0 || r.Ops == 0 {
					b.Fatalf("%+v", r)
				}
			}
			b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(rec.Events)), "events")
		})
	}
}
