package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/internal/atomicfile"
)

// addProfileFlags gives every command --cpuprofile and --memprofile: pprof
// profiles of the command's run, for users who want to see where a long
// replay spends its time (go tool pprof FILE).
func addProfileFlags(root *cobra.Command) {
	root.PersistentFlags().String("cpuprofile", "", "write a CPU profile (pprof) of the command's run to `FILE`")
	root.PersistentFlags().String("memprofile", "", "write a heap profile (pprof) taken at the end of the run to `FILE`")
}

// profiled runs run under the profiles cmd's flags ask for. A profile is
// written whole when the run succeeds and not at all otherwise.
func profiled(cmd *cobra.Command, run func() error) error {
	cpu, heap := profilePath(cmd, "cpuprofile"), profilePath(cmd, "memprofile")
	for _, p := range [][2]string{{"cpuprofile", cpu}, {"memprofile", heap}} {
		if p[1] == "-" {
			return Usagef("--%s: a profile is binary; give a file name, not -", p[0])
		}
	}
	if cpu != "" {
		inner := run
		run = func() error {
			return atomicfile.Write(cpu, func(w io.Writer) error {
				if err := pprof.StartCPUProfile(w); err != nil {
					return fmt.Errorf("--cpuprofile %s: %w", cpu, err)
				}
				defer pprof.StopCPUProfile()
				return inner()
			})
		}
	}
	if err := run(); err != nil {
		return err
	}
	if heap == "" {
		return nil
	}
	return atomicfile.Write(heap, func(w io.Writer) error {
		runtime.GC()
		return pprof.WriteHeapProfile(w)
	})
}

func profilePath(cmd *cobra.Command, name string) string {
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return ""
	}
	return f.Value.String()
}
