package moe

import (
	"encoding/binary"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// gpuArray is an array of 8-byte counters in one GPU's HBM.
type gpuArray struct {
	r *mem.Region
}

func newGPUArray(g *gpu.GPU, name string, n int) *gpuArray {
	return &gpuArray{r: g.Alloc(name, sim.Bytes(8*max(n, 1)), false)}
}

func (a *gpuArray) off(i int) uint64 { return uint64(i) * 8 }

func putLE64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// sigKey names one signal word: (rank, local expert context, signal id).
type sigKey struct{ rank, le, id int }

// issueRec is when a signal's sending warp issued it.
type issueRec struct {
	start, end sim.Time
	rdma       bool
	from       int
}

// noteIssue records the issue of the signal for (dst, le, id).
func (e *env) noteIssue(dst, le, id int, start, end sim.Time, rdma bool) {
	e.issues[sigKey{dst, le, id}] = issueRec{start: start, end: end, rdma: rdma}
}

// issued returns the path of signal (r, le, id) so far.
func (e *env) issued(r, le, id int) sigPath {
	rec, ok := e.issues[sigKey{r, le, id}]
	return sigPath{valid: ok, issueStart: rec.start, issueEnd: rec.end, rdma: rec.rdma}
}

// noteLast keeps p as rank r's latest-seen signal of the phase.
func (e *env) noteLast(r int, p sigPath) {
	if p.valid && (!e.ph.last[r].valid || p.seen >= e.ph.last[r].seen) {
		e.ph.last[r] = p
	}
}

// lastOf returns rank r's latest-seen signal of the phase.
func (e *env) lastOf(r int) sigPath { return e.ph.last[r] }

// ginType is the GIN type of the run's backend.
func (e *env) ginType() gin.Type {
	if e.opt.Backend == BackendProxy {
		return gin.TypeProxy
	}
	return gin.TypeGDAKI
}

// routeSets returns, for each of rank r's tokens, the set of nodes its
// selections live on (bit n: node n) and, per (token, node), the set of
// that node's local GPUs it selects (gpus[t*nodes+n], bit l: local GPU l):
// what node-deduplicating kernels (HT, V2 hybrid) route by.
func (e *env) routeSets(r, nodes int) (ns, gs []uint64) {
	st := e.st
	ns = make([]uint64, st.tokens[r])
	gs = make([]uint64, st.tokens[r]*nodes)
	for t, sel := range st.topk[r] {
		for _, x := range sel {
			if x < 0 {
				continue
			}
			rk := e.m.Ranks[st.home[x]]
			ns[t] |= 1 << uint(rk.Node)
			gs[t*nodes+rk.Node] |= 1 << uint(rk.Local)
		}
	}
	return ns, gs
}
