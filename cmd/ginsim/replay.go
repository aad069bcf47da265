package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gin/verify"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/pcap"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/ginsim/ginsim/traces/sweep"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() { Register("", newReplayCmd) }

// defaultReplayTrace is the built-in trace replayed without arguments.
const defaultReplayTrace = "deepseek-v3-ll-ep16.jsonl.gz"

type replayFlags struct {
	cluster, backend, mode string
	nvlink, json, quiet    bool
	rdmaOnly               bool
	sms, qps               int
	seed                   uint64
	layers, jobs, seeds    int
	workers                int
	sequential             bool
	timeline, pcap, plot   string
	plotBreakdown          string
	pcapRanks              []int
	pcapSnapLen            int
	check, timelineDetail  bool
	timelineUtil           string
	loss, corrupt          string
	faults                 []string
	ibTimeout              uint8
	mutant                 string // hidden: a gin/verify backend mutant, to test --check
}

func newReplayCmd() *cobra.Command {
	var f replayFlags
	c := &cobra.Command{
		Use:   "replay [TRACE]",
		Short: "Replay MoE dispatch/combine traffic from a trace on a simulated cluster",
		Long: `Replay runs every (iteration, layer) of a moe-trace (JSONL, optionally gzip)
on a cluster as GIN device programs (DeepEP V1 low latency by default) and
reports per-layer kernel-only dispatch and combine times, DeepEP-defined
bandwidths and the critical path of the slowest receiver.

--mode v2 runs DeepEP V2 (ElasticBuffer) as DeepEP picks with its default
allow_hybrid_mode=True: the hybrid kernels (RDMA between rail peers, NVLink
forwarding inside the node) when EP spans several nodes, the direct kernels
(one put per destination rank) inside one node; the header says which ran.
--mode v2-direct (allow_hybrid_mode=False) and --mode v2-hybrid (two or more
nodes) force one.

Every mode runs as its library does by default. DeepEP V1 LL (Buffer
allow_nvlink_for_low_latency_mode=True), V2's direct kernels, NCCL EP and the
NCCL baseline (--backend nccl: P2P transport and PXN) send to the GPUs of the
same node over NVLink and to the rest over RDMA; the header says which path
ran. --rdma-only (alias --disable-nvlink, DeepEP's and ep_bench's name) sends
everything through the NICs: the pure-RDMA runs of the published tables.
--nvlink is the default and changes nothing. HT and V2's hybrid kernels
forward over NVLink inside the node by design and take no --rdma-only.

Each step runs on the parallel kernel: one partition per node, advanced in
windows of the fabric's least cross-node delay on --workers goroutines (all
cores by default). The outputs do not depend on --workers or --jobs.
--sequential runs the same partitions on the sequential kernel instead, the
reference (one event at a time in time order): the outputs are the same,
byte for byte. A phase ends at the end of the window in which its last rank
finished (at most the fabric's lookahead later), where the next one starts.

TRACE is a file or the name of a built-in example (` + strings.Join(traces.Examples(), ", ") + `).
Without TRACE: ` + defaultReplayTrace + ` on a 2-node h100-ib cluster.
Output files are written only when the run succeeds.`,
		Example: `  ginsim replay
  ginsim replay trace.jsonl.gz --cluster h800-cx7 --backend proxy --json
  ginsim replay --layers 1 --timeline tl.json --plot recv.svg
  ginsim replay --layers 1 --plot-breakdown breakdown.svg
  ginsim replay trace.jsonl.gz --mode v2-direct
  ginsim replay --rdma-only
  ginsim replay --seeds 8 --backend proxy`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReplay(cmd, args, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.cluster, "cluster", "h100-ib", "cluster preset name or YAML file")
	fl.StringVar(&f.backend, "backend", replay.BackendGDAKI, "GIN backend: "+strings.Join(replay.Backends, "|"))
	fl.StringVar(&f.mode, "mode", replay.ModeLL, "traffic pattern: "+strings.Join(replay.Modes, "|"))
	fl.BoolVar(&f.nvlink, "nvlink", false, "send intra-node traffic over NVLink (LSA, NCCL's P2P): the default of ll, v2-direct, ncclep and --backend nccl, so it changes nothing")
	fl.BoolVar(&f.rdmaOnly, "rdma-only", false, "send intra-node traffic through the NICs too (ll, v2-direct, ncclep, --backend nccl): the published pure-RDMA tables, as DeepEP's and ep_bench's --disable-nvlink, NCCL_P2P_DISABLE=1")
	fl.BoolVar(&f.rdmaOnly, "disable-nvlink", false, "alias of --rdma-only")
	_ = fl.MarkHidden("disable-nvlink")
	fl.IntVar(&f.sms, "sms", 0, "the library's SM count instead of its default: V1 HT num_sms (even; default 24 as DeepEP's test_internode.py), V2 num_sms (default get_theoretical_num_sms), NCCL EP max_num_sms (default the device's); not --mode ll")
	fl.IntVar(&f.sms, "num-sms", 0, "alias of --sms")
	fl.IntVar(&f.qps, "num-qps-per-rank", 0, "num_qps_per_rank of DeepEP's Buffer and NCCL EP's ep_bench, --mode ll and ncclep: one GIN context per local expert (0: the libraries' default, num_experts / num_ranks, the one value modelled)")
	fl.Uint64Var(&f.seed, "seed", 1, "simulation seed")
	fl.IntVar(&f.seeds, "seeds", 1, "replay with N seeds (--seed, --seed+1, ...) and report each run's means and their spread")
	fl.BoolVar(&f.json, "json", false, "print one JSON object instead of tables")
	fl.IntVar(&f.layers, "layers", 0, "replay at most N (iteration, layer) steps (0: all)")
	fl.IntVar(&f.jobs, "jobs", 0, "replay up to N steps at once, each on its own machine and core; results do not depend on it, memory grows with it (0: GOMAXPROCS; --pcap: 1)")
	fl.IntVar(&f.workers, "workers", 0, "run each step's nodes (one partition each) on N goroutines, window by window; the outputs do not depend on it (0: all cores, shared among the --jobs steps running at once)")
	fl.BoolVar(&f.sequential, "sequential", false, "run each step on the sequential kernel, the reference (one event at a time; same outputs; --workers does not apply)")
	fl.StringVar(&f.timeline, "timeline", "", "write a Perfetto/Chrome trace JSON timeline to `FILE`")
	fl.StringVar(&f.pcap, "pcap", "", "write a pcapng capture of the --pcap-ranks' NIC ports to `FILE`")
	fl.IntSliceVar(&f.pcapRanks, "pcap-ranks", []int{0}, "ranks whose NIC ports --pcap captures")
	fl.StringVar(&f.timelineUtil, "timeline-util", "", "with --timeline, sample every resource's utilisation each `INTERVAL` (1us, 500ns) and draw the busy ones as counter tracks")
	fl.BoolVar(&f.timelineDetail, "timeline-detail", false, "with --timeline, add per-warp tracks (each device group's GIN activity and blocking waits) and per-QP tracks (send queue busy, outstanding WQEs) under every rank")
	fl.BoolVar(&f.check, "check", false, "run the GIN semantic checker (gin/check) beside every step: its counts go in the report (\"check\" in JSON); a violation fails the run")
	fl.StringVar(&f.mutant, "mutant", "", "switch on a GDAKI or Proxy mutant of ginsim verify (--list-mutants) in every step's backends: what --check must catch")
	_ = fl.MarkHidden("mutant")
	fl.IntVar(&f.pcapSnapLen, "pcap-snaplen", 0, fmt.Sprintf("store at most `N` bytes of each --pcap frame (0: whole frames; %d: every RoCEv2 header, no payload)", pcap.HeaderSnapLen))
	fl.StringVar(&f.plot, "plot", "", "write a plot (`FILE`.png or .svg): per-layer bars, or receive-time CDF for one layer")
	fl.StringVar(&f.plotBreakdown, "plot-breakdown", "", "write a stacked bar chart (`FILE`.png or .svg) of the critical-path breakdown of each phase, as in the report's \"breakdown\"")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fl.StringVar(&f.loss, "loss", "", "lose packets on every link with probability `P` (0.001 or 0.1%; faults.loss of the cluster YAML)")
	fl.StringVar(&f.corrupt, "corrupt", "", "corrupt packets on every link with probability `P` (the receiver's ICRC check drops them)")
	fl.Uint8Var(&f.ibTimeout, "ib-timeout", 0, "the QPs' local ACK timeout code, NCCL_IB_TIMEOUT: 4.096us × 2^`N` (GDAKI and Proxy), what a lost tail waits before go-back-N (0: the cluster's, 20 unless its gdaki:/proxy: sections say)")
	fl.StringArrayVar(&f.faults, "fault", nil, "set a field of the cluster's faults section, `PATH=VALUE` (down.link=rank3, down.at=20us, straggler.rank=5, straggler.factor=2, ...); repeatable")
	return c
}

// applyFaultFlags sets the cluster faults that replay's flags ask for.
func applyFaultFlags(spec machine.Spec, f *replayFlags) (machine.Spec, error) {
	var fields []sweep.Field
	if f.loss != "" {
		fields = append(fields, sweep.Field{Path: "loss", Value: sweep.ScalarNode(f.loss)})
	}
	if f.corrupt != "" {
		fields = append(fields, sweep.Field{Path: "corrupt", Value: sweep.ScalarNode(f.corrupt)})
	}
	for _, kv := range f.faults {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return spec, Usagef("--fault %q: want PATH=VALUE, such as down.link=rank3", kv)
		}
		fields = append(fields, sweep.Field{Path: "faults." + strings.TrimPrefix(k, "faults."), Value: sweep.ScalarNode(v)})
	}
	s, err := sweep.SetFields(spec, fields...)
	if err != nil {
		return spec, Usagef("faults: %v", err)
	}
	return s, nil
}

// ginBackends builds the GIN backends a communicator may select, with the
// default profile's configurations.
func ginBackends() map[gin.Type]gin.Backend {
	return sweep.ProfileBackends(proxy.DefaultConfig(), gdaki.DefaultConfig())()
}

func runReplay(cmd *cobra.Command, args []string, f *replayFlags) error {
	if !slicesContains(replay.Modes, f.mode) {
		return Usagef("--mode %q: want one of %v", f.mode, replay.Modes)
	}
	if !slicesContains(replay.Backends, f.backend) {
		return Usagef("--backend %q: want one of %v", f.backend, replay.Backends)
	}
	if f.layers < 0 {
		return Usagef("--layers %d must not be negative", f.layers)
	}
	if f.jobs < 0 {
		return Usagef("--jobs %d must not be negative", f.jobs)
	}
	if f.workers < 0 {
		return Usagef("--workers %d must not be negative", f.workers)
	}
	if f.ibTimeout > 31 {
		return Usagef("--ib-timeout %d out of range [0, 31]", f.ibTimeout)
	}
	if f.rdmaOnly && f.nvlink {
		return Usagef("--rdma-only and --nvlink contradict each other; give one")
	}
	if f.rdmaOnly && (f.mode == replay.ModeHT || f.mode == replay.ModeV2Hybrid) && f.backend != replay.BackendNCCL {
		return Usagef("--rdma-only: --mode %s forwards over NVLink inside the node by design and has no pure-RDMA path; "+
			"--rdma-only applies to ll, v2-direct (and v2 on one node), ncclep and --backend nccl", f.mode)
	}
	if f.sms < 0 {
		return Usagef("--sms %d must not be negative", f.sms)
	}
	if f.sms > 0 && f.mode == replay.ModeLL {
		return Usagef("--sms: --mode ll keeps DeepEP V1 LL's expert-driven grid (ceil(E / ceil(E / device SMs)) SMs); --sms applies to ht, v2, v2-direct, v2-hybrid and ncclep")
	}
	if f.sms > 0 && f.mode == replay.ModeHT && f.sms%2 != 0 {
		return Usagef("--sms %d: DeepEP V1 HT's num_sms must be even (a channel is two SMs)", f.sms)
	}
	if f.qps < 0 {
		return Usagef("--num-qps-per-rank %d must not be negative (0: the library's default)", f.qps)
	}
	if f.qps > 0 && !replay.TakesQPs(f.mode, f.backend) {
		return Usagef("--num-qps-per-rank: %s", replay.NoQPs(f.mode, f.backend))
	}
	if f.seeds < 1 {
		return Usagef("--seeds %d: want at least 1", f.seeds)
	}
	var utilEvery sim.Duration
	if f.timelineUtil != "" {
		d, err := machine.ParseDuration(f.timelineUtil)
		if err != nil || d <= 0 {
			return Usagef("--timeline-util %q: want a positive interval such as 1us", f.timelineUtil)
		}
		if f.timeline == "" {
			return Usagef("--timeline-util draws into the timeline: add --timeline FILE")
		}
		utilEvery = sim.Duration(d)
	}
	if f.timelineDetail && f.timeline == "" {
		return Usagef("--timeline-detail draws into the timeline: add --timeline FILE")
	}
	if f.pcapSnapLen < 0 {
		return Usagef("--pcap-snaplen %d must not be negative (0: whole frames)", f.pcapSnapLen)
	}
	if f.pcapSnapLen > 0 && f.pcap == "" {
		return Usagef("--pcap-snaplen cuts the frames of a capture: add --pcap FILE")
	}
	if f.seeds > 1 && (f.timeline != "" || f.pcap != "" || f.plot != "" || f.plotBreakdown != "") {
		return Usagef("--seeds %d: --timeline, --pcap, --plot and --plot-breakdown draw one run; drop them or --seeds", f.seeds)
	}
	jobs := f.jobs
	if jobs == 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	plotFmt, err := plotFormat("--plot", f.plot)
	if err != nil {
		return err
	}
	breakdownFmt, err := plotFormat("--plot-breakdown", f.plotBreakdown)
	if err != nil {
		return err
	}
	spec, err := resolveCluster(f.cluster)
	if err != nil {
		return err
	}
	if spec, err = applyFaultFlags(spec, f); err != nil {
		return err
	}
	name := defaultReplayTrace
	var tr *traces.Trace
	if len(args) == 0 {
		tr, err = traces.OpenExample(defaultReplayTrace)
	} else {
		name = args[0]
		if _, serr := os.Stat(name); serr != nil && slicesContains(traces.Examples(), name) {
			tr, err = traces.OpenExample(name)
		} else if errors.Is(serr, os.ErrNotExist) {
			return Usagef("trace %q is neither a file nor a built-in example (%v)", name, traces.Examples())
		} else {
			tr, err = traces.Read(name)
		}
	}
	if err != nil {
		return err
	}
	backends, err := sweep.Backends(spec, f.ibTimeout)
	if err != nil {
		return err
	}
	var tune func(*machine.Profile)
	if f.mutant != "" {
		if backends, tune, err = mutantBackends(spec, f.ibTimeout, f.mutant); err != nil {
			return err
		}
	}
	opt := replay.Options{Mode: f.mode, Backend: f.backend, NVLink: f.nvlink, RDMAOnly: f.rdmaOnly, SMs: f.sms, QPsPerRank: f.qps, Seed: f.seed,
		Layers: f.layers, Jobs: jobs, Workers: f.workers, Sequential: f.sequential, TraceName: name, ClusterName: spec.Name, Backends: backends, Check: f.check, Tune: tune,
		UtilEvery: utilEvery, TimelineDetail: f.timelineDetail}

	// Output files go to temporaries renamed on success.
	var outs []*pendingFile
	defer func() {
		for _, o := range outs {
			o.abort()
		}
	}()
	if f.timeline != "" {
		o, err := newPendingFile(f.timeline)
		if err != nil {
			return err
		}
		outs = append(outs, o)
		opt.Timeline = timeline.NewWriter(o.f)
	}
	if f.pcap != "" {
		o, err := newPendingFile(f.pcap)
		if err != nil {
			return err
		}
		outs = append(outs, o)
		pw, err := pcap.NewWriter(o.f)
		if err != nil {
			return err
		}
		// Before any AddInterface: the snap length is every interface's.
		if err := pw.SetSnapLen(f.pcapSnapLen); err != nil {
			return err
		}
		opt.Pcap, opt.PcapRanks = pw, f.pcapRanks
	}
	steps := len(replay.Steps(tr, f.layers))
	if f.seeds > 1 {
		steps = f.seeds
	}
	if !f.quiet && !f.json && steps > 1 && isTTY(cmd.ErrOrStderr()) {
		bar := progressbar.NewOptions(steps, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
			progressbar.OptionSetDescription("replay"), progressbar.OptionClearOnFinish())
		opt.Progress = func(done, total int) { _ = bar.Set(done) }
	}
	if f.seeds > 1 {
		sw, err := replay.RunSeeds(tr, spec, opt, f.seeds)
		if err != nil {
			return usageIf(err)
		}
		if f.json {
			return sw.WriteJSON(cmd.OutOrStdout())
		}
		return sw.WriteTable(cmd.OutOrStdout())
	}
	rep, err := replay.Run(tr, spec, opt)
	if err != nil {
		return usageIf(err)
	}
	if opt.Timeline != nil {
		if err := opt.Timeline.Close(); err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
	}
	if opt.Pcap != nil {
		if err := opt.Pcap.Flush(); err != nil {
			return fmt.Errorf("pcap: %w", err)
		}
	}
	for _, pl := range []struct {
		path string
		draw func() (io.WriterTo, error)
	}{
		{f.plot, func() (io.WriterTo, error) { return rep.Plot(plotFmt) }},
		{f.plotBreakdown, func() (io.WriterTo, error) { return rep.PlotBreakdown(breakdownFmt) }},
	} {
		if pl.path == "" {
			continue
		}
		wt, err := pl.draw()
		if err != nil {
			return err
		}
		o, err := newPendingFile(pl.path)
		if err != nil {
			return err
		}
		outs = append(outs, o)
		if _, err := wt.WriteTo(o.f); err != nil {
			return fmt.Errorf("plot %s: %w", pl.path, err)
		}
	}
	if c := rep.Check; c != nil && c.Violations > 0 {
		// The report says what was found; the output files are dropped.
		if err := writeReplay(cmd.OutOrStdout(), rep, f.json); err != nil {
			return err
		}
		return fmt.Errorf("replay --check: %d violations; the first: %s", c.Violations, c.First)
	}
	for _, o := range outs {
		if err := o.commit(); err != nil {
			return err
		}
	}
	return writeReplay(cmd.OutOrStdout(), rep, f.json)
}

// usageIf makes the replay errors that bad input causes usage errors
// (exit 2): a --num-qps-per-rank the trace's experts refuse, a trace of
// counts records for a mode that needs routes, --rdma-only for v2 where it
// picks the hybrid kernels.
func usageIf(err error) error {
	switch {
	case errors.Is(err, replay.ErrQPsPerRank):
		return &UsageError{Err: fmt.Errorf("--num-qps-per-rank: %w", err)}
	case errors.Is(err, replay.ErrNeedsRoutes), errors.Is(err, replay.ErrNoRDMAOnly):
		return &UsageError{Err: err}
	}
	return err
}

// plotFormat returns the format (png, svg) of a plot file flag's value
// ("" for none), from its extension.
func plotFormat(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if f != "png" && f != "svg" {
		return "", Usagef("%s %q: the file name must end in .png or .svg", flag, path)
	}
	return f, nil
}

func writeReplay(w io.Writer, rep *replay.Report, json bool) error {
	if json {
		return rep.WriteJSON(w)
	}
	return rep.WriteTable(w)
}

func slicesContains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// pendingFile is an output written to a temporary next to its final path
// and renamed there by commit; abort removes it.
type pendingFile struct {
	path string
	f    *os.File
	done bool
}

func newPendingFile(path string) (*pendingFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	return &pendingFile{path: path, f: f}, nil
}

func (p *pendingFile) commit() error {
	if p.done {
		return nil
	}
	p.done = true
	if err := p.f.Chmod(0o644); err != nil {
		p.f.Close()
		os.Remove(p.f.Name())
		return err
	}
	if err := p.f.Close(); err != nil {
		os.Remove(p.f.Name())
		return err
	}
	if err := os.Rename(p.f.Name(), p.path); err != nil {
		os.Remove(p.f.Name())
		return err
	}
	return nil
}

func (p *pendingFile) abort() {
	if p.done {
		return
	}
	p.done = true
	p.f.Close()
	os.Remove(p.f.Name())
}

// mutantBackends is sweep.Backends with the gin/verify mutant name
// switched on, and the profile tuning that carries a NIC or GPU mutant
// (replay's hidden --mutant, which tests that --check catches a broken
// model). Front-end mutants act on the communicators replay builds and are
// refused.
func mutantBackends(spec machine.Spec, ibTimeout uint8, name string) (func() map[gin.Type]gin.Backend, func(*machine.Profile), error) {
	m, ok := verify.MutantByName(name)
	if !ok {
		return nil, nil, Usagef("--mutant %q: not a mutant (see ginsim verify --list-mutants)", name)
	}
	prof, err := spec.Hardware()
	if err != nil {
		return nil, nil, err
	}
	gc, pc := prof.GDAKI, prof.Proxy
	if ibTimeout != 0 {
		gc.AckTimeout, pc.AckTimeout = ibTimeout, ibTimeout
	}
	if f := spec.Faults; f.SlowProxy.Factor != 0 {
		pc.CPUPermille = f.ProxyCPUPermille
	}
	cfg := bench.EnvConfig{GDAKI: &gc, Proxy: &pc}
	m.Apply(&cfg)
	if cfg.Mutations != 0 {
		return nil, nil, Usagef("--mutant %s breaks %s; replay switches on the backend, NIC and GPU mutants only", name, m.Where)
	}
	return sweep.ProfileBackends(pc, gc), cfg.Tune, nil
}
