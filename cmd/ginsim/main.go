// Command ginsim simulates GPU-initiated networking (NCCL GIN) on a modelled
// cluster of GPUs, RDMA NICs and a switched fabric.
//
// Usage:
//
//	ginsim <command> [flags]
//
// Run "ginsim --help" for the list of commands and "ginsim <command> --help"
// for one command. Exit status: 0 on success, 1 when a run fails, 2 for bad
// flags or arguments (with a one-line reason on standard error).
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return execute(newRoot(), args, stdout, stderr)
}
