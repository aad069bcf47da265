package ncclbase

import (
	"strings"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNCCLConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"steps", func(c *Config) { c.Steps = 0 }, "Steps"},
		{"cts slots", func(c *Config) { c.CTSSlots = 4 }, "CTSSlots"},
		{"chunk", func(c *Config) { c.NetChunk = 16 }, "chunks"},
		{"threads", func(c *Config) { c.OpThreads = 2048 }, "OpThreads"},
		{"cts bytes", func(c *Config) { c.CTSBytes = 8 }, "CTSBytes"},
		{"idle pass", func(c *Config) { c.OpCheck, c.YieldCost = 0, 0 }, "idle"},
		{"ll line check", func(c *Config) { c.LLLineCheck = -1 }, "LLLineCheck"},
		{"ll threshold", func(c *Config) { c.P2PLLThreshold = -1 }, "P2PLLThreshold"},
		{"ll buffers", func(c *Config) { c.LLBuffSize = 64 }, "LLBuffSize"},
		{"pxn level", func(c *Config) { c.PXNLevel = 3 }, "PXNLevel"},
		{"max recvs", func(c *Config) { c.MaxRecvs = 0 }, "MaxRecvs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.mod(&cfg)
			err := cfg.Validate()
			if c.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, c.want)
			}
		})
	}
}

// phases is what one step reports of its two phases.
type phases struct{ Dispatch, Combine workload.PhaseReport }

// ncclRunResult is one step replayed by ncclRun.
type ncclRunResult struct {
	e   *workload.Env
	w   *Workload
	rep phases
}

// ncclRun replays the first step of tr on h100-ib with the NCCL workload
// configured by cfg, as runStep does, keeping the machine for inspection;
// before, when set, runs once the machine is built, after at the end of
// each phase with its name.
func ncclRun(t *testing.T, tr *traces.Trace, nvlink bool, cfg Config, before func(r *ncclRunResult),
	after func(r *ncclRunResult, phase string)) *ncclRunResult {
	t.Helper()
	spec, ok := machine.Preset("h100-ib")
	require.True(t, ok)
	nodes, err := spec.NodesFor(tr.EP())
	require.NoError(t, err)
	sp := firstStep(tr)
	st, err := workload.NewStep(tr, sp[0], sp[1])
	require.NoError(t, err)
	w := sim.NewWorld(sim.Config{Seed: 1}, nodes, machine.Lookahead(spec, nodes))
	w.SetSequential(true)
	m, err := machine.BuildWorld(w, spec, nodes, nil)
	require.NoError(t, err)
	h := tr.Header()
	hidden := h.Model.Hidden
	if mod, err := traces.ModelByName(h.Model.Name); err == nil && mod.Hidden == hidden {
		hidden = mod.DeepEPHidden()
	}
	e := workload.NewEnv(w, m, st, workload.Config{Backend: workload.BackendNCCL, NVLink: nvlink}, workload.DefaultParams(), h, hidden)
	r := &ncclRunResult{e: e, w: &Workload{e: e, cfg: cfg}}
	if before != nil {
		before(r)
	}
	require.NoError(t, r.w.Setup())
	r.w.Dispatch()
	require.NoError(t, e.Run())
	if after != nil {
		after(r, "dispatch")
	}
	r.w.Combine()
	require.NoError(t, e.Run())
	if after != nil {
		after(r, "combine")
	}
	r.rep = phases{Dispatch: e.Result(&e.Disp), Combine: e.Result(&e.Comb)}
	return r
}

// railTally counts, from taps on every NIC port, the packets and payload
// bytes each NIC sent to each other NIC, indexed by the ranks owning them.
type railTally struct {
	pkts    [][]int64
	payload [][]int64
}

func newRailTally(e *workload.Env) *railTally {
	ep := e.Step.EP
	rt := &railTally{pkts: make([][]int64, ep), payload: make([][]int64, ep)}
	for i := range ep {
		rt.pkts[i], rt.payload[i] = make([]int64, ep), make([]int64, ep)
	}
	rank := make([]int, len(e.M.NICs))
	for r, rk := range e.M.Ranks {
		for _, n := range rk.NICs {
			rank[n.Endpoint()] = r
		}
	}
	for _, n := range e.M.NICs {
		id := n.Endpoint()
		e.M.Net.TapEndpoint(id, int(id), func(iface int, _ sim.Time, p *fabric.Packet) {
			if fabric.EndpointID(iface) != p.Src {
				return // the receive side of the same packet
			}
			a, b := rank[p.Src], rank[p.Dst]
			rt.pkts[a][b]++
			rt.payload[a][b] += int64(p.PayloadLen)
		})
	}
	return rt
}

// snapshot returns a copy of the counts so far.
func (rt *railTally) snapshot() *railTally {
	c := &railTally{}
	for i := range rt.pkts {
		c.pkts = append(c.pkts, append([]int64(nil), rt.pkts[i]...))
		c.payload = append(c.payload, append([]int64(nil), rt.payload[i]...))
	}
	return c
}

// minus returns rt - o.
func (rt *railTally) minus(o *railTally) *railTally {
	c := rt.snapshot()
	for i := range c.pkts {
		for j := range c.pkts[i] {
			c.pkts[i][j] -= o.pkts[i][j]
			c.payload[i][j] -= o.payload[i][j]
		}
	}
	return c
}

// spinePackets sums the packets every port into or out of a spine carried.
func spinePackets(e *workload.Env) int64 {
	spine := map[fabric.NodeID]bool{}
	for _, s := range e.M.Topo.Spines() {
		spine[s] = true
	}
	var n int64
	for p := range e.M.Net.Ports() {
		from, to := e.M.Net.PortEnds(fabric.PortID(p))
		if spine[from] || spine[to] {
			n += int64(e.M.Net.PortStats(fabric.PortID(p)).Packets)
		}
	}
	return n
}

// nvlinkIn is the wire bytes each GPU's NVLink ingress port carried, by
// world rank.
func nvlinkIn(e *workload.Env) []int64 {
	var in []int64
	for _, d := range e.M.NVLink {
		st := d.Stats()
		for g := 0; g < len(st); g += 2 {
			in = append(in, int64(st[g+1].Bytes))
		}
	}
	return in
}

// ncclPhaseCounts is what one phase of a replay put on the NICs, the
// spines and the NVLink ingress ports.
type ncclPhaseCounts struct {
	nic   *railTally
	spine int64
	nvlIn []int64
}

// ncclCountedRun replays with taps and returns per-phase counts.
func ncclCountedRun(t *testing.T, tr *traces.Trace, nvlink bool, cfg Config) (*ncclRunResult, map[string]ncclPhaseCounts) {
	var tally, prev *railTally
	var spine0 int64
	var nvl0 []int64
	out := map[string]ncclPhaseCounts{}
	r := ncclRun(t, tr, nvlink, cfg, func(r *ncclRunResult) {
		tally = newRailTally(r.e)
		prev = tally.snapshot()
		nvl0 = nvlinkIn(r.e)
	}, func(r *ncclRunResult, phase string) {
		sp, in := spinePackets(r.e), nvlinkIn(r.e)
		pc := ncclPhaseCounts{nic: tally.minus(prev), spine: sp - spine0, nvlIn: make([]int64, len(in))}
		for g := range in {
			pc.nvlIn[g] = in[g] - nvl0[g]
		}
		out[phase] = pc
		prev, spine0, nvl0 = tally.snapshot(), sp, in
	})
	return r, out
}

// TestNCCLPXNStaysOnRails replays EP16 (two nodes of the rail-optimised
// h100-ib cluster) with --nvlink, with NCCL's default PXN and with
// NCCL_P2P_PXN_LEVEL=0. The intermediate of s -> d is worked out here from
// the topology alone: the GPU of s's node with d's local index. With PXN
// every all-to-all packet goes between NICs of one rail (only the counts
// ring's node-boundary hops, n0g7 -> n1g0 and n1g7 -> n0g0, cross rails,
// and every spine crossing is theirs); each intermediate's NIC sends its
// rail's whole share of data to each destination; the NVLink ingress of
// each intermediate grows by exactly what its local peers sent through it
// (plus NVLink packet headers); and the payload totals are those without
// PXN. Without PXN cross-rail all-to-all traffic crosses the spine, which
// the same checks see.
func TestNCCLPXNStaysOnRails(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 8)
	sel := replaytest.A2AMatrix(t, tr)
	tok, comb, _ := replaytest.A2ASizes(t, tr)
	const G = 8
	ep := tr.EP()
	node, local := func(r int) int { return r / G }, func(r int) int { return r % G }
	ringHop := func(a, b int) bool {
		return node(a) != node(b) && (b == (a+1)%ep || a == (b+1)%ep)
	}
	bytes := map[string]func(s, d int) int64{
		"dispatch": func(s, d int) int64 { return sel[s][d] * tok },
		"combine":  func(s, d int) int64 { return sel[d][s] * comb },
	}
	pxnRun, pxn := ncclCountedRun(t, tr, true, DefaultConfig())
	off := DefaultConfig()
	off.PXNLevel = 0
	plainRun, plain := ncclCountedRun(t, tr, true, off)

	var crossPlain int64
	for _, phase := range []string{"dispatch", "combine"} {
		pc, pl := pxn[phase], plain[phase]
		// What each NIC must send: the rail share of its node.
		want := make([][]int64, ep)
		thru := make([]int64, ep) // bytes local peers copy into each intermediate
		for p := range ep {
			want[p] = make([]int64, ep)
		}
		for s := range ep {
			for d := range ep {
				if node(s) == node(d) {
					continue
				}
				p := node(s)*G + local(d)
				want[p][d] += bytes[phase](s, d)
				if p != s {
					thru[p] += bytes[phase](s, d)
				}
			}
		}
		var cross int64
		for a := range ep {
			for b := range ep {
				n := pc.nic.pkts[a][b]
				if local(a) != local(b) && node(a) != node(b) {
					cross += n
					if !ringHop(a, b) {
						assert.Zero(t, n, "%s: NIC of rank %d sent %d packets to rank %d's, another rail", phase, a, n, b)
					}
					if pl.nic.pkts[a][b] > 0 && !ringHop(a, b) {
						crossPlain += pl.nic.pkts[a][b]
					}
					continue
				}
				if node(a) == node(b) || want[a][b] == 0 {
					continue
				}
				// Data plus the sizes records of multi-sends and the
				// CTS elements of the reverse direction's receives.
				got := pc.nic.payload[a][b]
				assert.GreaterOrEqual(t, got, want[a][b], "%s: NIC %d -> %d", phase, a, b)
				assert.LessOrEqual(t, got, want[a][b]+want[a][b]/100+4096, "%s: NIC %d -> %d", phase, a, b)
			}
		}
		assert.Equal(t, 2*cross, pc.spine, "%s: every spine crossing is a cross-rail ring packet, up and down", phase)
		if phase == "combine" {
			assert.Zero(t, pc.spine, "combine has no ring")
		}
		// NVLink: the intermediates' ingress grows by the PXN copies and
		// their packet headers (one per MaxPayload bytes, one more per
		// copy at most).
		nc := pxnRun.e.M.NVLink[0].Config()
		m, o := int64(nc.MaxPayload), int64(nc.PacketOverhead)
		for g := range ep {
			delta := pc.nvlIn[g] - pl.nvlIn[g]
			assert.GreaterOrEqual(t, delta, thru[g]+thru[g]/m*o, "%s: NVLink into GPU %d", phase, g)
			assert.LessOrEqual(t, delta, thru[g]+thru[g]/m*o+64*o, "%s: NVLink into GPU %d", phase, g)
			if local(g) != 0 || node(g) != 0 {
				continue
			}
			assert.Positive(t, thru[g], "GPU %d is an intermediate", g)
		}
	}
	assert.Positive(t, crossPlain, "without PXN the cross-rail all-to-all traffic crosses rails")
	assert.Greater(t, plain["combine"].spine, int64(0), "without PXN the spine carries combine traffic")
	// Conservation: the same payload and data messages either way.
	for _, ph := range [][2]workload.PhaseReport{{pxnRun.rep.Dispatch, plainRun.rep.Dispatch}, {pxnRun.rep.Combine, plainRun.rep.Combine}} {
		assert.Equal(t, ph[1].RDMABytes, ph[0].RDMABytes)
		assert.Equal(t, ph[1].Messages, ph[0].Messages)
		assert.Equal(t, ph[1].BandwidthBytes, ph[0].BandwidthBytes)
	}
}

// TestNCCLPXNConnections checks the connection structure PXN builds at
// EP16 with --nvlink: every remote send whose destination has another
// local index is proxied by the local GPU with that index (from its
// buffers in that GPU's HBM, through its NIC), all senders of a node to
// one destination and channel share one IB connection whose receives form
// one group, and without --nvlink every rank proxies its own sends.
func TestNCCLPXNConnections(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 8)
	const G = 8
	for _, nvlink := range []bool{false, true} {
		ncclRun(t, tr, nvlink, DefaultConfig(), nil, func(r *ncclRunResult, phase string) {
			if phase != "combine" {
				return
			}
			w := r.w
			comms := map[*ncclNetComm]map[int]bool{}
			for _, c := range w.a2a {
				if !c.net {
					assert.True(t, nvlink)
					assert.Equal(t, c.src/G, c.dst/G)
					continue
				}
				want := c.src
				if nvlink {
					want = c.src/G*G + c.dst%G
				}
				assert.Equal(t, want, c.proxy, "%d>%d", c.src, c.dst)
				m := c.comm
				assert.Equal(t, c.proxy, m.proxy)
				assert.True(t, strings.HasPrefix(m.sqp.Name(), w.ranks[c.proxy].nics[0].Name()+"/"),
					"the intermediate's NIC sends: %s", m.sqp.Name())
				assert.True(t, strings.HasPrefix(m.rqp.Name(), w.ranks[c.dst].nics[0].Name()+"/"), "receives stay local")
				if comms[m] == nil {
					comms[m] = map[int]bool{}
				}
				comms[m][c.src] = true
			}
			for m, senders := range comms {
				assert.Len(t, m.groups, 1)
				assert.Len(t, m.groups[0].subs, len(senders))
				if !nvlink {
					assert.Len(t, senders, 1)
				}
			}
			if nvlink {
				// Each (destination, channel) of a remote node: one comm
				// for the 8 senders of the other node (those with bytes).
				var most int
				for _, s := range comms {
					most = max(most, len(s))
				}
				assert.Equal(t, G, most)
			}
		})
	}
}

// TestNCCLP2PLL is the protocol choice of addP2pToPlan at the threshold:
// LL exactly when the bytes are at most channels × NCCL_P2P_LL_THRESHOLD
// and the connection has LL buffers.
func TestNCCLP2PLL(t *testing.T) {
	cfg := DefaultConfig()
	withNet := cfg
	withNet.NetP2PLL = true
	for _, c := range []struct {
		cfg   Config
		bytes uint64
		nch   int
		net   bool
		ll    bool
	}{
		{cfg, 1, 1, false, true},
		{cfg, 16383, 1, false, true},
		{cfg, 16384, 1, false, true},
		{cfg, 16385, 1, false, false},
		{cfg, 32768, 2, false, true},
		{cfg, 32769, 2, false, false},
		{cfg, 1, 1, true, false}, // NET p2p connections have no LL buffers by default
		{cfg, 16384, 1, true, false},
		{withNet, 16384, 1, true, true},
		{withNet, 16385, 1, true, false},
	} {
		assert.Equal(t, c.ll, c.cfg.p2pLL(c.bytes, c.nch, c.net), "%d bytes over %d channels, net=%v, netLL=%v",
			c.bytes, c.nch, c.net, c.cfg.NetP2PLL)
	}
	assert.Equal(t, uint64(32<<10), cfg.llChunk(false), "P2P LL step: 64 KiB of lines")
	assert.Equal(t, uint64(16<<10), cfg.llChunk(true), "NET LL step: halved")
}

// TestNCCLBuildLL builds all-to-all connections for per-peer sizes around
// the threshold and checks each connection's protocol, channels and steps.
func TestNCCLBuildLL(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 1)
	cfg := DefaultConfig()
	cfg.NetP2PLL = true
	sizes := []uint64{8, 7392, 16376, 16384, 16392, 40000, 70000}
	for _, nvlink := range []bool{false, true} {
		ncclRun(t, tr, nvlink, cfg, nil, func(r *ncclRunResult, phase string) {
			if phase != "combine" {
				return
			}
			w := r.w
			w.beginPhase()
			size := func(s, d int) uint64 { return sizes[(s+3*d)%len(sizes)] }
			require.NoError(t, w.buildA2A(size))
			nch := map[[2]int]int{}
			for _, c := range w.a2a {
				nch[[2]int{c.src, c.dst}]++
			}
			for _, c := range w.a2a {
				b := size(c.src, c.dst)
				n := nch[[2]int{c.src, c.dst}]
				assert.Equal(t, b <= 16384, c.ll, "%d bytes %d>%d", b, c.src, c.dst)
				assert.Equal(t, b <= 65536, n == 1, "%d bytes: channels", b)
				if c.ll {
					assert.Equal(t, 1, c.nsteps, "one LL step")
					assert.Equal(t, cfg.llChunk(c.net), c.chunk)
				}
			}
		})
	}
}

// TestNCCLLLRun replays EP16 with one token per rank, so that every
// dispatch send and the one-selection combine sends are at most 16 KiB,
// with NCCL_ALLOC_P2P_NET_LL_BUFFERS=1 so that LL runs over NET too, with
// and without NVLink: the receiving kernels check every LL line against
// the routing (source, destination, offset) and count what they got, which
// must be the all-to-all-v matrix; RDMA bytes are twice the LL data (lines)
// plus the Simple data.
func TestNCCLLLRun(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 1)
	sel := replaytest.A2AMatrix(t, tr)
	t64, c64, b64 := replaytest.A2ASizes(t, tr)
	tok, comb, blk := uint64(t64), uint64(c64), uint64(b64)
	ep := tr.EP()
	cfg := DefaultConfig()
	cfg.NetP2PLL = true
	for _, nvlink := range []bool{false, true} {
		var lls int
		rep := ncclRun(t, tr, nvlink, cfg, nil, func(r *ncclRunResult, phase string) {
			bytes := func(s, d int) uint64 { return uint64(sel[s][d]) * tok }
			if phase == "combine" {
				bytes = func(s, d int) uint64 { return uint64(sel[d][s]) * comb }
			}
			got := map[[2]int]uint64{}
			var rdma uint64
			for _, c := range r.w.a2a {
				b := bytes(c.src, c.dst)
				assert.Equal(t, b <= 16384, c.ll, "%s %d>%d %d bytes", phase, c.src, c.dst, b)
				if c.ll {
					lls++
					got[[2]int{c.src, c.dst}] += c.llGot
					if c.net {
						rdma += (c.bytes + 7) / 8 * 16
					}
				} else if c.net {
					rdma += c.bytes
				}
			}
			for s := range ep {
				for d := range ep {
					if b := bytes(s, d); s != d && b <= 16384 {
						assert.Equal(t, b, got[[2]int{s, d}], "%s %d>%d: LL data checked by the receiver", phase, s, d)
					}
				}
			}
			if phase == "dispatch" {
				for s := range ep {
					// Every ring hop is LL, NVLink or not; its receiver
					// checked ep-1 blocks.
					c := r.w.ring[s]
					assert.True(t, c.ll, "ring hop %d>%d", c.src, c.dst)
					assert.Equal(t, uint64(ep-1)*blk, c.llGot, "ring hop %d>%d", c.src, c.dst)
					if c.net {
						rdma += uint64(ep-1) * 2 * blk
					}
				}
				assert.Equal(t, int64(rdma), r.e.Result(&r.e.Disp).RDMABytes)
			} else {
				assert.Equal(t, int64(rdma), r.e.Result(&r.e.Comb).RDMABytes)
			}
		})
		assert.Positive(t, lls)
		assert.Greater(t, rep.rep.Dispatch.US, 0.0)
	}
}

// TestNCCLProxyNoLostWakeup replays EP64 with --nvlink and PXN off, where
// a receive completion lands while a proxy thread's pass is past the op
// that polls it: the thread must not park watching for the next one (it
// did, and the last receive of a connection was never seen).
func TestNCCLProxyNoLostWakeup(t *testing.T) {
	if testing.Short() {
		t.Skip("an EP64 replay")
	}
	cfg := DefaultConfig()
	cfg.PXNLevel = 0
	r := ncclRun(t, replaytest.TinyTrace(t, 64, 128), true, cfg, nil, nil)
	assert.Len(t, r.rep.Combine.RecvDoneUS, 64)
}

// firstStep is the first (iteration, layer) of tr with route records, as
// replay.Steps orders them.
func firstStep(tr *traces.Trace) [2]int {
	for _, it := range tr.Iterations() {
		for _, l := range tr.Layers() {
			if len(tr.StepRoutes(it, l)) > 0 {
				return [2]int{it, l}
			}
		}
	}
	panic("ncclbase: trace without route records")
}

// TestNCCLRunDeterministic runs LL over NET and PXN together, through the
// workload's own config, twice.
func TestNCCLRunDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NetP2PLL = true
	tr := replaytest.TinyTrace(t, 16, 1)
	a := ncclRun(t, tr, true, cfg, nil, nil)
	b := ncclRun(t, tr, true, cfg, nil, nil)
	assert.Equal(t, a.rep, b.rep)
	assert.Equal(t, a.e.Sim.Fired(), b.e.Sim.Fired())
}
