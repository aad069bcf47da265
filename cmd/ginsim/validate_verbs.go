package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/nic/perftest"
	"github.com/ginsim/ginsim/validate/hw/verbs"
)

func init() { Register("validate", newValidateVerbsCmd) }

// verbsReport is validate verbs' JSON: per case, the model's rows and the
// hardware's, size by size.
type verbsReport struct {
	Placement string          `json:"placement"`
	Device    string          `json:"device,omitempty"`
	Cases     []verbsCaseRows `json:"cases"`
}

type verbsCaseRows struct {
	Case     string         `json:"case"`
	Model    []perftest.Row `json:"model"`
	Hardware []verbs.Row    `json:"hardware"`
}

func newValidateVerbsCmd() *cobra.Command {
	var (
		o       verbs.Options
		which   string
		sizes   string
		asJSON  bool
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "verbs",
		Short: "RC WRITE and atomic latency and bandwidth on a real RDMA NIC (libibverbs) beside the model",
		Long: `Validate verbs runs the perftest cases of ` + "`ginsim bench`" + ` (write_lat, write_bw,
atomic_lat) on a real RDMA NIC through libibverbs, then the same cases on the
model (nic/perftest: two nodes, one ConnectX-7-class NIC each, one switch,
buffers in host memory), and prints both with the ratio model/hardware.

Placement: by default both QPs sit on one port of one NIC (loopback: the
packets never reach a cable or a switch, which the model's path has: expect
the hardware's latencies to be lower by about two cable and switch
traversals). For the model's placement, run two hosts:

  host A: ginsim validate verbs --server :18515 --case write_lat
  host B: ginsim validate verbs --connect A:18515 --case write_lat

The server prints nothing but errors; the client prints the comparison.
The hardware half needs a binary built with -tags verbs against
libibverbs-dev (go build -tags verbs ./cmd/ginsim). Without it, or without
an RDMA device, the command exits 2 and says which.`,
		Example: "  ginsim validate verbs\n  ginsim validate verbs --case all --sizes 8,4096,65536 --json\n" +
			"  ginsim validate verbs --device mlx5_0 --gid-index 3 --case write_bw",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cases := []string{which}
			if which == "all" {
				cases = verbs.Cases
			}
			sz, err := parseSizes(sizes)
			if err != nil {
				return Usagef("--sizes: %v", err)
			}
			o.Sizes, o.Timeout = sz, timeout
			for _, c := range cases {
				co := o
				co.Case = c
				if err := co.Check(); err != nil {
					return Usagef("%v", err)
				}
			}
			rep := verbsReport{Placement: o.Placement(), Device: o.Device}
			for _, c := range cases {
				co := o
				co.Case = c
				hw, err := verbs.Run(co)
				if errors.Is(err, verbs.ErrNotBuilt) || errors.Is(err, verbs.ErrNoDevice) {
					return &UsageError{Err: err}
				}
				if err != nil {
					return fmt.Errorf("%s on the hardware: %w", c, err)
				}
				if o.Placement() == "server" {
					continue
				}
				run := map[string]func(perftest.Options) ([]perftest.Row, error){
					verbs.CaseWriteLat: perftest.WriteLat, verbs.CaseWriteBW: perftest.WriteBW, verbs.CaseAtomicLat: perftest.AtomicLat,
				}[c]
				_ = co.Check()
				model, err := run(perftest.Options{Sizes: co.Sizes, TxDepth: co.TxDepth, MaxIters: co.Iters, Seed: 1})
				if err != nil {
					return fmt.Errorf("%s on the model: %w", c, err)
				}
				rep.Cases = append(rep.Cases, verbsCaseRows{Case: c, Model: model, Hardware: hw})
			}
			if o.Placement() == "server" {
				return nil
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return writeVerbsTable(out, rep)
		},
	}
	f := c.Flags()
	f.StringVar(&which, "case", verbs.CaseWriteLat, "write_lat | write_bw | atomic_lat | all")
	f.StringVar(&sizes, "sizes", "8,4096,65536", "comma-separated message sizes in bytes (atomic_lat: 8)")
	f.IntVar(&o.Iters, "iters", 1000, "iterations per size")
	f.IntVar(&o.TxDepth, "tx-depth", 128, "outstanding WRITEs (write_bw)")
	f.StringVar(&o.Device, "device", "", "RDMA device (ibv_devices); default the first")
	f.IntVar(&o.Port, "ib-port", 1, "port of the device")
	f.IntVar(&o.GIDIndex, "gid-index", -1, "source GID index on RoCE (perftest -x); -1: 0 on RoCE, none on InfiniBand")
	f.StringVar(&o.Server, "server", "", "listen on this TCP address for one client (two-host run)")
	f.StringVar(&o.Connect, "connect", "", "connect to a --server at this TCP address (two-host run)")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "bound on every wait (completion, peer's write, TCP peer)")
	f.BoolVar(&asJSON, "json", false, "print the model's and the hardware's rows as JSON")
	return c
}

func writeVerbsTable(out interface{ Write([]byte) (int, error) }, rep verbsReport) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "placement: %s\n", rep.Placement)
	fmt.Fprintln(w, "case\tbytes\titers\tmodel_us\thw_avg_us\thw_median_us\thw_p99_us\tmodel/hw\tmodel_GBps\thw_GBps\t")
	for _, c := range rep.Cases {
		for i, h := range c.Hardware {
			if i >= len(c.Model) {
				break
			}
			m := c.Model[i]
			ratio := 0.0
			if h.AvgUs > 0 {
				ratio = m.LatencyUs / h.AvgUs
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.3f\t%.3f\t\n", c.Case, h.Bytes, h.Iters,
				m.LatencyUs, h.AvgUs, h.MedianUs, h.P99Us, ratio, m.BandwidthGBps, h.BandwidthGBps)
		}
	}
	return w.Flush()
}
