package workload

import (
	"encoding/binary"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// GPUArray is an array of 8-byte counters in one GPU's HBM.
type GPUArray struct {
	R *mem.Region
}

func NewGPUArray(g *gpu.GPU, name string, n int) *GPUArray {
	return &GPUArray{R: g.Alloc(name, sim.Bytes(8*max(n, 1)), false)}
}

func (a *GPUArray) Off(i int) uint64 { return uint64(i) * 8 }

func PutLE64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// NoteLast keeps s as rank r's latest-seen signal of the phase.
func (e *Env) NoteLast(r int, s Seen) {
	if s.Valid && (!e.Ph.Last[r].Valid || s.At >= e.Ph.Last[r].At) {
		e.Ph.Last[r] = s
	}
}

// LastOf returns rank r's latest-seen signal of the phase.
func (e *Env) LastOf(r int) Seen { return e.Ph.Last[r] }

// GinType is the GIN type of the run's backend.
func (e *Env) GinType() gin.Type {
	if e.Cfg.Backend == BackendProxy {
		return gin.TypeProxy
	}
	return gin.TypeGDAKI
}

// RouteSets returns, for each of rank r's tokens, the set of nodes its
// selections live on (bit n: node n) and, per (token, node), the set of
// that node's local GPUs it selects (gpus[t*nodes+n], bit l: local GPU l):
// what node-deduplicating kernels (HT, V2 hybrid) route by.
func (e *Env) RouteSets(r, nodes int) (ns, gs []uint64) {
	st := e.Step
	ns = make([]uint64, st.Tokens[r])
	gs = make([]uint64, st.Tokens[r]*nodes)
	for t, sel := range st.TopKIdx[r] {
		for _, x := range sel {
			if x < 0 {
				continue
			}
			rk := e.M.Ranks[st.Home[x]]
			ns[t] |= 1 << uint(rk.Node)
			gs[t*nodes+rk.Node] |= 1 << uint(rk.Local)
		}
	}
	return ns, gs
}
