package workload

import (
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/sim"
)

// postKey names one signal word a proxy GFD adds to: the device
// communicator, the destination rank, the GIN context and the signal id.
type postKey struct {
	dc          *gin.DevComm
	to, ctx, id int
}

// postRec is when the proxy thread took a signal's GFD from its ring and
// when its ibv_post_send returned.
type postRec struct {
	taken, posted sim.Time
}

// proxyPosts records, for the Proxy backend, the host path of every GFD
// that carries a signal, so the breakdown can split issue-to-NIC into the
// proxy queue and the doorbell (proxy.PostObserver).
type proxyPosts struct {
	m map[postKey]postRec
}

// Posted implements proxy.PostObserver.
func (pp *proxyPosts) Posted(p *proxy.Post) {
	if p.GFD.Op&(proxy.GFDWithSignalInc|proxy.GFDWithSignalAdd) == 0 {
		return
	}
	pp.m[postKey{p.DevComm, p.Peer, p.Ctx, int(p.GFD.SignalID)}] = postRec{taken: p.Taken, posted: p.Posted}
}

// ObserveProxy installs the recorder on the proxy backend of a new
// communicator's backend set (no-op for other backends).
func (e *Env) ObserveProxy(backends map[gin.Type]gin.Backend) {
	pb, ok := backends[gin.TypeProxy].(*proxy.Backend)
	if !ok || e.Cfg.Backend != BackendProxy {
		return
	}
	if e.posts == nil {
		e.posts = &proxyPosts{m: map[postKey]postRec{}}
	}
	pb.SetPostObserver(e.posts)
}

// ProxyPath fills p's proxy instants from the latest post of signal id of
// context ctx of dc to rank to, if the Proxy backend carried it.
func (e *Env) ProxyPath(p *SigPath, dc *gin.DevComm, to, ctx, id int) {
	if e.posts == nil || !p.RDMA {
		return
	}
	if r, ok := e.posts.m[postKey{dc, to, ctx, id}]; ok && r.posted >= p.IssueEnd {
		p.ProxyQueued, p.ProxyPosted = r.taken, r.posted
	}
}
