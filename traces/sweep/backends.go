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

// Backends returns moe.Options.Backends for a cluster: GDAKI and the Proxy
// at their default configurations with the QPs' ACK timeout code
// ibTimeout (NCCL_IB_TIMEOUT; 0: 20), the Proxy's CPU threads slowed as
// the cluster's faults say (faults.slow_proxy).
func Backends(spec machine.Spec, ibTimeout uint8) func() map[gin.Type]gin.Backend {
	f := spec.Faults
	if ibTimeout == 0 {
		ibTimeout = DefaultIBTimeout
	}
	return func() map[gin.Type]gin.Backend {
		gc := gdaki.DefaultConfig()
		gc.AckTimeout = ibTimeout
		g, err := gdaki.New(gc)
		if err != nil {
			panic(fmt.Sprintf("sweep: default GDAKI config: %v", err))
		}
		pc := proxy.DefaultConfig()
		pc.AckTimeout = ibTimeout
		if f.SlowProxy.Factor != 0 {
			pc.CPUPermille = f.ProxyCPUPermille
		}
		p, err := proxy.New(pc)
		if err != nil {
			panic(fmt.Sprintf("sweep: default proxy config: %v", err))
		}
		return map[gin.Type]gin.Backend{gin.TypeGDAKI: g, gin.TypeProxy: p}
	}
}
