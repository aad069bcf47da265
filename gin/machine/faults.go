package machine

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"gopkg.in/yaml.v3"
)

// Faults are what-if impairments of a cluster, the `faults:` section of its
// YAML. Every random choice (which packet is lost or corrupted) is drawn
// from the run's seeded streams, so a seed gives the same run. Times are
// from the start of each replayed step: every step runs on a fresh machine,
// and the fault happens in each. The zero Faults is a healthy cluster.
type Faults struct {
	// Loss is the probability that a packet put on a link is lost, per
	// link class (both directions).
	Loss LinkClasses `yaml:"loss,omitempty"`
	// Corrupt is the probability that its bits are flipped: the
	// receiving NIC's ICRC check drops it, as lost, but counted apart.
	Corrupt LinkClasses `yaml:"corrupt,omitempty"`
	// Down takes one link (or a NIC's port) down and, optionally, back up.
	Down LinkDown `yaml:"down,omitempty"`
	// Degraded runs one link at a lower rate from the start.
	Degraded LinkDegraded `yaml:"degraded,omitempty"`
	// Straggler is a GPU whose SMs issue slower (a lower clock and
	// proportionally slower instruction issue), as a throttled GPU.
	Straggler Slow `yaml:"straggler,omitempty"`
	// SlowProxy is a rank whose GIN proxy CPU thread runs slower (a slow
	// or contended core); the Proxy backend only.
	SlowProxy Slow `yaml:"slow_proxy,omitempty"`
}

// LinkClasses holds one probability per class of fabric link.
type LinkClasses struct {
	// Host links join a NIC port to its (leaf) switch.
	Host Prob `yaml:"host,omitempty"`
	// Fabric links join two switches (leaf to spine).
	Fabric Prob `yaml:"fabric,omitempty"`
}

// LinkDown takes a link down at At and brings it back at Up (0: never).
// Packets put on a down link are lost; routes do not change (ECMP keeps
// hashing onto it, as before a routing protocol reconverges).
type LinkDown struct {
	// Link names the link (see Faults' link names).
	Link string `yaml:"link,omitempty"`
	// At is when it goes down.
	At Duration `yaml:"at,omitempty"`
	// Up is when it comes back; 0 leaves it down for the rest of the step.
	Up Duration `yaml:"up,omitempty"`
}

// LinkDegraded runs Link at Rate instead of the cluster's link rate.
type LinkDegraded struct {
	// Link names the link (see Faults' link names).
	Link string `yaml:"link,omitempty"`
	// Rate is its rate in both directions.
	Rate Rate `yaml:"rate,omitempty"`
}

// Slow names a world rank and how many times slower it is (1: nominal;
// 0 or unset: no fault).
type Slow struct {
	Rank   int     `yaml:"rank,omitempty"`
	Factor float64 `yaml:"factor,omitempty"`
}

// Prob is a probability in a Spec. In YAML it is a number in [0, 1] or a
// percentage such as "0.1%".
type Prob float64

// UnmarshalYAML reads a probability.
func (p *Prob) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a probability such as 0.001 or 0.1%%")
	}
	v, err := ParseProb(n.Value)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParseProb parses "0.001" or "0.1%".
func ParseProb(s string) (Prob, error) {
	s = strings.TrimSpace(s)
	scale := 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s, scale = strings.TrimSpace(t), 100
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a probability (want a number in [0, 1] or a percentage such as 0.1%%)", s)
	}
	v /= scale
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("probability %g out of range [0, 1]", v)
	}
	return Prob(v), nil
}

// Faults' link names, in Down.Link and Degraded.Link:
//
//	rankR        world rank R's first NIC port (its host link)
//	rankR/nicJ   rank R's J-th NIC port
//	A-B          the link between fabric nodes A and B, as named in
//	             fabric/topo: n0/nic0, sw0, leaf0, spine0, rail0/leaf0
//	A-B#K        the K-th (from 0) of several parallel links between A and B
const linkNameHelp = "want rankR, rankR/nicJ, or A-B[#K] between fabric nodes such as leaf0-spine0"

// Active reports whether any fault is set.
func (f *Faults) Active() bool { return *f != Faults{} }

// Validate checks the faults' values (link names are resolved by Build,
// which knows the cluster's size) and returns the first problem as a
// *FieldError with its YAML path.
func (f *Faults) Validate() error {
	fe := func(field, format string, args ...any) error {
		return &FieldError{Field: "faults." + field, Msg: fmt.Sprintf(format, args...)}
	}
	for _, p := range []struct {
		field string
		v     Prob
	}{{"loss.host", f.Loss.Host}, {"loss.fabric", f.Loss.Fabric}, {"corrupt.host", f.Corrupt.Host},
		{"corrupt.fabric", f.Corrupt.Fabric}} {
		if p.v < 0 || p.v > 1 || math.IsNaN(float64(p.v)) {
			return fe(p.field, "probability %g out of range [0, 1]", float64(p.v))
		}
	}
	if d := f.Down; d != (LinkDown{}) {
		if err := checkLinkName(d.Link); err != nil {
			return fe("down.link", "%v", err)
		}
		if d.Up != 0 && d.Up <= d.At {
			return fe("down.up", "%v is not after down.at %v (0 leaves the link down)", d.Up, d.At)
		}
	}
	if d := f.Degraded; d != (LinkDegraded{}) {
		if err := checkLinkName(d.Link); err != nil {
			return fe("degraded.link", "%v", err)
		}
		if d.Rate <= 0 {
			return fe("degraded.rate", "must be a positive rate such as 100Gb/s")
		}
	}
	for _, s := range []struct {
		field string
		v     Slow
	}{{"straggler", f.Straggler}, {"slow_proxy", f.SlowProxy}} {
		if s.v.Rank < 0 {
			return fe(s.field+".rank", "%d must not be negative", s.v.Rank)
		}
		if s.v.Factor != 0 && (s.v.Factor < 1 || s.v.Factor > 1000 || math.IsNaN(s.v.Factor)) {
			return fe(s.field+".factor", "%g out of range [1, 1000] (times slower; 0: no fault)", s.v.Factor)
		}
	}
	return nil
}

// permille returns the slowdown in per mille (1000: nominal).
func (s Slow) permille() int64 {
	if s.Factor == 0 {
		return 1000
	}
	return int64(math.Round(s.Factor * 1000))
}

// ProxyCPUPermille is the proxy.Config.CPUPermille of these faults: the
// slow proxy's rank at its factor, every other at 1000.
func (f *Faults) ProxyCPUPermille(world int) int64 {
	if f.SlowProxy.Factor != 0 && world == f.SlowProxy.Rank {
		return f.SlowProxy.permille()
	}
	return 1000
}

// checkLinkName checks a link name's syntax.
func checkLinkName(s string) error {
	if s == "" {
		return fmt.Errorf("missing link name (%s)", linkNameHelp)
	}
	if _, _, ok, err := parseRankLink(s); ok || err != nil {
		return err
	}
	a, b, _, err := parseNodeLink(s)
	if err != nil {
		return err
	}
	if a == "" || b == "" {
		return fmt.Errorf("link %q: %s", s, linkNameHelp)
	}
	return nil
}

// parseRankLink parses rankR or rankR/nicJ; ok is false for other forms.
func parseRankLink(s string) (rank, nic int, ok bool, err error) {
	rest, found := strings.CutPrefix(s, "rank")
	if !found {
		return 0, 0, false, nil
	}
	r, j, hasNIC := strings.Cut(rest, "/nic")
	rank, err = strconv.Atoi(r)
	if err != nil || rank < 0 {
		return 0, 0, true, fmt.Errorf("link %q: %s", s, linkNameHelp)
	}
	if hasNIC {
		if nic, err = strconv.Atoi(j); err != nil || nic < 0 {
			return 0, 0, true, fmt.Errorf("link %q: %s", s, linkNameHelp)
		}
	}
	return rank, nic, true, nil
}

// parseNodeLink parses A-B or A-B#K.
func parseNodeLink(s string) (a, b string, k int, err error) {
	if base, idx, ok := strings.Cut(s, "#"); ok {
		if k, err = strconv.Atoi(idx); err != nil || k < 0 {
			return "", "", 0, fmt.Errorf("link %q: %s", s, linkNameHelp)
		}
		s = base
	}
	a, b, _ = strings.Cut(s, "-")
	return a, b, k, nil
}

// resolveLink finds the link a name refers to on a built cluster of ranks
// world ranks.
func resolveLink(cl *topo.Cluster, spec *Spec, ranks int, name, field string) (fabric.LinkID, error) {
	bad := func(format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	n := cl.Net
	if r, j, ok, err := parseRankLink(name); ok {
		if err != nil {
			return 0, bad("%v", err)
		}
		if r >= ranks {
			return 0, bad("link %q: rank %d out of range [0, %d)", name, r, ranks)
		}
		if j >= spec.NICsPerGPU {
			return 0, bad("link %q: NIC %d out of range [0, %d)", name, j, spec.NICsPerGPU)
		}
		ep := cl.Endpoint(r/spec.GPUsPerNode, r%spec.GPUsPerNode*spec.NICsPerGPU+j)
		return fabric.LinkID(n.EndpointPort(ep) / 2), nil
	}
	a, b, k, err := parseNodeLink(name)
	if err != nil {
		return 0, bad("%v", err)
	}
	var names []string
	for l := range n.Links() {
		ab, _ := n.LinkPorts(fabric.LinkID(l))
		x, y := n.PortEnds(ab)
		xa, ya := n.NodeName(x), n.NodeName(y)
		if xa == a && ya == b || xa == b && ya == a {
			if k == 0 {
				return fabric.LinkID(l), nil
			}
			k--
		}
		if len(names) < 6 {
			names = append(names, xa+"-"+ya)
		}
	}
	return 0, bad("link %q not in this cluster (links are named like %s, ...)", name, strings.Join(names, ", "))
}

// applyFaults installs f on a built cluster of ranks world ranks, before
// its NICs are made: link loss and corruption, the link down, the
// degraded rate.
func applyFaults(cl *topo.Cluster, spec *Spec, ranks int) error {
	f := &spec.Faults
	n := cl.Net
	if f.Loss != (LinkClasses{}) || f.Corrupt != (LinkClasses{}) {
		host := make([]bool, n.Links())
		for ep := range n.Endpoints() {
			host[n.EndpointPort(fabric.EndpointID(ep))/2] = true
		}
		for l := range n.Links() {
			ff := fabric.Faults{Loss: float64(f.Loss.Fabric), Corrupt: float64(f.Corrupt.Fabric)}
			if host[l] {
				ff = fabric.Faults{Loss: float64(f.Loss.Host), Corrupt: float64(f.Corrupt.Host)}
			}
			if err := n.SetLinkFaults(fabric.LinkID(l), ff); err != nil {
				return err
			}
		}
	}
	if d := f.Degraded; d != (LinkDegraded{}) {
		l, err := resolveLink(cl, spec, ranks, d.Link, "faults.degraded.link")
		if err != nil {
			return err
		}
		if err := n.SetLinkRate(l, sim.BitRate(d.Rate)); err != nil {
			return &FieldError{Field: "faults.degraded.rate", Msg: err.Error()}
		}
	}
	if d := f.Down; d != (LinkDown{}) {
		l, err := resolveLink(cl, spec, ranks, d.Link, "faults.down.link")
		if err != nil {
			return err
		}
		up := sim.MaxTime
		if d.Up != 0 {
			up = sim.Time(d.Up)
		}
		n.SetLinkDown(l, sim.Time(d.At), up)
	}
	if s := f.Straggler; s.Factor != 0 && s.Rank >= ranks {
		return &FieldError{Field: "faults.straggler.rank", Msg: fmt.Sprintf("%d out of range [0, %d)", s.Rank, ranks)}
	}
	if s := f.SlowProxy; s.Factor != 0 && s.Rank >= ranks {
		return &FieldError{Field: "faults.slow_proxy.rank", Msg: fmt.Sprintf("%d out of range [0, %d)", s.Rank, ranks)}
	}
	return nil
}

// gpuConfig returns the configuration of world rank r's GPU: cfg, or for
// the straggler a clock divided by its factor and SM issue costs
// multiplied by it (latencies of the memory system are unchanged).
func (f *Faults) gpuConfig(cfg gpu.Config, r int) gpu.Config {
	s := f.Straggler
	if s.Factor == 0 || s.Rank != r {
		return cfg
	}
	pm := s.permille()
	slow := func(d sim.Duration) sim.Duration { return d * sim.Duration(pm) / 1000 }
	cfg.Clock = max(cfg.Clock*1000/pm, 1)
	cfg.StoreIssue = slow(cfg.StoreIssue)
	cfg.MMIOIssue = slow(cfg.MMIOIssue)
	cfg.WTStoreIssue = slow(cfg.WTStoreIssue)
	cfg.AtomicThread = slow(cfg.AtomicThread)
	cfg.FenceBlock = slow(cfg.FenceBlock)
	cfg.CoopSyncWarp = slow(cfg.CoopSyncWarp)
	cfg.CoopSyncCTA = slow(cfg.CoopSyncCTA)
	return cfg
}

// validate checks a Spec and its faults.
func (s *Spec) validate() error {
	if err := s.Validate(); err != nil {
		return err
	}
	return s.Faults.Validate()
}
