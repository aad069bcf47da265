package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release name, set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/ginsim
var version = "devel"

func init() { Register("", newVersionCmd) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, module and Go toolchain of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "ginsim %s\n", version)
			if bi, ok := debug.ReadBuildInfo(); ok {
				fmt.Fprintf(w, "module %s %s\n", bi.Main.Path, orDash(bi.Main.Version))
				var rev, modified string
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.modified":
						modified = s.Value
					}
				}
				if rev != "" {
					if modified == "true" {
						rev += " (modified)"
					}
					fmt.Fprintf(w, "revision %s\n", rev)
				}
			}
			fmt.Fprintf(w, "go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
