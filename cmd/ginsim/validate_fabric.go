package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/validate/hw"
	"github.com/ginsim/ginsim/validate/hw/netemu"
)

func init() {
	Register("validate", newValidateFabricServeCmd)
	Register("validate", newValidateFabricReportCmd)
}

// fabricReportRow is one case of validate fabric-report, in microseconds.
type fabricReportRow struct {
	Case     string  `json:"case"`
	Messages int     `json:"messages"`
	ModelUs  float64 `json:"model_us"`
	ReplyUs  float64 `json:"reply_us"`
	DeviceUs float64 `json:"device_us"`
	BehindUs float64 `json:"behind_us"`
	Late     int     `json:"late_replies"`
}

func newValidateFabricReportCmd() *cobra.Command {
	var (
		results, fabric string
		asJSON          bool
	)
	c := &cobra.Command{
		Use:   "fabric-report --results DIR",
		Short: "Per-message delivery times of a device run on the model-timed fabric, beside the model's",
		Long: `Validate fabric-report reads a device run made with GINHW_FABRIC="model:SOCKET"
(run.sh's result files and plugin traces) and lines up, per message, the
fabric server's reply (the model's delivery instant) with the target's
delivery, then prints per case the medians, from the sender's plugin call:
the model's delivery (model), the reply reaching the sender (reply), the
data and signal acknowledged in the target's GPU memory (device), and per
message device - model (behind); late counts replies that came after the
model's instant. Without --results it reads the committed run.`,
		Example: "  ginsim validate fabric-report\n  ginsim validate fabric-report --results results --fabric model-loss --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fsys fs.FS
			if results == "" {
				var err error
				if fsys, err = hw.Measured(modelFabricRun); err != nil {
					return err
				}
			} else {
				if st, err := os.Stat(results); err != nil || !st.IsDir() {
					return Usagef("--results %s: not a directory", results)
				}
				fsys = os.DirFS(results)
			}
			names, err := fs.Glob(fsys, "*."+fabric+".r0.txt")
			if err != nil {
				return Usagef("--fabric %q: %v", fabric, err)
			}
			if len(names) == 0 {
				return Usagef("--fabric %q: no *.%s.r0.txt result files", fabric, fabric)
			}
			sort.Strings(names)
			var rows []fabricReportRow
			for _, n := range names {
				name := strings.TrimSuffix(n, "."+fabric+".r0.txt")
				d, err := hw.LoadDevice(fsys, name, fabric)
				if err != nil {
					return err
				}
				m := d.ModelFabric()
				rows = append(rows, fabricReportRow{Case: name, Messages: m.N, ModelUs: m.Model.Us(), ReplyUs: m.Reply.Us(),
					DeviceUs: m.Device.Us(), BehindUs: m.Behind.Us(), Late: m.Late})
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(w).Encode(rows)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "case\tmessages\tmodel us\treply us\tdevice us\tbehind us\tlate\t")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t\n", r.Case, r.Messages, r.ModelUs, r.ReplyUs, r.DeviceUs, r.BehindUs, r.Late)
			}
			return tw.Flush()
		},
	}
	f := c.Flags()
	f.StringVar(&results, "results", "", "directory of run.sh's result files and traces (default: the committed run "+modelFabricRun+")")
	f.StringVar(&fabric, "fabric", "model", "the fabric's name in the result files")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// modelFabricRun is the committed device run on the model-timed fabric.
const modelFabricRun = "2026-12-02-h200-model"

func newValidateFabricServeCmd() *cobra.Command {
	var (
		cluster, socket string
		ranks           int
		loss            float64
		seed            uint64
		lag, tick       time.Duration
		ibTimeout       uint8
		arrival         bool
	)
	c := &cobra.Command{
		Use:   "fabric-serve --socket PATH --ranks N",
		Short: "Time the GIN plugin's messages with the model's NICs and network, in real time",
		Long: `Validate fabric-serve is the network of ginsim's NCCL GIN plugin
(validate/hw/native/ginhw.c) when it runs with GINHW_FABRIC="model:PATH":
every message the plugin carries becomes a request on the unix datagram
socket PATH, which this server posts as an RDMA WRITE on the model of the
cluster (rank r is GPU 0 of node r and its first NIC; one RC QP per ordered
rank pair; buffers in GPU memory) at the message's instant, and it replies
with the instant the model lands the last byte in the target's memory. The
simulation follows the wall clock (less --lag), so queueing behind the
other messages and, with --loss, retransmission come from the model.

Requests carry the plugin's CLOCK_REALTIME nanoseconds, which the server
reads too; the first request is the epoch (simulated 0) and the simulation
runs to the clock less --lag (--arrival: simulated 0 is the first
request's arrival, for clients with another clock). A request that reaches the server
after the simulation has passed its instant is posted at the simulation's
now and counted late. On SIGINT or SIGTERM the server prints its counters
as JSON on stdout (late requests, the worst lateness, retransmissions,
drops) and exits.`,
		Example: "  ginsim validate fabric-serve --cluster h100-ib --socket /tmp/ginfab.sock --ranks 2\n" +
			"  ginsim validate fabric-serve --socket /tmp/ginfab.sock --ranks 2 --loss 0.001 --seed 7",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := machine.Resolve(cluster)
			if err != nil {
				return Usagef("--cluster: %v", err)
			}
			if socket == "" {
				return Usagef("--socket: required")
			}
			if ranks < 2 || ranks > 64 {
				return Usagef("--ranks %d: want 2 to 64", ranks)
			}
			if loss < 0 || loss >= 1 {
				return Usagef("--loss %g: want a probability in [0, 1)", loss)
			}
			if lag < 0 || tick < 0 {
				return Usagef("--lag and --tick must not be negative")
			}
			e, err := netemu.New(netemu.Options{Spec: spec, Ranks: ranks, Loss: loss, Seed: seed, IBTimeout: ibTimeout}, nil)
			if err != nil {
				return Usagef("%v", err)
			}
			if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("--socket %s: %w", socket, err)
			}
			conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
			if err != nil {
				return fmt.Errorf("--socket %s: %w", socket, err)
			}
			defer os.Remove(socket)
			defer conn.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "fabric-serve: %s, %d ranks, loss %g, seed %d, lag %v, listening on %s\n",
				spec.Name, ranks, loss, seed, lag, socket)
			st, err := netemu.Serve(ctx, conn, e, netemu.ServeOptions{Lag: lag, Tick: tick, Arrival: arrival,
				Logf: func(f string, a ...any) { fmt.Fprintf(stderr, "fabric-serve: "+f+"\n", a...) }})
			enc := json.NewEncoder(cmd.OutOrStdout())
			if jerr := enc.Encode(st); jerr != nil && err == nil {
				err = jerr
			}
			if st.Late > 0 {
				fmt.Fprintf(stderr, "fabric-serve: %d of %d requests reached the server after their instant (worst %d ns) and were posted late\n",
					st.Late, st.Requests, st.MaxLateNs)
			}
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&cluster, "cluster", "h100-ib", "cluster: a preset or a spec file")
	f.StringVar(&socket, "socket", "", "unix datagram socket to listen on (replaced if it exists)")
	f.IntVar(&ranks, "ranks", 2, "ranks, one per node")
	f.Float64Var(&loss, "loss", 0, "probability each link direction loses a packet")
	f.Uint64Var(&seed, "seed", 1, "seed of the model's random streams")
	f.DurationVar(&lag, "lag", 20*time.Microsecond, "keep the simulation this far behind the wall clock")
	f.DurationVar(&tick, "tick", 0, "sleep up to this long when idle (0: spin, for microsecond pacing)")
	f.BoolVar(&arrival, "arrival", false, "take simulated 0 at the first request's arrival instead of reading the clients' CLOCK_REALTIME")
	f.Uint8Var(&ibTimeout, "ib-timeout", 14, "the QPs' local ACK timeout exponent (4.096 us * 2^N)")
	return c
}
