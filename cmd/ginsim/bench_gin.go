package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
)

func init() {
	for _, op := range bench.Ops {
		Register("bench", func() *cobra.Command { return newBenchGinCmd(op) })
	}
}

// parseSize reads a size with an optional K/M/G (binary) suffix.
func parseSize(s string) (uint64, error) {
	mul := uint64(1)
	switch strings.ToUpper(s[len(s)-min(len(s), 1):]) {
	case "K":
		mul = 1 << 10
	case "M":
		mul = 1 << 20
	case "G":
		mul = 1 << 30
	}
	if mul > 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mul, nil
}

func newBenchGinCmd(op string) *cobra.Command {
	var (
		pattern, backend, profile, rsm, sizes, minB, maxB, version string
		factor                                                     float64
		iters, warmup, ctas, threads, depth                        int
		ag, skip, strong, asJSON, chk                              bool
		seed                                                       uint64
	)
	cmd := &cobra.Command{
		Use:   op,
		Short: "GIN " + op + " latency/bandwidth on two simulated ranks (nccl-tests device_api/gin)",
		Long: `Runs nccl-tests' GIN device-API perf test for ` + op + ` on two ranks of the
--cluster machine (one GPU on each of two nodes; --backend lsa: two GPUs of
one node, NVLink stores and a release flag, put/put_signal/signal only): --pattern ping (issue, then
flush or counter wait), pingpong (put+signal both ways; latency is half the
round trip) or bw (-c CTAs × -t threads issuing). Output is a table like
nccl-tests or, with --json, rows {"bytes","latency_us","bandwidth_GBps"}.
--check runs the semantic checker (gin/check) beside every run: each row
gets its counts ("check" in JSON, a comment line in the table) and any
violation of the GIN spec fails the command (exit 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := bench.Options{Op: op, Pattern: pattern, Iters: iters, Warmup: warmup, CTAs: ctas, Threads: threads,
				Aggregate: ag, SkipCredit: skip, Strong: strong, Check: chk}
			o.Env = bench.EnvConfig{Profile: profile, Backend: backend, Seed: seed, QueueDepth: depth}
			switch version {
			case "2.28":
				o.Env.Version = gin.V2_28
			case "2.30":
				o.Env.Version = gin.V2_30
			default:
				return Usagef("--nccl_version %q: want 2.28 or 2.30", version)
			}
			switch rsm {
			case "gpu":
				o.Sharing = gin.SharingGPU
			case "cta":
				o.Sharing = gin.SharingCTA
			case "thread":
				o.Sharing = gin.SharingThread
			default:
				return Usagef("--gin_rsm %q: want thread, cta or gpu", rsm)
			}
			if sizes != "" {
				for _, f := range strings.Split(sizes, ",") {
					v, err := parseSize(strings.TrimSpace(f))
					if err != nil {
						return Usagef("--sizes: %v", err)
					}
					o.Sizes = append(o.Sizes, v)
				}
			} else {
				lo, err := parseSize(minB)
				if err != nil {
					return Usagef("-b: %v", err)
				}
				hi, err := parseSize(maxB)
				if err != nil {
					return Usagef("-e: %v", err)
				}
				if factor <= 1 || lo == 0 || hi < lo {
					return Usagef("need 0 < -b <= -e and -f > 1")
				}
				for v := lo; v <= hi; v = uint64(float64(v) * factor) {
					o.Sizes = append(o.Sizes, v)
				}
			}
			if err := o.Validate(); err != nil && !strings.Contains(err.Error(), "window") {
				return &UsageError{Err: err}
			}
			rows, err := bench.Run(o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(w, "# ginsim bench %s: pattern %s, backend %s, profile %s, rsm %s, ag %v, skip_credit_check %v, strong %v\n",
				op, pattern, backend, profile, rsm, ag, skip, strong)
			fmt.Fprintf(w, "# %12s %8s %14s %14s %12s %10s\n", "size(B)", "iters", "latency(us)", "bw(GB/s)", "rate(Mops)", "proxyCPU")
			for _, r := range rows {
				fmt.Fprintf(w, "  %12d %8d %14.3f %14.3f %12.4f %9.1f%%\n", r.Bytes, iters, r.LatencyUs, r.BandwidthGBps,
					r.MsgRateM, 100*r.ProxyCPU)
			}
			for _, r := range rows {
				if c := r.Check; c != nil {
					fmt.Fprintf(w, "# check %d B: %d events, %d ops, %d landings, %d updates, %d waits/reads: %d violations\n",
						r.Bytes, c.Events, c.Ops, c.Landings, c.Updates, c.Observed, c.Violations)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	def := "ping"
	if op == "put_signal" || op == "signal" {
		def = "pingpong"
	}
	f.StringVar(&pattern, "pattern", def, "ping, pingpong or bw")
	f.StringVar(&backend, "backend", "gdaki", "gdaki, proxy or lsa")
	f.StringVar(&profile, "cluster", "h100-ib", "cluster preset or YAML file (alias --profile)")
	f.StringVar(&version, "nccl_version", "2.30", "NCCL behaviour: 2.28 or 2.30")
	f.StringVarP(&minB, "minbytes", "b", "4", "minimum size (K/M/G suffixes)")
	f.StringVarP(&maxB, "maxbytes", "e", "4M", "maximum size")
	f.Float64VarP(&factor, "stepfactor", "f", 2, "multiplicative size step")
	f.StringVar(&sizes, "sizes", "", "comma-separated sizes (overrides -b/-e/-f)")
	f.IntVarP(&iters, "iters", "n", 500, "measured iterations per size")
	f.IntVarP(&warmup, "warmup_iters", "w", 50, "warm-up iterations per size")
	f.IntVarP(&ctas, "num_ctas", "c", 1, "CTAs (bw)")
	f.IntVarP(&threads, "num_threads", "t", 1, "threads per CTA (bw)")
	f.IntVar(&depth, "gin_tx_depth", 0, "GIN send queue depth (0: backend default)")
	f.StringVar(&rsm, "gin_rsm", "gpu", "resource sharing mode: thread, cta or gpu")
	f.BoolVar(&ag, "gin_ag", false, "ncclGinOptFlagsAggregateRequests (bw)")
	f.BoolVar(&skip, "gin_skip_credit_check", false, "ncclGinOptFlagsMaySkipCreditCheck")
	f.BoolVar(&strong, "gin_strong_signal", false, "strong instead of weak signals")
	f.BoolVar(&asJSON, "json", false, "print JSON rows")
	f.BoolVar(&chk, "check", false, "run the GIN semantic checker beside the run; a violation fails it")
	f.Uint64Var(&seed, "seed", 1, "simulation seed")
	addAliases(cmd, "cluster", "profile")
	return cmd
}
