package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/validate/hw/netemu"
)

func init() { Register("validate", newValidateFabricServeCmd) }

func newValidateFabricServeCmd() *cobra.Command {
	var (
		cluster, socket string
		ranks           int
		loss            float64
		seed            uint64
		lag, tick       time.Duration
		ibTimeout       uint8
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

The client's CLOCK_MONOTONIC nanoseconds map onto simulated time with the
first request as epoch (simulated 0). A request that reaches the server
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
			st, err := netemu.Serve(ctx, conn, e, netemu.ServeOptions{Lag: lag, Tick: tick,
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
	f.Uint8Var(&ibTimeout, "ib-timeout", 14, "the QPs' local ACK timeout exponent (4.096 us * 2^N)")
	return c
}
