package v2

import (
	"fmt"
	"math"
	"strconv"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// Params are the constants of DeepEP V2 (ElasticBuffer) direct mode that
// are not communication mechanisms: the kernel's sizing inputs and the SM's
// TMA copy rates. Every field names the hardware or code fact it stands for.
type Params struct {
	// SMReadRate is one SM's HBM read bandwidth for TMA loads (token
	// loads, the combine's local reduction): 200 GB/s, the sm_read_gbs
	// default of ElasticBuffer.get_theoretical_num_sms.
	SMReadRate sim.BitRate
	// SMWriteRate is one SM's store bandwidth for TMA stores into local
	// HBM (send buffer, local-rank bypass): 50 GB/s, the sm_write_gbs
	// default of get_theoretical_num_sms.
	SMWriteRate sim.BitRate
	// NVLinkEfficencyPct scales the NVLink rate into get_nvlink_gbs: the
	// sum of `nvidia-smi nvlink -s` link rates times factor 0.9.
	NVLinkEfficiencyPct int64
	// SmemBytes is the dynamic shared memory a V2 kernel CTA gets: the
	// H100 opt-in maximum per block, 227 KiB (232,448 B); the launcher
	// sizes the warp count from it.
	SmemBytes int
	// NotifyWarps is kNumNotifyWarps of the direct dispatch launcher (4).
	NotifyWarps int
	// AllocatedQPs is num_allocated_qps of a buffer without hybrid mode
	// (17: 16 channels + the notify QP).
	AllocatedQPs int
	// DirectQPs caps get_theoretical_num_qps in direct mode: min(num_sms,
	// 8 + 1) "to reduce DB ringing overhead".
	DirectQPs int
	// RouteCycles is a warp's per-token routing work outside memory:
	// ptx::deduplicate of the k destination ranks (a __match_any_sync and
	// a ballot, ~20 cycles each) and a shared-memory atomicAdd_block
	// (~30 cycles): ~70 cycles.
	RouteCycles int64
	// GinQPDepth is the send queue depth DeepEP asks of every GIN context
	// (reqs.ginQueueDepth = kGinQPDepth, 1024 WQEs).
	GinQPDepth int

	// HybridUpdateInterval is kScaleoutUpdateInterval of hybrid dispatch
	// (6): a scale-out channel publishes its tail to a node every 6
	// records for it; it is also kNumSlotsPerForwardChunk, the most
	// records a forward warp takes from one node per visit.
	HybridUpdateInterval int
	// HybridScaleupInterval is kNumScaleupUpdateInterval of hybrid
	// combine (3): scale-up warps publish their NVLink tails every 3
	// rounds ("st.release.sys is pretty slow").
	HybridScaleupInterval int
	// HybridMaxChannelsPerSM is kNumMaxChannelsPerSM (8) of the hybrid
	// launcher.
	HybridMaxChannelsPerSM int
	// HybridQPsPerSM is get_theoretical_num_qps in hybrid mode: 16 QPs
	// per SM plus the notify QP.
	HybridQPsPerSM int
	// HybridAllocatedQPs is num_allocated_qps with hybrid mode allowed:
	// 129 (65 when ibstat reports MT4131, ConnectX-8 fast RDMA atomics;
	// the presets' ConnectX-7 is MT4129).
	HybridAllocatedQPs int
}

// DefaultParams returns DeepEP V2's defaults on an H100.
func DefaultParams() Params {
	return Params{
		SMReadRate:          sim.GBps(200),
		SMWriteRate:         sim.GBps(50),
		NVLinkEfficiencyPct: 90,
		SmemBytes:           232448,
		NotifyWarps:         4,
		AllocatedQPs:        17,
		DirectQPs:           9,
		RouteCycles:         70,
		GinQPDepth:          1024,

		HybridUpdateInterval:   6,
		HybridScaleupInterval:  3,
		HybridMaxChannelsPerSM: 8,
		HybridQPsPerSM:         16,
		HybridAllocatedQPs:     129,
	}
}

// expectedTopK is get_theoretical_num_sms's expected number of distinct
// groups a token's k experts fall in, under uniform routing over g equal
// groups of e experts: g·(1 − C(e − e/g, k) / C(e, k)).
func expectedTopK(e, k, g int) float64 {
	ratio := 1.0
	for i := range k {
		ratio *= float64(e-e/g-i) / float64(e-i)
	}
	return float64(g) * (1 - ratio)
}

// NumSMs is ElasticBuffer.get_theoretical_num_sms for direct mode (one
// scale-out domain): ranks EP ranks, nvl of them per NVLink domain, rdma
// domains, NVLink bandwidth nvlGBps (already scaled by the efficiency
// factor) and the device's SM count. It returns an even count of at
// least 4, at most deviceSMs.
func NumSMs(experts, topK, ranks, nvl, rdma int, nvlGBps float64, p Params, deviceSMs int) int {
	ek := expectedTopK(experts, topK, ranks)
	read := 1 / ek
	write := float64(nvl) / float64(ranks)
	if rdma > 1 {
		write += 1 / ek
	}
	// Direct mode is bounded by NVLink traffic (the scale-out branch of
	// the formula needs num_scaleout_ranks > 1).
	traffic := float64(nvl) / float64(ranks) * (1 - 1/float64(nvl))
	return smsFor(nvlGBps, traffic, read, write, p, deviceSMs)
}

// smsFor is the end of get_theoretical_num_sms: the SMs whose TMA read and
// write bandwidth keep up, with 25% headroom, with a link of gbs GB/s
// carrying traffic per token when the SMs read and write read and write
// per token; an even count of at least 4, at most deviceSMs (all of them
// without traffic).
func smsFor(gbs, traffic, read, write float64, p Params, deviceSMs int) int {
	if traffic <= 0 {
		return deviceSMs
	}
	x := math.Max(gbs/traffic*read/p.SMReadRate.GBps(), gbs/traffic*write/p.SMWriteRate.GBps())
	n := max(4, int(math.Ceil(x*1.25)))
	return min((n+1)/2*2, deviceSMs)
}

// NumQPs is get_theoretical_num_qps in direct mode.
func NumQPs(sms int, p Params) int { return min(sms, p.DirectQPs, p.AllocatedQPs) }

// HybridNumSMs is ElasticBuffer.get_theoretical_num_sms in hybrid mode:
// ranks EP ranks in scaleout NVLink domains (nodes), NIC rate rdmaGBps
// (ibstat's rate / 8) and NVLink rate nvlGBps (already scaled by the
// efficiency factor). Per token: scale-out warps read it and write the
// send buffer and the local-node bypass, forward warps read every
// (token, node) record and write one copy per (token, rank); the kernel
// is bounded by RDMA or NVLink, whichever is slower. It returns an even
// count of at least 4, at most deviceSMs.
func HybridNumSMs(experts, topK, ranks, scaleout int, rdmaGBps, nvlGBps float64, p Params, deviceSMs int) int {
	so := expectedTopK(experts, topK, scaleout)
	ek := expectedTopK(experts, topK, ranks)
	s := float64(scaleout)
	read := 1/ek + so/ek
	write := 1/ek + so/ek/s + 1
	rdma := so / ek * (1 - 1/s)
	nvl := 1 - s/float64(ranks)
	gbs, traffic := nvlGBps, nvl
	if rdma/rdmaGBps > nvl/nvlGBps {
		gbs, traffic = rdmaGBps, rdma
	}
	return smsFor(gbs, traffic, read, write, p, deviceSMs)
}

// HybridNumQPs is get_theoretical_num_qps in hybrid mode: num_sms × 16
// + 1, capped by the allocated QPs.
func HybridNumQPs(sms int, p Params) int {
	return min(sms*p.HybridQPsPerSM+1, p.HybridAllocatedQPs)
}

// notifySmemBytes is get_num_notify_smem_bytes: the notify warps' (rank,
// expert) counters, aligned to the notify threads.
func notifySmemBytes(ranks, experts int, p Params) int {
	th := 32 * p.NotifyWarps
	return (ranks + experts + th - 1) / th * th * 4
}

// hybridChannels is the hybrid launcher's channels per SM: as many
// dispatch records (with their mbarrier, 32 B) as fit the shared memory
// beside the notify counters, at most 32 − notify warps; as many combine
// records; half of that (a scale-out and a forward warp per channel), at
// most kNumMaxChannelsPerSM.
func hybridChannels(rec, crec, ranks, experts int, p Params) int {
	c := min((p.SmemBytes-notifySmemBytes(ranks, experts, p))/(rec+32), 32-p.NotifyWarps)
	c = min(p.SmemBytes/(crec+32), c)
	return min(c/2, p.HybridMaxChannelsPerSM)
}

// qpFor is comm::get_qp_mode: the context and sharing mode of channel ch of
// SM sm; withNotify reserves QP 0 for the notify warps.
func qpFor(sms, qps, chPerSM, sm, ch int, withNotify bool) (int, gin.Sharing) {
	grid := gin.SharingGPU
	if sms == 1 {
		grid = gin.SharingCTA
	}
	if qps == 1 {
		return 0, grid
	}
	start := 0
	if withNotify {
		start = 1
	}
	avail := qps - start
	if sms <= avail {
		inSM := avail / sms
		if sm < avail%sms {
			inSM++
		}
		return start + sm + (ch%inSM)*sms, gin.SharingCTA
	}
	return start + (sm*chPerSM+ch)%avail, grid
}

func align32(n int) int { return (n + 31) / 32 * 32 }

// combineBytes is the size of a V2 combine record: BF16 hidden and the
// top-k weights, each aligned to 32 (TokenLayout without source metadata).
func combineBytes(hidden, topK int) int { return align32(2*hidden) + align32(8*topK) }

// Direct is DeepEP V2 (ElasticBuffer) direct-mode dispatch and combine
// (deep_ep/include/deep_ep/impls/dispatch.cuh, combine.cuh; spec
// moe-traffic 1.7) as GIN device programs: per kernel a prologue GIN
// barrier, notify warps (dispatch only), one warp per channel sending one
// record per distinct destination rank, and a completion barrier (flush
// every QP, grid sync, SignalInc to every rank, wait).
type Direct struct {
	e  *workload.Env
	vp Params
	// SMs is the num_sms passed to dispatch (0: get_theoretical_num_sms,
	// DeepEP elastic.py:928; tests/elastic/test_ep.py --num-sms); the QP
	// count follows it through get_theoretical_num_qps (elastic.py:929).
	SMs int

	rec, crec int   // dispatch and combine record bytes
	payload   int   // token bytes a sender loads: hidden and scale factors
	sms, qps  int   // kernel SMs and QPs (contexts)
	dw, cw    int   // dispatch warps and combine warps per SM
	nvlScale  bool  // kIsScaleupNVLink: every rank in one NVLink domain
	tokBytes  int64 // DeepEP V2 test's dispatch bytes per received token
	combBytes int64 // and combine bytes per token

	dc         *gin.DevComm
	dWin, cWin *gin.Window          // data buffers
	ws         *gin.Window          // notify counts (backed)
	ports      [][]gpu.SMPorts      // per (rank, SM): TMA load and store bandwidth
	slot       []*workload.GPUArray // per rank: sender slot counter per destination rank
	topk       []*workload.GPUArray // per rank: the routing tensor (L2-resident)
	sync       []*workload.GPUArray // per rank: grid-sync words of the phase
	arrive     []*workload.GPUArray // per rank: notify SM arrivals
	nvlBar     []*workload.GPUArray // per rank: NVLink barrier word
	epoch      []uint64             // per rank: barriers passed
	recvTokens []int64              // per rank: distinct tokens received in dispatch
}

// fixSMs puts the given SM count, if any, in place of the analytic one.
func (w *Direct) fixSMs() error {
	if w.SMs == 0 {
		return nil
	}
	if w.SMs < 1 || w.SMs > w.e.M.Profile.GPU.SMs {
		return fmt.Errorf("v2: num_sms %d out of [1, %d]", w.SMs, w.e.M.Profile.GPU.SMs)
	}
	w.sms = w.SMs
	return nil
}

// KernelSMs returns the SMs the kernels run on (after Setup).
func (w *Direct) KernelSMs() int { return w.sms }

// bwTokens is rank r's token count in the bandwidth DeepEP's README tables
// give (README.md:45-53): on several nodes the scale-out (RDMA) count of
// tests/elastic/test_ep.py:239-245, the unique (token, node) pairs r sends,
// its own node included ("contains local rank traffic"); on one node the
// scale-up (NVLink) count, the tokens r receives.
func (w *Direct) bwTokens(r int) int64 {
	nt := w.e.Step.NodeTokens[r]
	if len(nt) < 2 {
		return w.recvTokens[r]
	}
	var n int64
	for _, x := range nt {
		n += int64(x)
	}
	return n
}

// NewDirect returns DeepEP V2's direct kernels on e.
func NewDirect(e *workload.Env) *Direct { return &Direct{e: e, vp: DefaultParams()} }

// sizes checks what both V2 modes need of the routing and fills the
// record sizes and the DeepEP test's byte counts.
func (w *Direct) sizes() error {
	e, st := w.e, w.e.Step
	prec, err := e.Hdr.DispatchPrecision()
	if err != nil {
		return err
	}
	R, k, H := st.EP, st.TopK, e.Hidden
	if st.Slots%R != 0 {
		return fmt.Errorf("v2: %d experts do not divide over %d ranks (DeepEP V2 needs E %% EP == 0)", st.Slots, R)
	}
	if k > 32 {
		return fmt.Errorf("v2: top-%d needs more lanes than a warp has", k)
	}
	w.rec = traces.V2TokenBytes(H, k, prec)
	w.crec = combineBytes(H, k)
	w.payload = 2 * H
	if prec == traces.FP8 {
		w.payload = H + (H+traces.ScaleBlock-1)/traces.ScaleBlock*4
	}
	// count_bytes(recv_x, recv_topk_idx int64, recv_topk_weights) and
	// count_bytes(recv_x_bf16, recv_topk_weights) per token.
	w.tokBytes = int64(w.payload + 12*k)
	w.combBytes = int64(2*H + 4*k)
	return nil
}

func (w *Direct) Setup() error {
	e, st := w.e, w.e.Step
	if err := w.sizes(); err != nil {
		return err
	}
	R, k := st.EP, st.TopK

	gpn := e.M.Spec.GPUsPerNode
	nodes := (R + gpn - 1) / gpn
	nvl := min(gpn, R)
	w.nvlScale = e.Cfg.NVLink && nodes == 1
	nvlGBps := sim.BitRate(e.M.Spec.NVLink.Bandwidth).GBps() * float64(w.vp.NVLinkEfficiencyPct) / 100
	w.sms = NumSMs(st.Slots, k, R, nvl, nodes, nvlGBps, w.vp, e.M.Profile.GPU.SMs)
	if err := w.fixSMs(); err != nil {
		return err
	}
	w.qps = NumQPs(w.sms, w.vp)
	notifySmem := notifySmemBytes(R, st.Slots, w.vp)
	w.dw = min((w.vp.SmemBytes-notifySmem)/(w.rec+32), 32-w.vp.NotifyWarps)
	w.cw = min(w.vp.SmemBytes/(w.crec+32), 32)
	if w.dw < 1 || w.cw < 1 {
		return fmt.Errorf("v2: a %d-byte token does not fit the %d bytes of shared memory", w.crec, w.vp.SmemBytes)
	}

	comm, err := e.NewComm()
	if err != nil {
		return err
	}
	w.dc, err = comm.DevCommCreate(gin.Requirements{GinContextCount: w.qps, GinSignalCount: R,
		ConnectionType: gin.ConnFull, Type: e.GinType()})
	if err != nil {
		return fmt.Errorf("v2: %w", err)
	}
	if err := needThen(w.dc); err != nil {
		return err
	}
	T := uint64(st.MaxTokens)
	if w.dWin, err = comm.WindowRegister("v2/dispatch", sim.Bytes((uint64(R)+1)*T*uint64(w.rec)), 0, false); err != nil {
		return fmt.Errorf("v2: %w", err)
	}
	if w.cWin, err = comm.WindowRegister("v2/combine", sim.Bytes(2*uint64(R)*T*uint64(w.crec)), 0, false); err != nil {
		return fmt.Errorf("v2: %w", err)
	}
	if w.ws, err = comm.WindowRegister("v2/workspace", sim.Bytes(2*8*(R+R*st.Local)), 0, true); err != nil {
		return fmt.Errorf("v2: %w", err)
	}
	w.ports = make([][]gpu.SMPorts, R)
	w.epoch = make([]uint64, R)
	w.sync = make([]*workload.GPUArray, R)
	w.recvTokens = make([]int64, R)
	for r := range R {
		g := e.M.GPUs[r]
		w.ports[r] = make([]gpu.SMPorts, w.sms)
		for sm := range w.ports[r] {
			w.ports[r][sm] = gpu.NewSMPorts(w.vp.SMReadRate, w.vp.SMWriteRate)
		}
		w.slot = append(w.slot, workload.NewGPUArray(g, "v2/slot", R))
		w.topk = append(w.topk, workload.NewGPUArray(g, "v2/topk", 1))
		w.arrive = append(w.arrive, workload.NewGPUArray(g, "v2/notify-arrive", 1))
		w.nvlBar = append(w.nvlBar, workload.NewGPUArray(g, "v2/nvl-barrier", 1))
		for src := range R {
			w.recvTokens[r] += int64(st.RankTokens[src][r])
		}
	}
	return nil
}

// nvl reports whether rank a reaches rank b with NVLink stores (LSA).
func (w *Direct) nvl(a, b int) bool {
	return w.e.Cfg.NVLink && w.e.M.Ranks[a].Node == w.e.M.Ranks[b].Node
}

// read reserves n bytes of SM sm of rank r's TMA read bandwidth from now
// and returns when the transfer is complete, plus the memory latency lat.
func (w *Direct) read(t *gpu.Group, r, sm, n int, lat sim.Duration) sim.Time {
	return w.ports[r][sm].Read(t.Now(), sim.Bytes(n)).Add(lat)
}

// write is read for the SM's TMA write bandwidth.
func (w *Direct) write(t *gpu.Group, r, sm, n int, lat sim.Duration) sim.Time {
	return w.ports[r][sm].Write(t.Now(), sim.Bytes(n)).Add(lat)
}

// gridSync is grid sync i of rank r's kernel of n SMs (gpu.GridSync on
// the rank's sync words).
func (w *Direct) gridSync(t *gpu.Group, r, i int, n uint64) {
	a := w.sync[r]
	t.GridSync(a.R, a.Off(i), n)
}

// barrier is comm::gpu_barrier's scale-up part run by SM 0: over GIN
// (gin_barrier_wo_local_sync: QP 0, CTA sharing, SignalInc{rank} to every
// rank, wait every signal past its shadow) or, with every rank in one
// NVLink domain, nvlink_barrier_wo_local_sync (a system-scope red.add to
// every peer's barrier word). le tags the barrier in the breakdown.
func (w *Direct) barrier(t *gpu.Group, r, le int) {
	e, R := w.e, w.e.Step.EP
	w.epoch[r]++
	if w.nvlScale {
		t.Parallel(R, func(th *gpu.Group, i int) {
			th.Red64(w.nvlBar[i].R, 0, 1, gpu.ScopeSystem)
		})
		target := w.epoch[r] * uint64(R)
		t.WaitWord(w.nvlBar[r].R, 0, "v2 nvlink barrier", func(v uint64) bool { return v >= target })
		e.NoteLast(r, e.Saw(r, r, w.nvlBar[r].R, 0))
		return
	}
	ph := e.Ph.Count(r)
	t.ParallelWait(R, func(th *gpu.Group, i int, h sim.Handler, arg uint64) {
		ph.Sigs++
		if i == r {
			// NCCL signals its own rank through a loopback QP; the model's
			// backends have no self connection, so the increment is a
			// device-scope atomic on the local signal word.
			reg, off := w.dc.Backend().SignalWord(w.dc, r, 0, r)
			th.AtomicAdd64Then(reg, off, 1, gpu.ScopeDevice, h, arg)
			return
		}
		gn := w.dc.GinShared(th, r, 0, gin.SharingCTA)
		gn.SignalThen(h, arg, w.dc.World(r), i, gin.SignalInc{Signal: r})
	})
	t.Parallel(R, func(th *gpu.Group, i int) {
		gn := w.dc.GinShared(th, r, 0, gin.SharingCTA)
		reg, off := w.dc.Backend().SignalWord(w.dc, r, 0, i)
		gn.IncreaseSignalShadow(i, 1)
		gn.WaitSignalMeetShadow(i, 64)
		e.NoteLast(r, e.Saw(i, r, reg, off))
	})
}

// flushers launches the end barrier's flush warps (global warp q flushes
// QP q with CTA sharing), which wait for the first grid sync and arrive at
// the second; n is the kernel's participant count in both.
func (w *Direct) flushers(g *gpu.GPU, r int, name string, n uint64) {
	k := newKernel(g, name, w.sync[r], n, 2)
	for q := range w.qps {
		k.launchAs(&flushWarp{warp: warp{r: r}, w: w, q: q}, name+"/flush"+strconv.Itoa(q))
	}
}

// flushWarp is an end-barrier flush warp of rank r, which flushes QP q.
// Its program, with the step that runs each line:
//
//	grid sync 0; grid sync 1                       // kernel.launch
//	flush QP q (CTA sharing), unless every rank is in one NVLink domain   // fFlush
//	grid sync 2 (the QPs' warps and SM 0); end     // fEnd
type flushWarp struct {
	warp
	w  *Direct
	q  int
	pc uint8
}

// Steps of a flushWarp.
const (
	fFlush uint8 = iota // past grid sync 1: flush
	fEnd                // flushed: the last grid sync, then end
)

// Handle implements sim.Handler.
func (m *flushWarp) Handle(*sim.Sim, uint64) {
	w := m.w
	if m.pc == fFlush {
		m.pc = fEnd
		if !w.nvlScale {
			w.dc.GinShared(m.t, m.r, m.q, gin.SharingCTA).FlushThen(m, 0)
			return
		}
	}
	n := uint64(w.qps) + 1
	m.grid.reached = func(v uint64) bool { return v >= n }
	m.grid.drainEnd(0, 2)
}

// distinctRanks returns the destination ranks of token tok of rank r in
// lane order, each once.
func (w *Direct) distinctRanks(r, tok int, buf []int) []int {
	st := w.e.Step
	buf = buf[:0]
	for _, x := range st.TopKIdx[r][tok] {
		if x < 0 {
			continue
		}
		d := st.Home[x]
		dup := false
		for _, y := range buf {
			dup = dup || y == d
		}
		if !dup {
			buf = append(buf, d)
		}
	}
	return buf
}

// Dispatch launches dispatch_impl on every rank.
func (w *Direct) Dispatch() { w.phase(&w.e.Disp, "dispatch", w.tokBytes, w.launchDispatch) }

// phase begins phase ph and launches its kernel on every rank r, whose
// bandwidth bytes (DeepEP's count) are bwTokens(r) × perToken.
func (w *Direct) phase(ph *workload.Phase, name string, perToken int64, launch func(r int)) {
	w.e.BeginOne(ph, name)
	for r := range w.e.Step.EP {
		ph.BWBytes[r] = w.bwTokens(r) * perToken
		launch(r)
	}
}

// launchBarrier launches SM 0's barrier threads of rank r's kernel: the
// prologue barrier (le tags it), the end barrier's grid syncs (n groups,
// then the flush warps), the end barrier (le+1), then done.
func (w *Direct) launchBarrier(g *gpu.GPU, r int, kernel string, threads int, n uint64, le int, done func(t *gpu.Group)) {
	g.Launch(kernel+"/barrier", threads, func(t *gpu.Group) {
		w.barrier(t, r, le)
		w.gridSync(t, r, 0, n)
		w.gridSync(t, r, 1, n)
		w.gridSync(t, r, 2, uint64(w.qps)+1)
		w.barrier(t, r, le+1)
		done(t)
	})
}

func (w *Direct) launchDispatch(r int) {
	e, st := w.e, w.e.Step
	g := e.M.GPUs[r]
	w.sync[r] = workload.NewGPUArray(g, "v2/dispatch-sync", 3)
	// Tokens of dispatch warp (sm, wi): wi*sms + sm, stride dw*sms.
	type warp struct {
		sm, wi int
		toks   []int
	}
	var warps []warp
	for wi := range w.dw {
		for sm := range w.sms {
			var toks []int
			for tok := wi*w.sms + sm; tok < st.Tokens[r]; tok += w.dw * w.sms {
				toks = append(toks, tok)
			}
			if len(toks) > 0 {
				warps = append(warps, warp{sm, wi, toks})
			}
		}
	}
	n := uint64(1 + w.sms + len(warps) + w.qps)

	// SM 0's barrier threads: prologue barrier, end barrier, done.
	w.launchBarrier(g, r, "dispatch", 32*(w.vp.NotifyWarps+w.dw), n, 0, func(*gpu.Group) {
		e.ReceiverDone(r, e.LastOf(r))
	})
	w.flushers(g, r, "dispatch", n)
	for sm := range w.sms {
		g.Launch("dispatch/sm"+strconv.Itoa(sm)+"/notify", 32*w.vp.NotifyWarps, func(t *gpu.Group) {
			w.gridSync(t, r, 0, n)
			w.notify(t, r, sm)
			w.gridSync(t, r, 1, n)
		})
	}
	k := newKernel(g, "dispatch", w.sync[r], n, 1)
	for _, wp := range warps {
		k.launch(newDispWarp(w, r, wp.sm, wp.wi, wp.toks), "w", wp.wi)
	}
}

// notify is one SM's notify warps: count the SM's tokens per rank and
// expert, reduce over the grid; SM 0 then sends the counts to every rank
// and waits for every rank's counts.
func (w *Direct) notify(t *gpu.Group, r, sm int) {
	e, st := w.e, w.e.Step
	cfg := t.GPU().Config()
	ph := e.Ph.Count(r)
	R, L := st.EP, st.Local
	mine := 0
	for tok := sm; tok < st.Tokens[r]; tok += w.sms {
		mine++
	}
	for range (mine + w.vp.NotifyWarps - 1) / w.vp.NotifyWarps {
		t.Load64(w.topk[r].R, 0)
		t.Cycles(w.vp.RouteCycles)
	}
	t.Sync()
	// red.add of every (rank, expert) counter into the grid reduction
	// workspace, posted, one per thread per round.
	rounds := (R + st.Slots + t.Size() - 1) / t.Size()
	t.Compute(sim.Duration(rounds) * cfg.StoreIssue)
	t.AtomicAdd64(w.arrive[r].R, 0, 1, gpu.ScopeDevice)
	if sm != 0 {
		return
	}
	t.WaitWord(w.arrive[r].R, 0, "v2 notify grid reduction", func(v uint64) bool { return v >= uint64(w.sms) })
	// Encoded counts (count + 1: zero means "not arrived") into the send
	// area: rank counts, then per destination rank its experts' counts.
	words := make([]byte, 8*(R+R*L))
	for d := range R {
		workload.PutLE64(words[8*d:], uint64(st.RankTokens[r][d])+1)
		for le := range L {
			v := uint64(1)
			if le < len(st.Experts[d]) {
				v += uint64(st.Count[r][st.Experts[d][le]])
			}
			workload.PutLE64(words[8*(R+d*L+le):], v)
		}
	}
	ws := w.ws
	t.Write(ws.Region(r), 0, words, sim.Bytes(len(words)))
	t.Sync()
	recvBase := uint64(8 * (R + R*L))
	rankOff := func(src int) uint64 { return recvBase + 8*uint64(src) }
	expOff := func(src int) uint64 { return recvBase + 8*uint64(R+src*L) }
	// Rank counts: put_value with AggregateRequests, a store for LSA peers.
	t.Parallel(R, func(th *gpu.Group, i int) {
		v := uint64(st.RankTokens[r][i]) + 1
		switch {
		case i == r:
			th.Store64(ws.Region(r), rankOff(r), v)
		case w.nvl(r, i):
			th.Store64(ws.Region(i), rankOff(r), v)
		default:
			ph.Sigs++
			ph.RDMABytes += 8
			w.dc.GinShared(th, r, 0, gin.SharingCTA).PutValue(w.dc.World(r), i, ws, rankOff(r), v, 8, nil,
				gin.OptAggregateRequests)
		}
	})
	// Expert counts: per-element stores inside one NVLink domain,
	// otherwise a bulk put of E/EP × 8 B to every rank (NVLink peers too).
	t.ParallelWait(R, func(th *gpu.Group, i int, h sim.Handler, arg uint64) {
		src := uint64(8 * (R + i*L))
		switch {
		case i == r:
			th.WriteThen(ws.Region(r), expOff(r), words[src:src+uint64(8*L)], sim.Bytes(8*L), h, arg)
		case w.nvlScale:
			st := &countStores{th: th, r: ws.Region(i), off: expOff(r), words: words[src : src+uint64(8*L)], h: h, arg: arg}
			st.Handle(nil, 0)
		default:
			ph.Sigs++
			ph.RDMABytes += int64(8 * L)
			w.dc.GinShared(th, r, 0, gin.SharingCTA).PutThen(h, arg, w.dc.World(r), i, ws, expOff(r), ws, src,
				uint64(8*L), nil, nil)
		}
	})
	t.Sync()
	// Wait for every rank's counts, then clear them for the next use.
	t.ParallelWait(R, func(th *gpu.Group, i int, h sim.Handler, arg uint64) {
		c := &countWait{th: th, r: ws.Region(r), rank: rankOff(i), exp: expOff(i) + 8*uint64(L-1), h: h, arg: arg}
		c.Handle(nil, 0)
	})
	t.Sync()
}

// countStores is a notify lane's stores of the expert counts words (8
// bytes each, in order) into r from off on, one after another; then h
// continues.
type countStores struct {
	th    *gpu.Group
	r     *mem.Region
	off   uint64
	words []byte
	h     sim.Handler
	arg   uint64
}

// Handle implements sim.Handler: the next store, or the end.
func (c *countStores) Handle(s *sim.Sim, _ uint64) {
	if len(c.words) == 0 {
		c.h.Handle(s, c.arg)
		return
	}
	v := le64(c.words)
	c.words = c.words[8:]
	off := c.off
	c.off += 8
	c.th.Store64Then(c.r, off, v, c, 0)
}

// countWait is a notify lane's wait for a source rank's counts: its rank
// count at rank, then its last expert count at exp, each nonzero, then
// stores of 0 into both for the next use; then h continues.
type countWait struct {
	th        *gpu.Group
	r         *mem.Region
	rank, exp uint64
	h         sim.Handler
	arg       uint64
	pc        uint8
}

// countReady is a count word's arrival: the senders store count + 1.
func countReady(v uint64) bool { return v != 0 }

// Handle implements sim.Handler: the next step of the lane.
func (c *countWait) Handle(s *sim.Sim, _ uint64) {
	c.pc++
	switch c.pc {
	case 1:
		c.th.WaitWordThen(c.r, c.rank, "v2 notify rank count", countReady, c, 0)
	case 2:
		c.th.WaitWordThen(c.r, c.exp, "v2 notify expert count", countReady, c, 0)
	case 3:
		c.th.Store64Then(c.r, c.rank, 0, c, 0)
	case 4:
		c.th.Store64Then(c.r, c.exp, 0, c, 0)
	default:
		c.h.Handle(s, c.arg)
	}
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// combRecord is one combine record a rank sends back: the expert outputs of
// token tok of rank src, reduced over the c experts of this rank it chose.
type combRecord struct{ src, tok, c int }

// Combine launches combine_impl on every rank, then each rank's reduction.
func (w *Direct) Combine() { w.phase(&w.e.Comb, "combine", w.combBytes, w.launchCombine) }

func (w *Direct) launchCombine(r int) {
	e, st := w.e, w.e.Step
	g := e.M.GPUs[r]
	R, crec := st.EP, w.crec
	w.sync[r] = workload.NewGPUArray(g, "v2/combine-sync", 3)
	// The records rank r received in dispatch, in receive-buffer order
	// (source rank, then token).
	var recs []combRecord
	for src := range R {
		for tok, sel := range st.TopKIdx[src] {
			c := 0
			for _, x := range sel {
				if x >= 0 && st.Home[x] == r {
					c++
				}
			}
			if c > 0 {
				recs = append(recs, combRecord{src, tok, c})
			}
		}
	}
	per := (len(recs) + w.sms*w.cw - 1) / (w.sms * w.cw)
	type warp struct {
		sm, wi int
		recs   []combRecord
	}
	var warps []warp
	for hw := range w.cw {
		wi := (hw + r) % w.cw
		for sm := range w.sms {
			gw := wi*w.sms + sm
			lo, hi := min(gw*per, len(recs)), min(gw*per+per, len(recs))
			if lo < hi {
				warps = append(warps, warp{sm, wi, recs[lo:hi]})
			}
		}
	}
	n := uint64(1 + len(warps) + w.qps)
	// The source reduces the records it got back (one per distinct rank
	// of each token) after the barrier (combine_reduce_epilogue).
	var back int64
	for d := range R {
		back += int64(st.RankTokens[r][d])
	}
	reduce := sim.Bytes(back * int64(crec))
	w.launchBarrier(g, r, "combine", 32*w.cw, n, 2, func(t *gpu.Group) {
		t.Compute(e.P.ReduceRate.TxTime(reduce))
		e.ReceiverDone(r, e.LastOf(r))
	})
	w.flushers(g, r, "combine", n)
	k := newKernel(g, "combine", w.sync[r], n, 1)
	for _, wp := range warps {
		k.launch(newCombWarp(w, r, wp.sm, wp.wi, wp.recs), "w", wp.wi)
	}
}
