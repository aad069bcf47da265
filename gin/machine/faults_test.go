package machine

import (
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const faultsYAML = `base: h100-ib
faults:
  loss:
    host: 0.1%
    fabric: 0.002
  corrupt:
    host: 0.0001
  down:
    link: rank3/nic0
    at: 20us
    up: 50us
  degraded:
    link: rail1/leaf0-spine0
    rate: 100Gb/s
  straggler:
    rank: 5
    factor: 2
  slow_proxy:
    rank: 1
    factor: 4
`

func TestParseFaults(t *testing.T) {
	s, err := ParseSpec([]byte(faultsYAML), "f.yaml")
	require.NoError(t, err)
	f := s.Faults
	assert.Equal(t, Prob(0.001), f.Loss.Host)
	assert.Equal(t, Prob(0.002), f.Loss.Fabric)
	assert.Equal(t, Prob(0.0001), f.Corrupt.Host)
	assert.Equal(t, LinkDown{Link: "rank3/nic0", At: Duration(20 * sim.Microsecond), Up: Duration(50 * sim.Microsecond)}, f.Down)
	assert.Equal(t, LinkDegraded{Link: "rail1/leaf0-spine0", Rate: Rate(100 * sim.Gbps)}, f.Degraded)
	assert.Equal(t, Slow{Rank: 5, Factor: 2}, f.Straggler)
	assert.Equal(t, int64(4000), f.ProxyCPUPermille(1))
	assert.Equal(t, int64(1000), f.ProxyCPUPermille(0))
	// The YAML form round-trips; a healthy cluster prints no faults.
	b, err := MarshalSpec(s)
	require.NoError(t, err)
	q, err := ParseSpec(b, "again.yaml")
	require.NoError(t, err, string(b))
	assert.Equal(t, s, q)
	p, _ := Preset("h100-ib")
	b, err = MarshalSpec(p)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "faults")
}

func TestParseFaultsErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"base: h100-ib\nfaults:\n  loss:\n    host: 2\n", `c.yaml:4:11: field "faults.loss.host": probability 2 out of range [0, 1]`},
		{"base: h100-ib\nfaults:\n  loss:\n    core: 0.1\n", `c.yaml:4:5: field "faults.loss.core": unknown field (have host, fabric)`},
		{"base: h100-ib\nfaults:\n  down:\n    link: rank1\n    at: 5us\n    up: 2us\n",
			`c.yaml:6:9: field "faults.down.up": 2us is not after down.at 5us (0 leaves the link down)`},
		{"base: h100-ib\nfaults:\n  down:\n    link: rankx\n", `c.yaml:4:11: field "faults.down.link": link "rankx": want rankR, rankR/nicJ, or A-B[#K] between fabric nodes such as leaf0-spine0`},
		{"base: h100-ib\nfaults:\n  degraded:\n    link: rank0\n", `c.yaml: field "faults.degraded.rate": must be a positive rate such as 100Gb/s (field missing)`},
		{"base: h100-ib\nfaults:\n  straggler:\n    rank: 2\n    factor: 0.5\n", `c.yaml:5:13: field "faults.straggler.factor": 0.5 out of range [1, 1000] (times slower; 0: no fault)`},
	} {
		_, err := ParseSpec([]byte(c.yaml), "c.yaml")
		require.Error(t, err, c.yaml)
		assert.Equal(t, c.want, err.Error())
	}
}

func TestBuildFaults(t *testing.T) {
	s, err := ParseSpec([]byte(faultsYAML), "f.yaml")
	require.NoError(t, err)
	m, err := Build(sim.New(sim.Config{Seed: 1}), s, 2)
	require.NoError(t, err)
	// The degraded link and the straggler's clock.
	net := m.Net
	var degraded int
	for l := range net.Links() {
		ab, _ := net.LinkPorts(fabric.LinkID(l))
		x, y := net.PortEnds(ab)
		if net.NodeName(x)+"-"+net.NodeName(y) == "rail1/leaf0-spine0" {
			degraded++
		}
	}
	require.Positive(t, degraded)
	assert.Equal(t, m.GPUs[0].Config().Clock/2, m.GPUs[5].Config().Clock)
	assert.Equal(t, 2*m.GPUs[0].Config().StoreIssue, m.GPUs[5].Config().StoreIssue)
	// rank3's host link is down between 20 and 50 us.
	ep := m.Ranks[3].NICs[0].Endpoint()
	l := fabric.LinkID(net.EndpointPort(ep) / 2)
	var seen []bool
	for _, at := range []sim.Duration{10, 30, 60} {
		m.Sim.At(sim.Time(at*sim.Microsecond), func() { seen = append(seen, net.LinkUp(l)) })
	}
	require.NoError(t, m.Sim.Run())
	assert.Equal(t, []bool{true, false, true}, seen)

	// A degraded NIC port runs at its rate; the others do not.
	deg := s
	deg.Faults = Faults{Degraded: LinkDegraded{Link: "rank2", Rate: Rate(100 * sim.Gbps)}}
	m, err = Build(sim.New(sim.Config{}), deg, 2)
	require.NoError(t, err)
	assert.Equal(t, 100*sim.Gbps, m.Net.LinkRate(m.Ranks[2].NICs[0].Endpoint()))
	assert.Equal(t, 400*sim.Gbps, m.Net.LinkRate(m.Ranks[1].NICs[0].Endpoint()))

	// Names that do not resolve on the cluster are field errors.
	for _, c := range []struct {
		f     Faults
		field string
	}{
		{Faults{Down: LinkDown{Link: "rank99"}}, "faults.down.link"},
		{Faults{Degraded: LinkDegraded{Link: "leaf7-spine0", Rate: Rate(sim.Gbps)}}, "faults.degraded.link"},
		{Faults{Straggler: Slow{Rank: 16, Factor: 2}}, "faults.straggler.rank"},
	} {
		bad := s
		bad.Faults = c.f
		_, err := Build(sim.New(sim.Config{}), bad, 2)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%+v", c.f)
		assert.Equal(t, c.field, fe.Field)
	}
}
