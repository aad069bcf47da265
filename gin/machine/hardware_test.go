package machine

import (
	"reflect"
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEffectiveRoundTrip loads every preset's effective configuration (what
// cluster show prints) back and checks it builds the same devices and
// fabric: showing a cluster never changes it.
func TestEffectiveRoundTrip(t *testing.T) {
	for _, p := range Presets() {
		e, err := Effective(p)
		require.NoError(t, err, p.Name)
		b, err := MarshalSpec(e)
		require.NoError(t, err)
		q, err := ParseSpec(b, p.Name+".yaml")
		require.NoError(t, err, string(b))
		hp, err := p.Hardware()
		require.NoError(t, err)
		hq, err := q.Hardware()
		require.NoError(t, err)
		assert.Equal(t, hp, hq, p.Name)
		for _, nodes := range []int{1, 4} {
			assert.Equal(t, TopoSpec(p, nodes), TopoSpec(q, nodes), p.Name)
		}
		e2, err := Effective(q)
		require.NoError(t, err)
		assert.Equal(t, e, e2, p.Name)
		// Every field of every device configuration is listed.
		for _, c := range []struct {
			p   Params
			cfg any
		}{{e.GPU, hp.GPU}, {e.NIC, hp.NIC}, {e.PCIe, hp.PCIe}, {e.Proxy, hp.Proxy}, {e.GDAKI, hp.GDAKI}} {
			assert.Len(t, c.p, len(keys(reflect.TypeOf(c.cfg), "")), p.Name)
		}
		assert.Len(t, e.NVLink.Params, len(keys(reflect.TypeOf(hp.NVLink), ""))-2)
	}
}

func TestParams(t *testing.T) {
	src := `base: h100-ib
name: tuned
gpu:
  sms: 100
  store_latency: 1.5us
nic:
  tx_packet_cost: 5ns
  dcqcn: false
  cc:
    ai: 10Mb/s
  cc.min_rate: 1Gb/s
pcie:
  link_rate: 256Gb/s
  max_payload: 512B
nvlink:
  write_latency: 400ns
proxy:
  pass_cost: 80ns
gdaki:
  mtu: 2048
topology:
  lossless: false
  port_buffer: 4MiB
  ecn_pmax: 0.5
`
	s, err := ParseSpec([]byte(src), "c.yaml")
	require.NoError(t, err)
	h, err := s.Hardware()
	require.NoError(t, err)
	assert.Equal(t, 100, h.GPU.SMs)
	assert.Equal(t, 1500*sim.Nanosecond, h.GPU.StoreLatency)
	assert.Equal(t, 5*sim.Nanosecond, h.NIC.TxPacketCost)
	assert.False(t, h.NIC.DCQCN)
	assert.True(t, h.NIC.ECT) // lossless: false, so the profile's ECT stays
	assert.Equal(t, 10*sim.Mbps, h.NIC.CC.AI)
	assert.Equal(t, 1*sim.Gbps, h.NIC.CC.MinRate)
	assert.Equal(t, 256*sim.Gbps, h.PCIe.LinkRate)
	assert.Equal(t, sim.Bytes(512), h.PCIe.MaxPayload)
	assert.Equal(t, 400*sim.Nanosecond, h.NVLink.WriteLatency)
	assert.Equal(t, 80*sim.Nanosecond, h.Proxy.PassCost)
	assert.Equal(t, 2048, h.GDAKI.MTU)
	// Untouched fields keep the profile's values.
	base, _ := Preset("h100-ib")
	hb, _ := base.Hardware()
	assert.Equal(t, hb.GPU.HBMLatency, h.GPU.HBMLatency)
	assert.Equal(t, hb.NIC.RxPacketCost, h.NIC.RxPacketCost)
	ts := TopoSpec(s, 2)
	assert.Equal(t, int64(4096), ts.Switch.PortBufferKiB)
	assert.Equal(t, 0.5, ts.Switch.ECNPmax)
}

func TestHardwareErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"unknown param", "base: h100-ib\ngpu:\n  smz: 3\n", `c.yaml:3:8: field "gpu.smz": unknown field (have sms, clock, `},
		{"bad unit", "base: h100-ib\nnic:\n  tx_packet_cost: 5 furlongs\n", `c.yaml:3:19: field "nic.tx_packet_cost": duration "5 furlongs": want a number with a unit`},
		{"bad int", "base: h100-ib\ngdaki:\n  mtu: big\n", `c.yaml:3:8: field "gdaki.mtu": "big": want an integer of 64 bits`},
		{"typed elsewhere", "base: h100-ib\nnvlink:\n  port_rate: 1Tb/s\n", `c.yaml:3:14: field "nvlink.port_rate": set nvlink.bandwidth instead`},
		{"config invalid", "base: h100-ib\nnic:\n  read_ahead: 0\n", `c.yaml:3:3: field "nic": nic: ReadAhead 0 must be >= 1`},
		{"too many NICs", "base: h100-ib\nnics_per_gpu: 4\n", `c.yaml:2:15: field "nics_per_gpu": 4 NICs per GPU do not fit the PCIe tree: a switch of 8 x16 downstream ports holds 2 GPUs and at most 3 NICs per GPU`},
		{"one GPU per switch", "base: h100-ib\nnics_per_gpu: 4\ngpus_per_pcie_switch: 1\npcie_switch_ports: 4\n", `c.yaml:2:15: field "nics_per_gpu": 4 NICs per GPU do not fit the PCIe tree: a switch of 4 x16 downstream ports holds 1 GPUs and at most 3 NICs per GPU`},
		{"k elsewhere", "base: h100-ib\ntopology:\n  k: 8\n", `c.yaml:3:6: field "topology.k": applies to a fat-tree topology only`},
		{"odd k", "base: h100-ib\ntopology:\n  kind: fat-tree\n  k: 7\n", `c.yaml:4:6: field "topology.k": 7 must be even`},
		{"small k", "base: h100-ib\nnodes: 4\ntopology:\n  kind: fat-tree\n  k: 4\n", `c.yaml:5:6: field "topology.k": a k=4 fat tree has 16 host ports, fewer than the 32 NIC ports of 4 nodes`},
		{"lossless buffer", "base: h100-ib\ntopology:\n  port_buffer: 1MiB\n", `c.yaml:3:16: field "topology.port_buffer": a lossless fabric has unbounded buffers`},
		{"pmax", "base: h100-ib\ntopology:\n  ecn_pmax: 2\n", `c.yaml:3:13: field "topology.ecn_pmax": 2 must be in [0, 1]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(c.yaml), "c.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}
	// With more ports, the same NICs fit.
	_, err := ParseSpec([]byte("base: h100-ib\nnics_per_gpu: 4\npcie_switch_ports: 10\n"), "c.yaml")
	require.NoError(t, err)
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"SMs": "sms", "TxPacketCost": "tx_packet_cost", "CNPInterval": "cnp_interval", "DCQCN": "dcqcn",
		"WQEBytes": "wqe_bytes", "SMStoreBytesPerCycle": "sm_store_bytes_per_cycle", "MTU": "mtu",
		"MinRNRTimer": "min_rnr_timer", "GDRStoreIssue": "gdr_store_issue", "AI": "ai", "TLPOverhead": "tlp_overhead",
	} {
		assert.Equal(t, want, snake(in), in)
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want sim.Bytes
	}{{"64B", 64}, {"4KiB", 4096}, {"2MiB", 2 << 20}, {"1GB", 1e9}, {"100", 100}, {"1.5KiB", 1536}} {
		got, err := ParseSize(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
		back, err := ParseSize(FormatSize(got))
		require.NoError(t, err)
		assert.Equal(t, got, back)
	}
	for _, bad := range []string{"", "-1B", "0.5B", "KiB", "many"} {
		_, err := ParseSize(bad)
		assert.Error(t, err, bad)
	}
}
