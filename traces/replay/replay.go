package replay

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/deepep/ht"
	"github.com/ginsim/ginsim/traces/deepep/ll"
	v2 "github.com/ginsim/ginsim/traces/deepep/v2"
	"github.com/ginsim/ginsim/traces/ncclbase"
	"github.com/ginsim/ginsim/traces/pcap"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/ginsim/ginsim/traces/workload"
)

// Modes of Options.Mode.
const (
	ModeLL     = "ll"     // DeepEP V1 low latency
	ModeHT     = "ht"     // DeepEP V1 high throughput (normal)
	ModeV2     = "v2"     // DeepEP V2 (ElasticBuffer) as DeepEP picks: hybrid on several nodes, direct on one
	ModeNCCLEP = "ncclep" // NCCL EP low latency: LL pattern, puts with AggregateRequests
	// ModeV2Direct forces DeepEP V2's direct kernels (allow_hybrid_mode=False).
	ModeV2Direct = "v2-direct"
	// ModeV2Hybrid forces DeepEP V2's hybrid kernels (RDMA to rail peers,
	// NVLink forwarding); it needs two or more nodes.
	ModeV2Hybrid = "v2-hybrid"
)

// Backends of Options.Backend.
const (
	BackendGDAKI = workload.BackendGDAKI
	BackendProxy = workload.BackendProxy
	BackendNCCL  = workload.BackendNCCL
)

// Modes lists the accepted modes; Backends the accepted backends.
var (
	Modes    = []string{ModeLL, ModeHT, ModeV2, ModeV2Direct, ModeV2Hybrid, ModeNCCLEP}
	Backends = []string{BackendGDAKI, BackendProxy, BackendNCCL}
)

// Options configure Run.
type Options struct {
	Mode    string
	Backend string
	// NVLink asks for NVLink (LSA stores, NCCL's P2P transport) to the
	// peers of the node. It is the default of every mode whose library
	// has the choice (see NVLinkChoice), so setting it changes nothing
	// there; it only contradicts RDMAOnly. HT and V2 hybrid forward over
	// NVLink inside the node whatever it says.
	NVLink bool
	// RDMAOnly sends every put through a NIC, intra-node ones included:
	// the pure-RDMA runs of the published tables. DeepEP V1 LL's
	// test_low_latency.py --disable-nvlink (Buffer
	// allow_nvlink_for_low_latency_mode=False), NCCL EP's ep_bench
	// --disable-nvlink (NCCL_P2P_DISABLE=1; NVIDIA/nccl
	// contrib/nccl_ep/ep_bench.cu:2837), NCCL with NCCL_P2P_DISABLE=1
	// (no P2P, no PXN). Only the modes of NVLinkChoice take it.
	RDMAOnly bool
	// SMs is the library's SM count in place of its default (0: the
	// default): V1 HT's num_sms (Params.HTSMs), V2's num_sms, NCCL EP's
	// max_num_sms. V1 LL has none (its grid follows the experts).
	SMs int
	// QPsPerRank is num_qps_per_rank (DeepEP's Buffer, NCCL EP's
	// ep_bench) for the modes that take it, ll and ncclep (0: the
	// default, num_experts / num_ranks). Their model runs one GIN
	// context per local expert, so the default is the one value it runs.
	QPsPerRank int
	Seed       uint64
	// Layers caps the number of (iteration, layer) steps replayed (0: all).
	Layers int
	// TraceName and ClusterName label the report.
	TraceName   string
	ClusterName string
	// Params are the workload's compute costs (zero: DefaultParams).
	Params *workload.Params
	// Timeline, when set, receives per-rank phase slices and the critical
	// path of every step.
	Timeline *timeline.Writer
	// Pcap, when set, receives the packets of PcapRanks' NIC ports.
	Pcap      *pcap.Writer
	PcapRanks []int
	// Progress, when set, is called after every step with (done, total),
	// from one goroutine at a time.
	Progress func(done, total int)
	// Jobs is how many steps run at once, each on its own machine and
	// goroutine (0 or 1: one at a time). The report, timeline and plots
	// do not depend on it; each running step holds a whole machine in
	// memory. A pcap capture runs the steps one at a time.
	Jobs int
	// Workers is how many goroutines run the partitions (one per node)
	// of a step's World, window by window (0: the cores, GOMAXPROCS,
	// shared among the steps Jobs runs at once; at least one each). The
	// report, timeline and plots do not depend on it.
	Workers int
	// Sequential runs every step's World on the sequential kernel, the
	// reference (sim.World.SetSequential): one event at a time in time
	// order on one goroutine (Workers does not apply). Its outputs are
	// the windowed kernel's, byte for byte (TestWorkersDoNotChangeTheRun).
	Sequential bool
	// Backends builds the GIN backends of a communicator (set by the
	// caller that links gin/gdaki and gin/proxy; nil: CommConfig default).
	Backends func() map[gin.Type]gin.Backend
	// Observe, when set (tests only), is called with every step's
	// workload after its setup.
	Observe func(Workload)
	// TimelineDetail, with Timeline, adds per-warp and per-QP tracks
	// built from each step's obs events (see detail); off, the timeline
	// is what it was without it.
	TimelineDetail bool
	// UtilEvery, with Timeline, samples every resource's utilisation at
	// this interval and draws the busy ones as counter tracks (0: none).
	// The report does not change (its event count leaves the samples out).
	UtilEvery sim.Duration
	// Check runs the GIN semantic checker (gin/check) beside every step;
	// Report.Check sums what it found. It reads the run, never changes it.
	Check bool
	// Tune, when set, adjusts every step's hardware profile after the
	// cluster's (machine.BuildTuned): how a gin/verify mutant of the NIC
	// or the GPU reaches a replay (replay's hidden --mutant, which tests
	// that Check catches it).
	Tune func(*machine.Profile)

	// kernel is the mode Run runs: Mode with v2 resolved to v2-direct
	// or v2-hybrid.
	kernel string
}

// detail reports whether the timeline gets per-warp and per-QP tracks.
func (o *Options) detail() bool { return o.Timeline != nil && o.TimelineDetail }

// V2Kernels returns the DeepEP V2 kernels ElasticBuffer runs on a cluster
// of nodes nodes with hybrid mode allowed (its default): the hybrid ones
// when the EP group spans more than one NVLink domain, else direct.
func V2Kernels(nodes int) string {
	if nodes > 1 {
		return ModeV2Hybrid
	}
	return ModeV2Direct
}

// TakesQPs reports whether a mode and backend take num_qps_per_rank.
func TakesQPs(mode, backend string) bool {
	return (mode == ModeLL || mode == ModeNCCLEP) && backend != BackendNCCL
}

// NoQPs says why a mode or backend takes no num_qps_per_rank.
func NoQPs(mode, backend string) string {
	switch {
	case backend == BackendNCCL:
		return "backend nccl replays NCCL's all-to-all-v, which has no num_qps_per_rank"
	case mode == ModeHT:
		return "--mode ht runs one GIN context per channel (num_sms / 2, --num-sms)"
	default:
		return "--mode " + mode + " sizes its QPs itself (get_theoretical_num_qps, from num_sms)"
	}
}

// ErrQPsPerRank is the error of a num_qps_per_rank the model does not run.
var ErrQPsPerRank = errors.New("num_qps_per_rank not modelled")

// qpsError says why a num_qps_per_rank other than num_experts / num_ranks
// is refused.
func qpsError(want, local int) error {
	return fmt.Errorf("replay: qps-per-rank %d: the model runs one GIN context per local expert, num_experts / num_ranks = %d "+
		"(DeepEP's test_low_latency.py and NCCL EP's ep_bench default); sharing a QP between experts: %w", want, local, ErrQPsPerRank)
}

// NVLinkChoice reports whether kernel (a mode, v2 resolved) over backend
// chooses between NVLink and the NIC for the peers of its node: DeepEP V1
// LL, V2 direct, NCCL EP and the NCCL baseline, whose libraries all use
// NVLink by default and RDMA with RDMAOnly. DeepEP V1 HT and V2 hybrid
// forward over NVLink inside the node by design and have no pure-RDMA
// path.
func NVLinkChoice(kernel, backend string) bool {
	return backend == BackendNCCL || kernel == ModeLL || kernel == ModeV2Direct || kernel == ModeNCCLEP
}

// ErrNoRDMAOnly is the error of RDMAOnly with kernels that have no
// pure-RDMA path.
var ErrNoRDMAOnly = errors.New("no pure-RDMA path")

// errNoRDMAOnly says why kernel takes no RDMAOnly.
func errNoRDMAOnly(kernel string, nodes int) error {
	if kernel == ModeHT {
		return fmt.Errorf("replay: rdma-only: DeepEP V1 HT forwards over NVLink inside the node by design: %w", ErrNoRDMAOnly)
	}
	if nodes == 0 {
		return fmt.Errorf("replay: rdma-only: DeepEP V2's hybrid kernels forward over NVLink inside the node by design "+
			"(--mode %s runs the direct kernels, which take rdma-only): %w", ModeV2Direct, ErrNoRDMAOnly)
	}
	return fmt.Errorf("replay: rdma-only: DeepEP V2's hybrid kernels, the ones v2 picks on %d nodes, forward over NVLink "+
		"inside the node by design (--mode %s runs the direct kernels, which take rdma-only): %w", nodes, ModeV2Direct, ErrNoRDMAOnly)
}

// isV2 reports whether mode runs DeepEP V2 kernels.
func isV2(mode string) bool { return mode == ModeV2 || mode == ModeV2Direct || mode == ModeV2Hybrid }

// Validate checks the options.
func (o *Options) Validate() error {
	ok := func(v string, in []string) bool {
		for _, x := range in {
			if v == x {
				return true
			}
		}
		return false
	}
	if !ok(o.Mode, Modes) {
		return fmt.Errorf("replay: mode %q (want one of %v)", o.Mode, Modes)
	}
	if !ok(o.Backend, Backends) {
		return fmt.Errorf("replay: backend %q (want one of %v)", o.Backend, Backends)
	}
	if o.Layers < 0 {
		return fmt.Errorf("replay: layers %d must not be negative", o.Layers)
	}
	if o.Jobs < 0 {
		return fmt.Errorf("replay: jobs %d must not be negative", o.Jobs)
	}
	if o.Workers < 0 {
		return fmt.Errorf("replay: workers %d must not be negative", o.Workers)
	}
	if o.SMs < 0 {
		return fmt.Errorf("replay: sms %d must not be negative", o.SMs)
	}
	if o.SMs > 0 && o.Mode == ModeLL {
		return fmt.Errorf("replay: sms: DeepEP V1 LL has no SM count (its grid is ceil(E / ceil(E / device SMs)) SMs); " +
			"use it with ht, v2 or ncclep")
	}
	if o.SMs > 0 && o.Mode == ModeHT && o.SMs%2 != 0 {
		return fmt.Errorf("replay: sms %d: DeepEP V1 HT's num_sms must be even (a channel is two SMs)", o.SMs)
	}
	if o.RDMAOnly && o.NVLink {
		return fmt.Errorf("replay: rdma-only and nvlink contradict each other; give one")
	}
	if o.RDMAOnly && o.Mode != ModeV2 && !NVLinkChoice(o.Mode, o.Backend) {
		return errNoRDMAOnly(o.Mode, 0)
	}
	if o.QPsPerRank < 0 {
		return fmt.Errorf("replay: qps-per-rank %d must not be negative", o.QPsPerRank)
	}
	if o.QPsPerRank > 0 && !TakesQPs(o.Mode, o.Backend) {
		return fmt.Errorf("replay: qps-per-rank: %s", NoQPs(o.Mode, o.Backend))
	}
	if o.TimelineDetail && o.Timeline == nil {
		return fmt.Errorf("replay: timeline detail draws into the timeline: set Options.Timeline")
	}
	if o.Check && o.Backends == nil {
		return fmt.Errorf("replay: the semantic check needs Options.Backends (it observes each backend)")
	}
	return nil
}

// Workload is one library's dispatch and combine as device programs.
type Workload interface {
	Setup() error
	Dispatch()
	Combine()
}

// Steps returns the (iteration, layer) pairs Run would run.
func Steps(tr *traces.Trace, limit int) [][2]int {
	var out [][2]int
	for _, it := range tr.Iterations() {
		for _, l := range tr.Layers() {
			if len(tr.StepRoutes(it, l)) == 0 {
				continue
			}
			out = append(out, [2]int{it, l})
			if limit > 0 && len(out) == limit {
				return out
			}
		}
	}
	return out
}

// Run runs the trace's steps on spec and reports.
func Run(tr *traces.Trace, spec machine.Spec, opt Options) (*Report, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	h := tr.Header()
	nodes, err := spec.NodesFor(tr.EP())
	if err != nil {
		return nil, err
	}
	if h.Parallel.RanksPerNode != spec.GPUsPerNode {
		return nil, fmt.Errorf("replay: trace has %d ranks per node, cluster %s has %d GPUs per node",
			h.Parallel.RanksPerNode, spec.Name, spec.GPUsPerNode)
	}
	if opt.Backend == BackendNCCL && opt.Mode != ModeLL {
		return nil, fmt.Errorf("replay: backend nccl replays the all-to-all-v of every selection; use --mode ll")
	}
	opt.kernel = opt.Mode
	if opt.Mode == ModeV2 {
		opt.kernel = V2Kernels(nodes)
	}
	switch {
	case NVLinkChoice(opt.kernel, opt.Backend):
		// Every library's default: NVLink to the peers of the node.
		opt.NVLink = !opt.RDMAOnly
	case opt.RDMAOnly:
		return nil, errNoRDMAOnly(opt.kernel, nodes)
	}
	if opt.kernel == ModeV2Hybrid && (nodes < 2 || tr.EP()%spec.GPUsPerNode != 0) {
		return nil, fmt.Errorf("replay: --mode %s needs EP over two or more whole nodes (EP %d on %d-GPU nodes): "+
			"DeepEP runs its direct kernels inside one NVLink domain", ModeV2Hybrid, tr.EP(), spec.GPUsPerNode)
	}
	local := tr.Slots() / tr.EP()
	if opt.QPsPerRank > 0 && opt.QPsPerRank != local {
		return nil, qpsError(opt.QPsPerRank, local)
	}
	steps := Steps(tr, opt.Layers)
	if len(steps) == 0 {
		return nil, fmt.Errorf("replay: trace %s has no route records to replay", opt.TraceName)
	}
	if err := checkCounts(tr, steps, &opt); err != nil {
		return nil, err
	}
	hidden := h.Model.Hidden
	if m, err := traces.ModelByName(h.Model.Name); err == nil && m.Hidden == hidden {
		hidden = m.DeepEPHidden()
	}
	// The report names the kernels that ran; hybrid forwards over NVLink
	// inside the node whatever --nvlink says.
	rep := &Report{Trace: opt.TraceName, Cluster: spec.Name, Mode: opt.kernel, Backend: opt.Backend,
		NVLink: opt.NVLink || opt.kernel == ModeV2Hybrid, RDMAOnly: opt.RDMAOnly, Seed: opt.Seed, EP: tr.EP(), Nodes: nodes,
		Model: h.Model.Name, Hidden: hidden, TopK: h.Model.TopK, Experts: tr.Slots(), Tokens: h.MaxTokensPerRank}
	if TakesQPs(opt.Mode, opt.Backend) {
		rep.QPsPerRank = local
	}
	switch {
	case opt.Mode == ModeHT:
		rep.BandwidthDefinition = "DeepEP HT (RDMA, as its README tables): unique (token, node) pairs incl. the local node × " +
			"2H × fp8_factor / t, per rank; bandwidths also gives NVLink (tokens received × 2H × fp8_factor)"
	case isV2(opt.Mode) && nodes > 1:
		rep.BandwidthDefinition = "DeepEP V2 (tests/elastic/test_ep.py, scale-out, as its README's multi-node table): " +
			"unique (token, node) pairs sent incl. the local node × (recv_x + recv_topk_idx int64 + recv_topk_weights) " +
			"bytes / t, per rank (combine: 2H + 4k); bandwidths also gives scale-up"
	case isV2(opt.Mode):
		rep.BandwidthDefinition = "DeepEP V2 (tests/elastic/test_ep.py, scale-up, as its README's one-node table): " +
			"tokens received incl. from itself × (recv_x + recv_topk_idx int64 + recv_topk_weights) bytes / t, per rank " +
			"(combine: 2H + 4k); scale-out is zero on one node"
	case opt.Mode == ModeNCCLEP:
		rep.BandwidthDefinition = "NCCL EP (contrib/nccl_ep/ep_bench.cu, LL): valid selections incl. local × 2H / t, " +
			"per rank, dispatch and combine (2H: the BF16 payload, no header; an FP8 trace, which NCCL EP does not run, " +
			"counts its FP8 payload)"
	default:
		rep.BandwidthDefinition = "DeepEP LL: valid selections incl. local × message bytes / t, per rank (combine: 2H)"
	}
	outs, err := runSteps(tr, spec, nodes, hidden, steps, &opt)
	if err != nil {
		return nil, err
	}
	var base sim.Time
	var disp, comb []span
	var lay *detailLayout
	if opt.detail() {
		lay = newDetailLayout()
	}
	for _, o := range outs {
		disp, comb = append(disp, o.spans[0]), append(comb, o.spans[1])
		if opt.Timeline != nil {
			o.tl.write(opt.Timeline, base, lay)
		}
		base += o.end + sim.Time(10*sim.Microsecond)
		rep.Layers = append(rep.Layers, o.lr)
		rep.kernelSMs = max(rep.kernelSMs, o.sms)
		rep.Events += o.events
	}
	if opt.SMs > 0 {
		rep.SMs = opt.SMs
	}
	rep.Check = checkOf(outs)
	rep.Bound = PhaseBindings{Dispatch: bindOver(disp), Combine: bindOver(comb)}
	rep.Notes = notes(&opt, nodes)
	rep.finish()
	return rep, nil
}

func notes(o *Options, nodes int) []string {
	n := []string{
		"kernel-only times: both phases start on every rank at once (as after a barrier); notify/layout kernels and host sync excluded",
		"breakdown: the events (traces/critpath) of the GIN operation whose signal released the slowest rank's last receiver: " +
			"GPU issue until its descriptor and doorbell were out, PCIe = the doorbell MMIO and the NIC's WQE and payload reads " +
			"(waiting for PCIe bandwidth included), NIC = the rest until its first packet left (WQE pipeline, send queues waiting " +
			"for the port), wire until its last packet reached the target NIC, remote write until the signal word changed, signal " +
			"seen until the wait returned, receiver the work after it; a signal stored over NVLink or by a local atomic is no GIN " +
			"operation: the phase until the wait returned is all 'signal seen'",
	}
	if o.Backend == BackendProxy {
		n = append(n, "proxy: 'proxy' runs from the signal's GFD landing in host memory to the CPU thread's ibv_post_send returning "+
			"(its wait in the ring while the thread serves other GFDs, the read and post costs); the GFD's stores across PCIe count as PCIe")
	}
	if o.Mode == ModeV2 {
		n = append(n, fmt.Sprintf("v2: DeepEP's own choice for %d node(s) with allow_hybrid_mode=True (its default): %s "+
			"(--mode v2-direct or v2-hybrid forces one)", nodes, o.kernel))
	}
	if o.kernel == ModeV2Hybrid {
		n = append(n, "v2-hybrid: DeepEP V2 ElasticBuffer hybrid mode (hybrid_dispatch.cuh, hybrid_combine.cuh): GIN on the rail team only; "+
			"rail GIN barrier + NVLink barrier; notify puts per-node counts to rail peers and stores/red_adds the sums over NVLink; "+
			"scale-out warps (one per channel) put one record per (token, remote node) with AggregateRequests and a VASignalAdd tail "+
			"per node every 6 records plus a finish flag, no credits; forward warps take up to 6 records per source node round-robin "+
			"and TMA-store one copy per (token, GPU) over NVLink; combine replays it (scale-up warps return expert outputs over NVLink, "+
			"forward warps reduce and put one record per (token, node), flush, finish flags); SMs/QPs/channels from "+
			"get_theoretical_num_sms/num_qps and shared memory, allow_multiple_reduction and prefer_overlap_with_compute as defaulted",
			"v2-hybrid: --nvlink does not apply (forwarding inside the node is NVLink); a rank's puts and signals to its own node are "+
				"local writes and atomics (no loopback QP in the model); dispatch time is hybrid dispatch_impl (copy epilogue excluded), "+
				"combine time includes the source's combine_reduce_epilogue, as for v2-direct")
	}
	if o.kernel == ModeV2Direct {
		n = append(n, "v2: DeepEP V2 ElasticBuffer direct mode (dispatch.cuh, combine.cuh): prologue GIN barrier, notify warps, one put of the whole token record per distinct destination rank, completion barrier (flush every QP, grid sync, SignalInc to every rank); SMs/QPs from get_theoretical_num_sms/num_qps; TMA copies at DeepEP's 200/50 GB/s per-SM read/write; signals to a rank's own signal words are local atomics (no loopback QP in the model)",
			"v2: dispatch time is dispatch_impl (copy epilogue excluded, as test_ep.py times it); combine time includes the source's reduction (combine_reduce_epilogue), like V1 LL's combine kernel")
	}
	if o.Mode == ModeHT {
		n = append(n, "ht: DeepEP V1 normal internode as ported to GIN (PR #521): channels = num_sms/2; per channel, RDMA senders dedup each token by node into per-(channel, node) rings, a coordinator puts chunks on context = channel to the rail peer then SignalAdd(chunk) on the tail; forwarders copy records over NVLink into per-peer rings and return head credits lazily; combine sums up to 8 local contributions in the forwarder, sends one BF16 record per (token, source node) over RDMA and the source sums across nodes",
			"ht: not modelled: the small meta put per (channel, node) at kernel start, the release fence of NVLink tail stores; a chunk that would wrap the RDMA ring is split at the wrap")
	}
	if o.Mode == ModeNCCLEP {
		n = append(n, "ncclep: NCCL EP low latency (NCCL 2.30): the LL pattern with OptAggregateRequests on every data put; the count/flag put of each (context, peer) rings the doorbell")
		if o.RDMAOnly {
			n = append(n, "ncclep: --rdma-only: every put goes through a NIC, as NCCL EP's ep_bench --disable-nvlink (NCCL_P2P_DISABLE=1); the library's default sends to LSA-reachable peers over NVLink")
		} else {
			n = append(n, "ncclep: NCCL EP's default: LSA (NVLink) stores to the peers of its node (low_latency.cu, ncclTeamLsa), RDMA to the rest; --rdma-only forces RDMA for all, as ep_bench --disable-nvlink")
		}
	}
	if o.Backend == BackendNCCL {
		n = append(n, ncclbase.Note(o.NVLink))
	}
	return n
}

// stepOut is what one step leaves for the report: its layer report, its
// event count, its end and what its timeline draws.
type stepOut struct {
	lr     LayerReport
	events uint64
	end    sim.Time
	tl     stepTimeline
	sms    int // the dispatch kernel's SMs (0: not known)
	// spans are the two phases' resources, all of them.
	spans [2]span
	// check is the step's semantic check (nil: Options.Check off).
	check *check.Report
}

// runSteps runs steps, opt.Jobs at a time (par.ForEach), and returns
// their outputs in step order, or the earliest failing step's error.
func runSteps(tr *traces.Trace, spec machine.Spec, nodes, hidden int, steps [][2]int, opt *Options) ([]stepOut, error) {
	jobs := opt.Jobs
	if opt.Pcap != nil {
		// Packets are written as they cross the ports: one step at a
		// time, its partitions in order (on one goroutine).
		jobs, opt.Workers = 1, 1
	}
	if opt.Workers == 0 {
		opt.Workers = max(1, runtime.GOMAXPROCS(0)/max(1, min(jobs, len(steps))))
	}
	outs := make([]stepOut, len(steps))
	err := par.ForEach(len(steps), jobs, opt.Progress, func(i int) error {
		sp := steps[i]
		o, err := runStep(tr, spec, nodes, hidden, sp[0], sp[1], opt)
		if err != nil {
			return fmt.Errorf("replay: iter %d layer %d: %w", sp[0], sp[1], err)
		}
		outs[i] = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	return outs, nil
}

// runStep builds a machine for one step and runs dispatch then combine.
func runStep(tr *traces.Trace, spec machine.Spec, nodes, hidden, iter, layer int, opt *Options) (stepOut, error) {
	st, err := newStep(tr, iter, layer)
	if err != nil {
		return stepOut{}, err
	}
	m, w, err := newMachine(spec, nodes, opt)
	if err != nil {
		return stepOut{}, err
	}
	if !opt.Sequential {
		pool := par.NewPool(opt.Workers)
		defer pool.Close()
		w.SetExec(pool.Exec)
		w.SetSerialBelow(serialBelow)
	}
	p := workload.DefaultParams()
	if opt.Params != nil {
		p = *opt.Params
	}
	if opt.SMs > 0 && opt.kernel == ModeHT {
		p.HTSMs = opt.SMs
	}
	cfg := workload.Config{Backend: opt.Backend, NVLink: opt.NVLink}
	e := workload.NewEnv(w, m, st, cfg, p, tr.Header(), hidden)
	so := newStepObs(m, w)
	e.Obs = so.bus
	snap := &snapshotter{m: m}
	var chk *stepChecker
	var det *detail
	if opt.Check {
		chk = newStepChecker(so.bus)
	}
	if opt.detail() {
		det = newDetail(m, st.EP)
		so.bus.Subscribe(det)
	}
	e.NewComm = func() (*gin.Comm, error) {
		// PR #521 ran on NCCL 2.28; optFlags (V2 / NCCL EP) need 2.29.7+.
		cfg := gin.CommConfig{Version: gin.V2_28, NContexts: workload.CtxsPerComm}
		if isV2(opt.Mode) || opt.Mode == ModeNCCLEP {
			cfg.Version = gin.V2_30
		}
		if opt.Backends != nil {
			cfg.Backends = opt.Backends()
			if pb, ok := cfg.Backends[gin.TypeProxy].(*proxy.Backend); ok && opt.Backend == BackendProxy {
				snap.proxy = append(snap.proxy, pb)
			}
		}
		c, err := gin.NewComm(m.Ranks[:st.EP], cfg)
		if err == nil {
			so.comm(c, c.Config().Backends)
			e.Comms = append(e.Comms, c)
		}
		return c, err
	}
	if err := installTaps(e, opt); err != nil {
		return stepOut{}, err
	}
	var wl Workload
	switch opt.kernel {
	case ModeLL:
		if opt.Backend == BackendNCCL {
			wl = ncclbase.New(e)
		} else {
			wl = ll.New(e, false)
		}
	case ModeV2Direct:
		d := v2.NewDirect(e)
		d.SMs = opt.SMs
		wl = d
	case ModeV2Hybrid:
		h := v2.NewHybrid(e)
		h.SMs = opt.SMs
		wl = h
	case ModeNCCLEP:
		l := ll.New(e, true)
		l.MaxSMs = opt.SMs
		wl = l
	case ModeHT:
		wl = ht.New(e)
	}
	if err := wl.Setup(); err != nil {
		return stepOut{}, err
	}
	if opt.Observe != nil {
		opt.Observe(wl)
	}
	s0 := snap.take()
	wl.Dispatch()
	var util *utilSampler
	if opt.Timeline != nil && opt.UtilEvery > 0 {
		util = newUtilSampler(snap, opt.UtilEvery)
	}
	if err := e.Run(); err != nil {
		return stepOut{}, chk.failed(err, w.Pending() == 0)
	}
	s1 := snap.take()
	d := s1.Since(s0)
	ids := m.PortIDs()
	dc := criticalOf(e, &e.Disp, so.trk, d, ids)
	so.trk.Reset()
	wl.Combine()
	if err := e.Run(); err != nil {
		return stepOut{}, chk.failed(err, w.Pending() == 0)
	}
	s2 := snap.take()
	c := s2.Since(s1)
	cc := criticalOf(e, &e.Comb, so.trk, c, ids)
	lr := LayerReport{Iter: iter, Layer: layer, Dispatch: phaseOf(e.Result(&e.Disp), dc, d),
		Combine: phaseOf(e.Result(&e.Comb), cc, c), Transport: transportOf(m)}
	hdr := tr.Header()
	prec, err := hdr.DispatchPrecision()
	if err != nil {
		return stepOut{}, err
	}
	lr.Bandwidths = bandwidths(opt.kernel, st, hidden, prec, &e.Disp, &e.Comb)
	if util != nil {
		util.stop()
	}
	o := stepOut{lr: lr, events: w.Fired(), end: e.Now(),
		spans: [2]span{{d, s1.At.Sub(s0.At)}, {c, s2.At.Sub(s1.At)}}}
	if k, ok := wl.(interface{ KernelSMs() int }); ok {
		o.sms = k.KernelSMs()
	}
	if chk != nil {
		r := chk.end()
		o.check = &r
	}
	if opt.Timeline != nil {
		o.tl = stepTimeline{ep: st.EP, iter: st.Iter, layer: st.Layer, disp: e.Disp, comb: e.Comb, crit: [2]critical{dc, cc}}
		if util != nil {
			o.tl.util = util.tracks()
		}
		if det != nil {
			o.tl.detail = det.tracks(e.Now())
		}
	}
	return o, nil
}

// serialBelow is the World's SetSerialBelow: sparse windows run on the
// caller alone (tests set 0, to run every window on the pool).
var serialBelow uint64 = sim.DefaultSerialBelow

// newMachine builds one step's machine on a World of one partition per
// node, run by the sequential kernel with opt.Sequential. The caller sets
// the World's Exec.
func newMachine(spec machine.Spec, nodes int, opt *Options) (*machine.Machine, *sim.World, error) {
	w := sim.NewWorld(sim.Config{Seed: opt.Seed}, nodes, machine.Lookahead(spec, nodes))
	w.SetSequential(opt.Sequential)
	m, err := machine.BuildWorld(w, spec, nodes, opt.Tune)
	return m, w, err
}

// installTaps taps, for pcap, the chosen ranks' NIC ports (the packets'
// bytes: the observer's events carry their headers' fields, not frames).
func installTaps(e *workload.Env, opt *Options) error {
	if opt.Pcap == nil {
		return nil
	}
	for _, r := range opt.PcapRanks {
		if r < 0 || r >= e.Step.EP {
			return fmt.Errorf("replay: pcap rank %d out of range [0, %d)", r, e.Step.EP)
		}
		for j, n := range e.M.Ranks[r].NICs {
			iface, err := opt.Pcap.AddInterface("rank"+strconv.Itoa(r)+"/nic"+strconv.Itoa(j),
				"step "+strconv.Itoa(e.Step.Iter)+"/"+strconv.Itoa(e.Step.Layer))
			if err != nil {
				return err
			}
			ep, s := n.Endpoint(), e.SimOf(r)
			e.M.Net.TapEndpoint(ep, int(ep), func(_ int, at sim.Time, p *fabric.Packet) {
				writePcap(s, opt.Pcap, iface, at, p)
			})
		}
	}
	return nil
}

func writePcap(s *sim.Sim, w *pcap.Writer, iface int, at sim.Time, p *fabric.Packet) {
	var fs roce.FrameSpec
	fs.SrcMAC = [6]byte{0x02, 0, 0, 0, byte(p.Src >> 8), byte(p.Src)}
	fs.DstMAC = [6]byte{0x02, 0, 0, 0, byte(p.Dst >> 8), byte(p.Dst)}
	fs.SrcIP = [16]byte{10, 0, byte(p.Src >> 8), byte(p.Src)}
	fs.DstIP = [16]byte{10, 0, byte(p.Dst >> 8), byte(p.Dst)}
	fs.SrcPort = p.SrcPort
	fs.ECN = p.ECN
	if err := w.WriteRoCE(iface, at, &fs, &p.Hdr, int(p.PayloadLen), ""); err != nil {
		s.Fail(fmt.Errorf("replay: pcap: %w", err))
	}
}

// stepTimeline is what the timeline draws of one step: per rank, the two
// phases; for the slowest rank, the critical path of each phase.
type stepTimeline struct {
	ep, iter, layer int
	disp, comb      workload.Phase
	crit            [2]critical
	// util are the resources' utilisation tracks (Options.UtilEvery).
	util []utilTrack
	// detail are the per-warp and per-QP tracks (Options.TimelineDetail).
	detail []detailTrack
}

// write draws the step, base later than its own clock; lay places the
// detail tracks (nil: no detail).
func (st *stepTimeline) write(tw *timeline.Writer, base sim.Time, lay *detailLayout) {
	stepName := "iter " + strconv.Itoa(st.iter) + " layer " + strconv.Itoa(st.layer)
	if base == 0 {
		for r := range st.ep {
			tw.Process(r, "rank "+strconv.Itoa(r))
			tw.Thread(r, 0, "phases")
			tw.Thread(r, 1, "critical path")
		}
		if st.util != nil {
			tw.Process(st.ep, "resources (util %)")
		}
	}
	for _, u := range st.util {
		pts := make([]timeline.Point, len(u.pts))
		for i, p := range u.pts {
			pts[i] = timeline.Point{At: base + p.At, Value: p.Value}
		}
		tw.CounterTrack(st.ep, u.name, pts)
	}
	for i, ph := range []*workload.Phase{&st.disp, &st.comb} {
		for r, d := range ph.Done {
			tw.Slice(r, 0, ph.Name, stepName, base+ph.Start, d.Sub(ph.Start),
				timeline.Arg{Key: "layer", Value: st.layer}, timeline.Arg{Key: "iter", Value: st.iter})
		}
		cr := &st.crit[i]
		if !cr.valid {
			continue
		}
		seg := func(name string, a, b sim.Time) {
			if b > a {
				tw.Slice(cr.slow, 1, name, ph.Name, base+a, b.Sub(a))
			}
		}
		if cr.op {
			seg("signal issue (rank "+strconv.Itoa(cr.from)+")", cr.call, cr.issued)
			seg("in flight", cr.issued, cr.effect)
			seg("visibility", cr.effect, cr.seen)
		}
		seg("receiver work", cr.seen, cr.done)
	}
	if lay != nil {
		writeDetail(tw, lay, st.detail, stepName, base)
	}
}
