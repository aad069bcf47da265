package gpumicro

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/lsa"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/internal/pos"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Measurement is one line of gpumicro.cu's output: the median time of one
// operation over Reps runs.
type Measurement struct {
	Name   string  `json:"name"`
	NS     float64 `json:"ns"`
	Cycles float64 `json:"cycles"`
	Reps   int     `json:"reps"`
	Note   string  `json:"note"`
}

// Device is the output's device line.
type Device struct {
	GPU        string  `json:"gpu"`
	SMs        int     `json:"sms"`
	L2Bytes    int64   `json:"l2_bytes"`
	SMClockGHz float64 `json:"sm_clock_ghz"`
}

// Run is one parsed output file.
type Run struct {
	Device       Device
	Measurements []Measurement
}

// ParseError names the file, line and field of a bad input line.
type ParseError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// Error formats the position, field and message.
func (e *ParseError) Error() string { return pos.Format(e.File, e.Line, 0, e.Field, e.Msg) }

// maxLine bounds one input line.
const maxLine = 1 << 16

// Parse reads gpumicro.cu's JSON Lines from r; file names the input in
// errors. Blank lines are skipped; a name may appear once.
func Parse(r io.Reader, file string) (*Run, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	run := &Run{}
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, &ParseError{File: file, Line: line, Msg: "not a JSON object: " + err.Error()}
		}
		var name string
		if err := json.Unmarshal(raw["name"], &name); err != nil || name == "" {
			return nil, &ParseError{File: file, Line: line, Field: "name", Msg: "missing or not a string"}
		}
		if name == "device" {
			dec := json.NewDecoder(bytes.NewReader(b))
			if err := dec.Decode(&run.Device); err != nil {
				return nil, &ParseError{File: file, Line: line, Msg: "device line: " + err.Error()}
			}
			continue
		}
		if l, ok := seen[name]; ok {
			return nil, &ParseError{File: file, Line: line, Field: "name", Msg: fmt.Sprintf("%q already on line %d", name, l)}
		}
		seen[name] = line
		var m Measurement
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, &ParseError{File: file, Line: line, Msg: err.Error()}
		}
		switch {
		case math.IsNaN(m.NS) || math.IsInf(m.NS, 0) || m.NS <= 0:
			return nil, &ParseError{File: file, Line: line, Field: "ns", Msg: fmt.Sprintf("%v is not a positive time", m.NS)}
		case m.Reps < 1:
			return nil, &ParseError{File: file, Line: line, Field: "reps", Msg: fmt.Sprintf("%d, want >= 1", m.Reps)}
		}
		run.Measurements = append(run.Measurements, m)
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{File: file, Line: line + 1, Msg: err.Error()}
	}
	if len(run.Measurements) == 0 {
		return nil, &ParseError{File: file, Line: line, Msg: "no measurements"}
	}
	return run, nil
}

//go:embed measured/*.jsonl
var measured embed.FS

// Measured returns a committed measurement file by name (e.g.
// "h200-2026-12-01.jsonl") and the names available.
func Measured(name string) (*Run, []string, error) {
	ents, _ := measured.ReadDir("measured")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	b, err := measured.ReadFile("measured/" + name)
	if err != nil {
		return nil, names, fmt.Errorf("gpumicro: no measurement %q (have %s)", name, strings.Join(names, ", "))
	}
	r, err := Parse(bytes.NewReader(b), name)
	return r, names, err
}

// Committed returns every committed run with its file name, in name order.
func Committed() ([]string, []*Run, error) {
	ents, err := measured.ReadDir("measured")
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var runs []*Run
	for _, e := range ents {
		n := e.Name()
		names = append(names, n)
		r, _, err := Measured(n)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, r)
	}
	return names, runs, nil
}

// Spread is one measurement over several runs.
type Spread struct {
	Name             string
	Runs             int     // how many runs have it
	Median, Min, Max float64 // ns
	Model            float64 // ns; 0 when the model has no such case
	What             string
}

// ErrPct is (model − median) / median in percent, or NaN.
func (s Spread) ErrPct() float64 { return Row{Hardware: s.Median, Model: s.Model}.ErrPct() }

// Spreads lines up several runs with the model: every measurement any run
// has, in the order of first appearance, with the median and the range.
func Spreads(runs []*Run, model map[string]sim.Duration) []Spread {
	what := map[string]string{}
	for _, c := range Cases() {
		what[c.Name] = c.What
	}
	vals := map[string][]float64{}
	var order []string
	for _, r := range runs {
		for _, m := range r.Measurements {
			if _, ok := vals[m.Name]; !ok {
				order = append(order, m.Name)
			}
			vals[m.Name] = append(vals[m.Name], m.NS)
		}
	}
	out := make([]Spread, 0, len(order))
	for _, n := range order {
		v := slices.Clone(vals[n])
		slices.Sort(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		s := Spread{Name: n, Runs: len(v), Median: med, Min: v[0], Max: v[len(v)-1], What: what[n]}
		if d, ok := model[n]; ok {
			s.Model = d.Ns()
		}
		out = append(out, s)
	}
	return out
}

// Case is one measurement the model can make: what gpumicro.cu's line of
// the same name measures, done with the model's operations.
type Case struct {
	Name string
	// What says which model operations stand for the CUDA code.
	What string
	run  func(e *env) sim.Duration
}

// twoGPUs reports whether the case needs GPU 0's NVLink peer: the peer_
// and nccl_ rows.
func (c Case) twoGPUs() bool {
	return strings.HasPrefix(c.Name, "peer_") || strings.HasPrefix(c.Name, "nccl_")
}

// env is a one-node machine of the profile: GPU 0 (g) acts, GPU 1 (peer)
// is its NVLink peer.
type env struct {
	s      *sim.Sim
	g      *gpu.GPU
	local  *mem.Region // GPU 0's HBM
	host   *mem.Region
	peer   *gpu.GPU
	remote *mem.Region // GPU 1's HBM
	ranks  []*gin.Rank // the two GPUs as ranks of an NCCL communicator (peer cases)
	px     proxy.Config
}

// Cases lists the measurements the model makes, in gpumicro.cu's order.
func Cases() []Case {
	once := func(op func(e *env, t *gpu.Group)) func(e *env) sim.Duration {
		return func(e *env) sim.Duration {
			var d sim.Duration
			e.g.Launch("m", 1, func(t *gpu.Group) {
				t0 := t.Now()
				op(e, t)
				d = t.Now().Sub(t0)
			})
			e.run()
			return d
		}
	}
	// loop is once over loopN back-to-back repetitions, per repetition:
	// what the CUDA loops measure (a fence waits for the previous
	// iteration's store, for one).
	loop := func(op func(e *env, t *gpu.Group)) func(e *env) sim.Duration {
		return func(e *env) sim.Duration {
			return once(func(e *env, t *gpu.Group) {
				for range loopN {
					op(e, t)
				}
			})(e) / loopN
		}
	}
	return []Case{
		{"l2_load", "Group.Load64 of local HBM (an L2 hit)", once(func(e *env, t *gpu.Group) { t.Load64(e.local, 0) })},
		{"hbm_load", "Group.Read of 8 bytes of local HBM (an L2 miss)", once(func(e *env, t *gpu.Group) {
			var b [8]byte
			t.Read(e.local, 0, b[:])
		})},
		{"hbm_load_256m", "Group.Read of 8 bytes of local HBM (an L2 miss)", once(func(e *env, t *gpu.Group) {
			var b [8]byte
			t.Read(e.local, 0, b[:])
		})},
		{"host_load", "Group.Load64 of pinned host memory (a PCIe read round trip)", once(func(e *env, t *gpu.Group) { t.Load64(e.host, 0) })},
		{"atomic_gpu", "Group.AtomicAdd64, device scope, local HBM", once(func(e *env, t *gpu.Group) { t.AtomicAdd64(e.local, 0, 1, gpu.ScopeDevice) })},
		{"atomic_block", "Group.AtomicAdd64, block scope, local HBM", once(func(e *env, t *gpu.Group) { t.AtomicAdd64(e.local, 0, 1, gpu.ScopeBlock) })},
		{"atomic_sys", "Group.AtomicAdd64, system scope, local HBM", once(func(e *env, t *gpu.Group) { t.AtomicAdd64(e.local, 0, 1, gpu.ScopeSystem) })},
		{"atomic_gpu_spread", "Group.AtomicAdd64, device scope (the model charges every word the mix of both L2 partitions)", once(func(e *env, t *gpu.Group) { t.AtomicAdd64(e.local, 64, 1, gpu.ScopeDevice) })},
		{"store_fence_gpu", "Store64 + Fence(device), in a loop", loop(func(e *env, t *gpu.Group) {
			t.Store64(e.local, 8, 1)
			t.Fence(gpu.ScopeDevice)
		})},
		{"fence_gpu_idle", "Fence(device) with nothing outstanding, in a loop", loop(func(e *env, t *gpu.Group) { t.Fence(gpu.ScopeDevice) })},
		{"store_fence_sys", "Store64 + Fence(system), in a loop", loop(func(e *env, t *gpu.Group) {
			t.Store64(e.local, 8, 1)
			t.Fence(gpu.ScopeSystem)
		})},
		{"store_release_gpu", "Fence(device) + Store64 (how the model writes st.release.gpu), in a loop", loop(func(e *env, t *gpu.Group) {
			t.Fence(gpu.ScopeDevice)
			t.Store64(e.local, 8, 1)
		})},
		{"poll_acquire_gpu", "Config.PollInterval (the period of WaitWord on local HBM)", func(e *env) sim.Duration { return e.g.Config().PollInterval }},
		{"sm_to_sm_flag", "two groups bounce a counter: Fence(device) + Store64, WaitWord; half the round trip", flagPingPong(true)},
		{"sm_to_sm_flag_relaxed", "the same with plain Store64", flagPingPong(false)},
		{"gpu_cpu_roundtrip", "GPU Fence(system) + Store64 to host memory; a CPU loop polling every proxy SlotCheckCost sees it (GFDLineCost for the missed line) and stores back; GPU WaitWord over PCIe", hostPingPong},
		{"sm_read_kib", "Group.Read of 1 MiB of local HBM by 1024 threads, per KiB", stream(1024, true, false)},
		{"sm_write_kib", "Group.Write of 1 MiB to local HBM by 1024 threads, per KiB", stream(1024, false, true)},
		{"sm_copy_kib", "Group.Read then Group.Write of 1 MiB by 1024 threads, per KiB", stream(1024, true, true)},
		{"warp_read_kib", "Group.Read of 1 MiB by 32 threads, per KiB", stream(32, true, false)},
		{"warp_write_kib", "Group.Write of 1 MiB by 32 threads, per KiB", stream(32, false, true)},
		{"warp_copy_kib", "Group.Read then Group.Write of 1 MiB by 32 threads, per KiB", stream(32, true, true)},
		{"wt_store_issue", "Group.WriteWT of 16 bytes to host memory (issue time), in a loop", loop(func(e *env, t *gpu.Group) { t.WriteWT(e.host, 64, nil, 16) })},
		{"pcie_h2d_mib", "pcie.Tree.Read of 1 GiB of host memory by the GPU, per MiB", pcieCopy(true, false)},
		{"pcie_d2h_mib", "pcie.Tree.Write of 1 GiB from the GPU to host memory, per MiB", pcieCopy(false, true)},
		{"pcie_bidir_mib", "both at once, per MiB each way", pcieCopy(true, true)},
		{"peer_load", "Group.Load64 of the peer GPU's HBM (an NVLink read served at its L2)", once(func(e *env, t *gpu.Group) { t.Load64(e.remote, 0) })},
		{"peer_atomic_gpu", "Group.AtomicAdd64 on a word of the peer GPU", once(func(e *env, t *gpu.Group) { t.AtomicAdd64(e.remote, 0, 1, gpu.ScopeDevice) })},
		{"peer_atomic_sys", "Group.AtomicAdd64 on a word of the peer GPU", once(func(e *env, t *gpu.Group) { t.AtomicAdd64(e.remote, 0, 1, gpu.ScopeSystem) })},
		{"red_issue", "Group.Red64 on a local word, back to back", loop(func(e *env, t *gpu.Group) { t.Red64(e.local, 0, 1, gpu.ScopeSystem) })},
		{"peer_red_issue", "Group.Red64 on a word of the peer GPU, back to back", loop(func(e *env, t *gpu.Group) { t.Red64(e.remote, 0, 1, gpu.ScopeSystem) })},
		{"peer_red_drain", "the same and a final Fence(system), per red", func(e *env) sim.Duration {
			return once(func(e *env, t *gpu.Group) {
				for range loopN {
					t.Red64(e.remote, 0, 1, gpu.ScopeSystem)
				}
				t.Fence(gpu.ScopeSystem)
			})(e) / loopN
		}},
		{"peer_store_fence_sys", "Store64 to the peer + Fence(system), in a loop", loop(func(e *env, t *gpu.Group) {
			t.Store64(e.remote, 8, 1)
			t.Fence(gpu.ScopeSystem)
		})},
		{"peer_store_release_sys", "Fence(system) + Store64 to the peer (how the model writes st.release.sys), in a loop", loop(func(e *env, t *gpu.Group) {
			t.Fence(gpu.ScopeSystem)
			t.Store64(e.remote, 8, 1)
		})},
		{"peer_flag", "a group on each GPU bounces a counter: Fence(system) + Store64 into the other's HBM, WaitWord on its own; half the round trip", peerPing(true, 0)},
		{"peer_flag_fence", "the same as peer_flag (the model's release store is a fence and a store)", peerPing(true, 0)},
		{"peer_flag_relaxed", "the same with plain Store64", peerPing(false, 0)},
		{"peer_put_1k", "a warp on each GPU bounces a message: Write of 1 KiB into the other's HBM, Fence(system), Store64 of the flag; WaitWord; half the round trip", peerPing(true, 1024)},
		{"peer_put_7k", "the same with 7 KiB", peerPing(true, 7168)},
		{"peer_put_14k", "the same with 14 KiB", peerPing(true, 14336)},
		{"peer_put_64k", "the same with 64 KiB", peerPing(true, 65536)},
		{"peer_sm_read_kib", "Group.Read of 1 MiB of the peer's HBM by 1024 threads, per KiB", peerStream(1024, true)},
		{"peer_sm_write_kib", "Group.Write of 1 MiB into the peer's HBM by 1024 threads, per KiB", peerStream(1024, false)},
		{"peer_warp_read_kib", "Group.Read of 1 MiB of the peer's HBM by 32 threads, per KiB", peerStream(32, true)},
		{"peer_warp_write_kib", "Group.Write of 1 MiB into the peer's HBM by 32 threads, per KiB", peerStream(32, false)},
		{"peer_all_write_mib", "one 1024-thread group per SM writes its share of 256 MiB into the peer, per MiB", peerAll(false, false)},
		{"peer_all_read_mib", "one 1024-thread group per SM reads its share of 256 MiB of the peer, per MiB", peerAll(true, false)},
		{"peer_all_write_bidir_mib", "both GPUs at once, each as peer_all_write_mib, per MiB each way", peerAll(false, true)},
		{"peer_sms1_write_mib", "one 1024-thread group writes 256 MiB into the peer, per MiB", peerSMs(1)},
		{"peer_sms2_write_mib", "the same by 2 groups on 2 SMs", peerSMs(2)},
		{"peer_sms4_write_mib", "the same by 4 groups", peerSMs(4)},
		{"peer_sms8_write_mib", "the same by 8 groups", peerSMs(8)},
		{"peer_sms16_write_mib", "the same by 16 groups", peerSMs(16)},
		{"peer_sms32_write_mib", "the same by 32 groups", peerSMs(32)},
		{"nccl_lsa_barrier_relaxed", "gin/lsa Barrier(0).Sync(relaxed) by a 32-thread group on each GPU, in a loop", lsaBarrier(32, gin.OrderRelaxed, 0)},
		{"nccl_lsa_barrier", "gin/lsa Barrier(0).Sync(acq_rel) by a 32-thread group on each GPU, in a loop", lsaBarrier(32, gin.OrderAcqRel, 0)},
		{"nccl_lsa_barrier_cta512", "the same by 512-thread groups", lsaBarrier(512, gin.OrderAcqRel, 0)},
		{"nccl_lsa_put_7k_barrier", "gin/lsa Copy of 7168 B to the peer, then Sync(acq_rel), 32 threads, in a loop", lsaBarrier(32, gin.OrderAcqRel, 7168)},
		{"nccl_lsa_put_64k_barrier", "gin/lsa Copy of 65536 B to the peer, then Sync(acq_rel), 512 threads, in a loop", lsaBarrier(512, gin.OrderAcqRel, 65536)},
	}
}

// lsaBarrier has a group of threads on each of the two GPUs run LSA
// barrier 0 of an NCCL 2.28 device communicator (gin/lsa), after copying
// msg bytes into the peer's window each time when msg > 0, as ncclbar.cu
// does; GPU 0's time per sync.
func lsaBarrier(threads int, ord gin.MemoryOrder, msg sim.Bytes) func(e *env) sim.Duration {
	const warm, iters = 16, 200
	return func(e *env) sim.Duration {
		comm, err := gin.NewComm(e.ranks, gin.CommConfig{Version: gin.V2_28})
		if err != nil {
			panic(fmt.Sprintf("gpumicro: %v", err))
		}
		dc, err := comm.DevCommCreate(gin.Requirements{LSABarrierCount: 1})
		if err != nil {
			panic(fmt.Sprintf("gpumicro: %v", err))
		}
		win, err := comm.WindowRegister("buf", 1<<20, gin.WinDefault, false)
		if err != nil {
			panic(fmt.Sprintf("gpumicro: %v", err))
		}
		var d sim.Duration
		for r := range 2 {
			e.ranks[r].GPU.Launch("bar", threads, func(t *gpu.Group) {
				l := lsa.New(dc, t, r)
				step := func() {
					if msg > 0 {
						l.Copy(1-r, win, 0, nil, msg)
					}
					l.Barrier(0).Sync(ord)
				}
				for range warm {
					step()
				}
				t0 := t.Now()
				for range iters {
					step()
				}
				if r == 0 {
					d = t.Now().Sub(t0) / iters
				}
			})
		}
		e.run()
		return d
	}
}

func (e *env) run() {
	if err := e.s.Run(); err != nil {
		panic(fmt.Sprintf("gpumicro: model run failed: %v", err))
	}
}

// stream is the time per KiB of a group of threads reading and/or writing
// 1 MiB of local HBM in one operation each (gpumicro.cu's kBW streams 256
// MiB per CTA; the model's bulk operations are one latency plus a rate).
func stream(threads int, read, write bool) func(e *env) sim.Duration {
	return streamIn(false, threads, read, write)
}

// peerStream is stream over the peer's HBM: per KiB of 1 MiB read or
// written (and, for writes, acknowledged: Fence(system)).
func peerStream(threads int, read bool) func(e *env) sim.Duration {
	return streamIn(true, threads, read, !read)
}

func streamIn(onPeer bool, threads int, read, write bool) func(e *env) sim.Duration {
	const n = 1 << 20
	return func(e *env) sim.Duration {
		g, fence := e.g, gpu.ScopeDevice
		if onPeer {
			g, fence = e.peer, gpu.ScopeSystem
		}
		buf := g.Alloc("stream", n, false)
		var d sim.Duration
		e.g.Launch("bw", threads, func(t *gpu.Group) {
			t0 := t.Now()
			if read {
				t.Read(buf, 0, make([]byte, n))
			}
			if write {
				t.Write(buf, 0, nil, n)
				t.Fence(fence)
			}
			d = t.Now().Sub(t0)
		})
		e.run()
		return d / (n / 1024)
	}
}

// pingRounds is the number of round trips the model's ping-pongs run;
// loopN the repetitions of a loop case.
const (
	pingRounds = 400
	loopN      = 64
)

func flagPingPong(release bool) func(e *env) sim.Duration {
	return func(e *env) sim.Duration {
		a, b := e.local, e.g.Alloc("flag-b", 64, true)
		var start, end sim.Time
		store := func(t *gpu.Group, r *mem.Region, v uint64) {
			if release {
				t.Fence(gpu.ScopeDevice)
			}
			t.Store64(r, 0, v)
		}
		e.g.Launch("ping", 1, func(t *gpu.Group) {
			start = t.Now()
			for i := uint64(1); i <= pingRounds; i++ {
				store(t, a, i)
				t.WaitWord(b, 0, "pong", func(v uint64) bool { return v == i })
			}
			end = t.Now()
		})
		e.g.Launch("pong", 1, func(t *gpu.Group) {
			for i := uint64(1); i <= pingRounds; i++ {
				t.WaitWord(a, 0, "ping", func(v uint64) bool { return v == i })
				store(t, b, i)
			}
		})
		e.run()
		return end.Sub(start) / (2 * pingRounds)
	}
}

// pcieCopy moves 1 GiB between the GPU and host memory across the GPU's
// PCIe port in 1 MiB DMA operations, read (host to GPU), write (GPU to
// host) or both at once, as copy engines would; per MiB, until the last
// byte is there.
func pcieCopy(h2d, d2h bool) func(e *env) sim.Duration {
	const total, chunk = 1 << 30, 1 << 20
	return func(e *env) sim.Duration {
		bus, dev := e.g.Bus(), e.g.Dev()
		var last sim.Time
		for off := 0; off < total; off += chunk {
			if h2d {
				last = max(last, bus.Read(0, dev, bus.Host(), chunk))
			}
			if d2h {
				last = max(last, bus.Write(0, dev, bus.Host(), chunk))
			}
		}
		return last.Sub(0) / (total / chunk)
	}
}

// peerPing bounces a counter between a group on GPU 0 and one on GPU 1,
// each storing into the other's HBM (after msg bytes of data written by a
// warp, when msg > 0) and polling its own: half the round trip.
func peerPing(release bool, msg sim.Bytes) func(e *env) sim.Duration {
	return func(e *env) sim.Duration {
		mine := map[*gpu.GPU]*mem.Region{e.g: e.local, e.peer: e.remote}
		other := map[*gpu.GPU]*mem.Region{e.g: e.remote, e.peer: e.local}
		data := map[*gpu.GPU]*mem.Region{}
		if msg > 0 {
			data[e.g] = e.peer.Alloc("msg", msg, false)
			data[e.peer] = e.g.Alloc("msg", msg, false)
		}
		var start, end sim.Time
		side := func(g *gpu.GPU, first bool) {
			threads := 1
			if msg > 0 {
				threads = 32
			}
			g.Launch("ping", threads, func(t *gpu.Group) {
				start = t.Now()
				for i := uint64(1); i <= pingRounds; i++ {
					if !first {
						t.WaitWord(mine[g], 0, "ping", func(v uint64) bool { return v == i })
					}
					if msg > 0 {
						t.Write(data[g], 0, nil, msg)
					}
					if release {
						t.Fence(gpu.ScopeSystem)
					}
					t.Store64(other[g], 0, i)
					if first {
						t.WaitWord(mine[g], 0, "pong", func(v uint64) bool { return v == i })
					}
				}
				if first {
					end = t.Now()
				}
			})
		}
		side(e.peer, false)
		side(e.g, true)
		e.run()
		return end.Sub(start) / (2 * pingRounds)
	}
}

// peerAll has one 1024-thread group per SM of GPU 0 (and of GPU 1 when
// both) move its share of 256 MiB to or from the other GPU in 1 MiB
// operations; per MiB, until the last byte is there.
func peerAll(read, both bool) func(e *env) sim.Duration { return peerMove(read, both, 0) }

// peerSMs is peerAll's write on k SMs of GPU 0 only.
func peerSMs(k int) func(e *env) sim.Duration { return peerMove(false, false, k) }

// peerMove is peerAll on sms SMs (0: all of them).
func peerMove(read, both bool, sms int) func(e *env) sim.Duration {
	const total, chunk = 256 << 20, 1 << 20
	return func(e *env) sim.Duration {
		var last sim.Time
		launch := func(g *gpu.GPU, target *gpu.GPU) {
			buf := target.Alloc("all", total, false)
			k := sms
			if k == 0 {
				k = g.Config().SMs
			}
			for sm := range k {
				g.Launch("all", 1024, func(t *gpu.Group) {
					for off := sm * chunk; off < total; off += k * chunk {
						if read {
							t.Read(buf, uint64(off), make([]byte, chunk))
							last = max(last, t.Now())
						} else {
							last = max(last, t.Write(buf, uint64(off), nil, chunk))
						}
					}
				})
			}
		}
		launch(e.g, e.peer)
		if both {
			launch(e.peer, e.g)
		}
		e.run()
		return last.Sub(0) / (total / chunk)
	}
}

func hostPingPong(e *env) sim.Duration {
	g2c, c2g := e.host, e.g.AllocHost("c2g", 64, true)
	var start, end sim.Time
	e.g.Launch("gpu", 1, func(t *gpu.Group) {
		start = t.Now()
		for i := uint64(1); i <= pingRounds; i++ {
			t.Fence(gpu.ScopeSystem)
			t.Store64(g2c, 0, i)
			t.WaitWord(c2g, 0, "cpu reply", func(v uint64) bool { return v == i })
		}
		end = t.Now()
	})
	e.s.Spawn("cpu", func(p *sim.Proc) {
		for i := uint64(1); i <= pingRounds; i++ {
			for g2c.Load64(0) != i {
				p.Sleep(e.px.SlotCheckCost)
			}
			p.Sleep(e.px.GFDLineCost) // the line the GPU wrote is a miss
			c2g.Store64(0, i, "cpu")
		}
	})
	e.run()
	return end.Sub(start) / pingRounds
}

// Model runs every case on a one-node machine of the cluster preset or
// file spec (its hardware profile is what is measured; GPU 1 is GPU 0's
// NVLink peer, and a node of one GPU has no peer cases) and returns the
// model's time per case name.
func Model(spec machine.Spec) (map[string]sim.Duration, error) {
	out := map[string]sim.Duration{}
	for _, c := range Cases() {
		s := sim.New(sim.Config{Seed: 1})
		m, err := machine.Build(s, spec, 1)
		if err != nil {
			return nil, fmt.Errorf("gpumicro: %w", err)
		}
		g := m.GPUs[0]
		e := &env{s: s, g: g, local: g.Alloc("local", 4096, true), host: g.AllocHost("host", 4096, true), px: proxy.DefaultConfig()}
		if c.twoGPUs() {
			if len(m.GPUs) < 2 {
				continue // no NVLink peer in a one-GPU node
			}
			e.peer, e.ranks = m.GPUs[1], m.Ranks[:2]
			e.remote = e.peer.Alloc("remote", 4096, true)
		}
		out[c.Name] = c.run(e)
	}
	return out, nil
}

// Row is one line of a comparison.
type Row struct {
	Name     string
	Hardware float64 // ns; 0 when the file has no such line
	Model    float64 // ns; 0 when the model has no such case
	What     string
	Note     string
}

// ErrPct is (model − hardware) / hardware in percent, or NaN when either
// is missing.
func (r Row) ErrPct() float64 {
	if r.Hardware == 0 || r.Model == 0 {
		return math.NaN()
	}
	return 100 * (r.Model - r.Hardware) / r.Hardware
}

// Compare lines up a hardware run with the model's values: every hardware
// line in its order, then model cases the file lacks.
func Compare(hw *Run, model map[string]sim.Duration) []Row {
	what := map[string]string{}
	for _, c := range Cases() {
		what[c.Name] = c.What
	}
	var rows []Row
	done := map[string]bool{}
	for _, m := range hw.Measurements {
		r := Row{Name: m.Name, Hardware: m.NS, What: what[m.Name], Note: m.Note}
		if d, ok := model[m.Name]; ok {
			r.Model = d.Ns()
		}
		rows = append(rows, r)
		done[m.Name] = true
	}
	for _, c := range Cases() {
		if !done[c.Name] {
			rows = append(rows, Row{Name: c.Name, Model: model[c.Name].Ns(), What: c.What})
		}
	}
	return rows
}
