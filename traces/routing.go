package traces

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Routing kinds accepted by ParseRouting.
const (
	RoutingUniform  = "uniform"
	RoutingGrouped  = "grouped"
	RoutingHot      = "hot"
	RoutingHotExp   = "hot-experts"
	RoutingZipf     = "zipf"
	RoutingBalanced = "balanced"
)

// Routing is a parsed routing distribution (see ParseRouting).
type Routing struct {
	Kind string
	// Grouped: Groups and TopGroups; 0 means the DeepEP internode test's
	// choice (groups = nodes, top groups = min(nodes, 4)). FromModel uses
	// the model's n_group and topk_group instead.
	Groups, TopGroups int
	FromModel         bool
	// Hot: Ratio is the hot rank's load relative to each other rank, and
	// HotRank the rank that gets it.
	Ratio   float64
	HotRank int
	// Zipf: Exponent is the power-law exponent of expert popularity.
	Exponent float64
	// Hot experts: HotExperts experts (a per-layer random choice) are each
	// picked with Ratio times the probability of any other expert.
	HotExperts int
}

// ParseRouting parses a routing specification:
//
//	uniform          DeepEP low-latency test: iid scores, top-k
//	balanced         exactly equal load on every expert
//	grouped          groups = nodes, top min(nodes,4) groups, then top-k
//	grouped:model    the model's n_group / topk_group
//	grouped:G:M      G groups, top M groups
//	hot:R[@rank]     one rank (default 0) gets R× the load of each other rank
//	hot-experts:N:R  N experts (random per layer) each get R× the load of any other
//	zipf:S           expert popularity ∝ 1/i^S
func ParseRouting(s string) (Routing, error) {
	kind, arg, hasArg := strings.Cut(strings.TrimSpace(s), ":")
	kind = strings.ToLower(kind)
	bad := func(format string, a ...any) (Routing, error) {
		return Routing{}, fmt.Errorf("traces: routing %q: %s", s, fmt.Sprintf(format, a...))
	}
	switch kind {
	case RoutingUniform, RoutingBalanced:
		if hasArg {
			return bad("%s takes no parameter", kind)
		}
		return Routing{Kind: kind}, nil
	case RoutingGrouped:
		r := Routing{Kind: kind}
		switch {
		case !hasArg:
		case arg == "model":
			r.FromModel = true
		default:
			gs, ms, ok := strings.Cut(arg, ":")
			g, err1 := strconv.Atoi(gs)
			m, err2 := strconv.Atoi(ms)
			if !ok || err1 != nil || err2 != nil {
				return bad("want grouped, grouped:model or grouped:G:M with integers G and M")
			}
			if g < 1 || m < 1 || m > g {
				return bad("need 1 <= M <= G, got G=%d M=%d", g, m)
			}
			r.Groups, r.TopGroups = g, m
		}
		return r, nil
	case RoutingHot:
		if !hasArg {
			return bad("want hot:R or hot:R@rank, e.g. hot:2.5")
		}
		rs, ranks, hasRank := strings.Cut(arg, "@")
		ratio, err := strconv.ParseFloat(rs, 64)
		if err != nil || math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio <= 0 {
			return bad("ratio %q must be a positive number", rs)
		}
		r := Routing{Kind: kind, Ratio: ratio}
		if hasRank {
			rank, err := strconv.Atoi(ranks)
			if err != nil || rank < 0 {
				return bad("hot rank %q must be a non-negative integer", ranks)
			}
			r.HotRank = rank
		}
		return r, nil
	case RoutingHotExp:
		ns, rs, ok := strings.Cut(arg, ":")
		n, err1 := strconv.Atoi(ns)
		ratio, err2 := strconv.ParseFloat(rs, 64)
		if !hasArg || !ok || err1 != nil || err2 != nil {
			return bad("want hot-experts:N:R with an integer N and a number R, e.g. hot-experts:4:10")
		}
		if n < 1 {
			return bad("N %d: want at least 1 hot expert", n)
		}
		if math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio <= 0 {
			return bad("ratio %q must be a positive number", rs)
		}
		return Routing{Kind: kind, HotExperts: n, Ratio: ratio}, nil
	case RoutingZipf:
		if !hasArg {
			return bad("want zipf:S, e.g. zipf:1.2")
		}
		sv, err := strconv.ParseFloat(arg, 64)
		if err != nil || math.IsNaN(sv) || math.IsInf(sv, 0) || sv < 0 {
			return bad("exponent %q must be a non-negative number", arg)
		}
		return Routing{Kind: kind, Exponent: sv}, nil
	}
	return bad("unknown kind %q (want uniform, balanced, grouped, hot:R, hot-experts:N:R or zipf:S)", kind)
}

// String returns the canonical specification of r, as accepted by
// ParseRouting.
func (r Routing) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch r.Kind {
	case RoutingGrouped:
		if r.FromModel {
			return "grouped:model"
		}
		if r.Groups > 0 {
			return fmt.Sprintf("grouped:%d:%d", r.Groups, r.TopGroups)
		}
		return "grouped"
	case RoutingHot:
		if r.HotRank != 0 {
			return fmt.Sprintf("hot:%s@%d", f(r.Ratio), r.HotRank)
		}
		return "hot:" + f(r.Ratio)
	case RoutingHotExp:
		return fmt.Sprintf("hot-experts:%d:%s", r.HotExperts, f(r.Ratio))
	case RoutingZipf:
		return "zipf:" + f(r.Exponent)
	}
	return r.Kind
}
