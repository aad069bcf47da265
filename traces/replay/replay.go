package replay

import (
	"fmt"
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
	// NVLink sends intra-node traffic over NVLink (LSA stores) instead of
	// RDMA loopback through the NIC. ModeNCCLEP sets it unless RDMAOnly.
	NVLink bool
	// RDMAOnly sends every put through a NIC, intra-node ones included:
	// NCCL EP's LL without LSA (ep_bench --disable-nvlink, which sets
	// NCCL_P2P_DISABLE; NVIDIA/nccl contrib/nccl_ep/ep_bench.cu:2837).
	// Only ModeNCCLEP uses NVLink by default; the other modes ignore it.
	RDMAOnly bool
	// SMs is the library's SM count in place of its default (0: the
	// default): V1 HT's num_sms (Params.HTSMs), V2's num_sms, NCCL EP's
	// max_num_sms. V1 LL has none (its grid follows the experts).
	SMs  int
	Seed uint64
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
	// Backends builds the GIN backends of a communicator (set by the
	// caller that links gin/gdaki and gin/proxy; nil: CommConfig default).
	Backends func() map[gin.Type]gin.Backend
	// NoThen runs every device program on a process, even where the
	// backend can issue without one (tests compare the two).
	NoThen bool
	// Observe, when set (tests only), is called with every step's
	// workload after its setup.
	Observe func(Workload)
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

// V2Kernels returns the DeepEP V2 kernels ElasticBuffer runs on a cluster
// of nodes nodes with hybrid mode allowed (its default): the hybrid ones
// when the EP group spans more than one NVLink domain, else direct.
func V2Kernels(nodes int) string {
	if nodes > 1 {
		return ModeV2Hybrid
	}
	return ModeV2Direct
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
	if opt.Mode == ModeNCCLEP && !opt.RDMAOnly {
		opt.NVLink = true // NCCL EP's default: LSA for LSA-reachable peers
	}
	if opt.Mode == ModeV2 {
		opt.kernel = V2Kernels(nodes)
	}
	if opt.kernel == ModeV2Hybrid && (nodes < 2 || tr.EP()%spec.GPUsPerNode != 0) {
		return nil, fmt.Errorf("replay: --mode %s needs EP over two or more whole nodes (EP %d on %d-GPU nodes): "+
			"DeepEP runs its direct kernels inside one NVLink domain", ModeV2Hybrid, tr.EP(), spec.GPUsPerNode)
	}
	steps := Steps(tr, opt.Layers)
	if len(steps) == 0 {
		return nil, fmt.Errorf("replay: trace %s has no route records to replay", opt.TraceName)
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
	for _, o := range outs {
		disp, comb = append(disp, o.spans[0]), append(comb, o.spans[1])
		if opt.Timeline != nil {
			o.tl.write(opt.Timeline, base)
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
		"breakdown: doorbell+PCIe is the unloaded doorbell, NIC doorbell handling and WQE fetch latency; the rest of issue-to-first-bit is NIC queueing",
	}
	if o.Backend == BackendProxy {
		n = append(n, "proxy: 'proxy queue' runs from the GPU finishing the signal's GFD stores to the CPU thread's ibv_post_send returning (the GFD's PCIe crossing, its wait in the ring while the thread serves other GFDs, the read and post costs); ht records no proxy instants yet")
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
		jobs = 1 // packets are written as they cross the ports
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
	st, err := workload.NewStep(tr, iter, layer)
	if err != nil {
		return stepOut{}, err
	}
	s := sim.New(sim.Config{Seed: opt.Seed})
	m, err := machine.BuildTuned(s, spec, nodes, opt.Tune)
	if err != nil {
		return stepOut{}, err
	}
	p := workload.DefaultParams()
	if opt.Params != nil {
		p = *opt.Params
	}
	if opt.SMs > 0 && opt.kernel == ModeHT {
		p.HTSMs = opt.SMs
	}
	cfg := workload.Config{Backend: opt.Backend, NVLink: opt.NVLink, NoThen: opt.NoThen}
	e := workload.NewEnv(s, m, st, cfg, p, tr.Header(), hidden)
	snap := &snapshotter{m: m}
	var chk *stepChecker
	if opt.Check {
		chk = newStepChecker(m)
	}
	e.NewComm = func() (*gin.Comm, error) {
		// PR #521 ran on NCCL 2.28; optFlags (V2 / NCCL EP) need 2.29.7+.
		cfg := gin.CommConfig{Version: gin.V2_28, NContexts: workload.CtxsPerComm}
		if isV2(opt.Mode) || opt.Mode == ModeNCCLEP {
			cfg.Version = gin.V2_30
		}
		if opt.Backends != nil {
			cfg.Backends = opt.Backends()
			e.ObserveProxy(cfg.Backends)
			if pb, ok := cfg.Backends[gin.TypeProxy].(*proxy.Backend); ok && opt.Backend == BackendProxy {
				snap.proxy = append(snap.proxy, pb)
			}
			if chk != nil {
				chk.backends(cfg.Backends)
			}
		}
		c, err := gin.NewComm(m.Ranks[:st.EP], cfg)
		if err == nil && chk != nil {
			c.SetObserver(chk.bus)
		}
		return c, err
	}
	if err := installTaps(e, opt); err != nil {
		return stepOut{}, err
	}
	var w Workload
	switch opt.kernel {
	case ModeLL:
		if opt.Backend == BackendNCCL {
			w = ncclbase.New(e)
		} else {
			w = ll.New(e, false)
		}
	case ModeV2Direct:
		d := v2.NewDirect(e)
		d.SMs = opt.SMs
		w = d
	case ModeV2Hybrid:
		h := v2.NewHybrid(e)
		h.SMs = opt.SMs
		w = h
	case ModeNCCLEP:
		l := ll.New(e, true)
		l.MaxSMs = opt.SMs
		w = l
	case ModeHT:
		w = ht.New(e)
	}
	if err := w.Setup(); err != nil {
		return stepOut{}, err
	}
	if opt.Observe != nil {
		opt.Observe(w)
	}
	s0 := snap.take()
	w.Dispatch()
	var util *utilSampler
	if opt.Timeline != nil && opt.UtilEvery > 0 {
		util = newUtilSampler(s, snap, opt.UtilEvery)
	}
	if err := e.Run(); err != nil {
		return stepOut{}, chk.failed(err, s.Pending() == 0)
	}
	s1 := snap.take()
	w.Combine()
	if err := e.Run(); err != nil {
		return stepOut{}, chk.failed(err, s.Pending() == 0)
	}
	s2 := snap.take()
	d, c := s1.Since(s0), s2.Since(s1)
	lr := LayerReport{Iter: iter, Layer: layer, Dispatch: phaseOf(e.Result(&e.Disp), d),
		Combine: phaseOf(e.Result(&e.Comb), c), Transport: transportOf(m)}
	hdr := tr.Header()
	prec, err := hdr.DispatchPrecision()
	if err != nil {
		return stepOut{}, err
	}
	lr.Bandwidths = bandwidths(opt.kernel, st, hidden, prec, &e.Disp, &e.Comb)
	events := s.Fired()
	if util != nil {
		util.stop()
		events -= util.fired
	}
	o := stepOut{lr: lr, events: events, end: s.Now(),
		spans: [2]span{{d, s1.At.Sub(s0.At)}, {c, s2.At.Sub(s1.At)}}}
	if k, ok := w.(interface{ KernelSMs() int }); ok {
		o.sms = k.KernelSMs()
	}
	if chk != nil {
		r := chk.end()
		o.check = &r
	}
	if opt.Timeline != nil {
		o.tl = stepTimeline{ep: st.EP, iter: st.Iter, layer: st.Layer, disp: e.Disp, comb: e.Comb}
		if util != nil {
			o.tl.util = util.tracks()
		}
	}
	return o, nil
}

// installTaps taps every NIC port for the breakdown and, for pcap, the
// chosen ranks' ports.
func installTaps(e *workload.Env, opt *Options) error {
	capture := map[fabric.EndpointID]int{}
	if opt.Pcap != nil {
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
				capture[n.Endpoint()] = iface
			}
		}
	}
	for _, n := range e.M.NICs {
		ep := n.Endpoint()
		iface, cap := capture[ep]
		e.M.Net.TapEndpoint(ep, int(ep), func(_ int, at sim.Time, p *fabric.Packet) {
			e.Tap(int(ep), at, p)
			if cap {
				writePcap(e.Sim, opt.Pcap, iface, at, p)
			}
		})
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
	// util are the resources' utilisation tracks (Options.UtilEvery).
	util []utilTrack
}

// write draws the step, base later than its own clock.
func (st *stepTimeline) write(tw *timeline.Writer, base sim.Time) {
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
	for _, ph := range []*workload.Phase{&st.disp, &st.comb} {
		var slow int
		for r, d := range ph.Done {
			tw.Slice(r, 0, ph.Name, stepName, base+ph.Start, d.Sub(ph.Start),
				timeline.Arg{Key: "layer", Value: st.layer}, timeline.Arg{Key: "iter", Value: st.iter})
			if d > ph.Done[slow] {
				slow = r
			}
		}
		p := ph.Last[slow]
		if !p.Valid {
			continue
		}
		seg := func(name string, a, b sim.Time) {
			if b > a {
				tw.Slice(slow, 1, name, ph.Name, base+a, b.Sub(a))
			}
		}
		seg("signal issue (rank "+strconv.Itoa(p.From)+")", p.IssueStart, p.IssueEnd)
		seg("in flight", p.IssueEnd, p.Landed)
		seg("visibility", p.Landed, p.Seen)
		seg("receiver work", p.Seen, p.Done)
	}
}
