package sweep

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
)

// DefaultIBTimeout is NCCL_IB_TIMEOUT's default, the QPs' local ACK
// timeout code: 4.096 us × 2^20 ≈ 4.3 s.
const DefaultIBTimeout = 20

// Backends returns replay.Options.Backends for a cluster: GDAKI and the Proxy
// with the cluster's effective configurations (its gdaki: and proxy:
// sections over the profile's), the QPs' ACK timeout code set to
// ibTimeout when it is not 0 (NCCL_IB_TIMEOUT), and the Proxy's CPU threads
// slowed as the cluster's faults say (faults.slow_proxy).
func Backends(spec machine.Spec, ibTimeout uint8) (func() map[gin.Type]gin.Backend, error) {
	prof, err := spec.Hardware()
	if err != nil {
		return nil, err
	}
	gc, pc := prof.GDAKI, prof.Proxy
	if ibTimeout != 0 {
		gc.AckTimeout, pc.AckTimeout = ibTimeout, ibTimeout
	}
	if f := spec.Faults; f.SlowProxy.Factor != 0 {
		pc.CPUPermille = f.ProxyCPUPermille
	}
	return ProfileBackends(pc, gc), nil
}

// ProfileBackends returns a builder of GDAKI and Proxy backends with the
// given configurations, which must be valid (the cluster spec checked
// them): each call builds fresh backends for one communicator.
func ProfileBackends(pc proxy.Config, gc gdaki.Config) func() map[gin.Type]gin.Backend {
	return func() map[gin.Type]gin.Backend {
		g, err := gdaki.New(gc)
		if err != nil {
			panic(fmt.Sprintf("sweep: gdaki config: %v", err))
		}
		p, err := proxy.New(pc)
		if err != nil {
			panic(fmt.Sprintf("sweep: proxy config: %v", err))
		}
		return map[gin.Type]gin.Backend{gin.TypeGDAKI: g, gin.TypeProxy: p}
	}
}
