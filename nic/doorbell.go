package nic

import "github.com/ginsim/ginsim/sim"

// DoorbellBytes is the MMIO store a host CPU makes after ibv_post_send of
// k work requests: with Config.BlueFlame and a single WR, the 64-byte WQE
// written through the BlueFlame register (PostSend then skips its fetch);
// otherwise the 8-byte doorbell record.
func (n *NIC) DoorbellBytes(k int) sim.Bytes {
	if k == 1 && n.cfg.BlueFlame {
		return 64
	}
	return 8
}

// HostDoorbell sends that store from the host's root complex across the
// NIC's PCIe tree, starting at at, and returns when it reaches the NIC: the
// instant the caller hands the work requests over (PostSend). It is the one
// host post path of the proxy backend, the NCCL baseline's proxy thread
// and perftest; the CPU time of ibv_post_send itself is the caller's.
func (n *NIC) HostDoorbell(at sim.Time, k int) sim.Time {
	return n.bus.Write(at, n.bus.Host(), n.dev, n.DoorbellBytes(k))
}
