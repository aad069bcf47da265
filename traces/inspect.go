package traces

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Stats summarizes the routing of a trace (Inspect). Byte figures follow
// DeepEP's bandwidth accounting (spec 1.9): low latency counts every valid
// selection, local ones included, at the LL message size; high throughput
// counts unique (token, node) pairs, local node included.
type Stats struct {
	Model        string `json:"model"`
	EP           int    `json:"ep_ranks"`
	RanksPerNode int    `json:"ranks_per_node"`
	Nodes        int    `json:"nodes"`
	Slots        int    `json:"expert_slots"`
	TopK         int    `json:"top_k"`
	Hidden       int    `json:"hidden"`
	DeepEPHidden int    `json:"deepep_hidden"` // padded hidden used for sizes
	Dispatch     string `json:"dispatch_dtype"`
	// Per-message / per-record sizes in bytes at DeepEPHidden.
	LLDispatchMsg    int         `json:"ll_dispatch_msg_bytes"`
	LLCombineMsg     int         `json:"ll_combine_msg_bytes"`
	HTDispatchRecord int         `json:"ht_dispatch_record_bytes"`
	HTCombineRecord  int         `json:"ht_combine_record_bytes"`
	Steps            []StepStats `json:"steps"`
}

// StepStats are the statistics of one (iteration, layer).
type StepStats struct {
	Iter       int   `json:"iter"`
	Layer      int   `json:"layer"`
	Exact      bool  `json:"exact"` // from route records only
	Tokens     int64 `json:"tokens"`
	Selections int64 `json:"selections"` // valid (token, expert) pairs
	Masked     int64 `json:"masked"`
	// RankLoad is the distribution of selections received per destination
	// rank, and RankLoadTail its percentiles.
	RankLoad     Spread `json:"rank_load"`
	RankLoadTail Tail   `json:"rank_load_tail"`
	// RecvTokensTail is the percentiles of distinct tokens received per
	// destination rank (a token counts once per rank however many of the
	// rank's experts it selects).
	RecvTokensTail Tail `json:"recv_tokens_tail"`
	// Recv is the receive side of every destination rank.
	Recv []RankRecv `json:"recv_per_rank"`
	// Experts is the load of every expert slot.
	Experts []ExpertLoad `json:"experts"`
	// InterNode is the fraction of selections whose expert is on another
	// node than the token.
	InterNode float64 `json:"inter_node_fraction"`
	// NodesPerToken and RanksPerToken are the mean distinct destination
	// nodes and ranks per token (local included).
	NodesPerToken float64 `json:"nodes_per_token"`
	RanksPerToken float64 `json:"ranks_per_token"`
	// Bytes sent per source rank.
	LLDispatch RankBytes `json:"ll_dispatch_bytes"`
	LLCombine  RankBytes `json:"ll_combine_bytes"`
	HTDispatch RankBytes `json:"ht_dispatch_bytes"`
	HTCombine  RankBytes `json:"ht_combine_bytes"`
}

// Spread summarizes a per-rank load vector.
type Spread struct {
	Min       int64   `json:"min"`
	Mean      float64 `json:"mean"`
	Max       int64   `json:"max"`
	Imbalance float64 `json:"imbalance"` // max / mean (0 when mean is 0)
}

// Tail holds nearest-rank percentiles of a per-rank vector: Pxx is the
// smallest value at or above xx% of the ranks.
type Tail struct {
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max"`
}

// RankRecv is what one destination rank receives in one step.
type RankRecv struct {
	Rank int `json:"rank"`
	// Selections received (local ones included): LL dispatch messages in,
	// LL combine messages out.
	Selections int64 `json:"selections"`
	// Tokens is the distinct (source rank, token) pairs with at least one
	// expert on this rank.
	Tokens int64 `json:"tokens"`
	// LLDispatchBytes is received LL dispatch bytes (Selections × message),
	// LLCombineBytes the LL combine bytes this rank sends back.
	LLDispatchBytes int64 `json:"ll_dispatch_recv_bytes"`
	LLCombineBytes  int64 `json:"ll_combine_send_bytes"`
}

// ExpertLoad is the load of one expert slot in one step.
type ExpertLoad struct {
	Slot int `json:"slot"`
	Rank int `json:"rank"`
	// Logical is the logical expert the slot holds (from the placement
	// record; the slot itself when the trace does not say).
	Logical    int   `json:"logical"`
	Selections int64 `json:"selections"`
}

func tailOf(v []int64) Tail {
	if len(v) == 0 {
		return Tail{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Tail{P50: Percentile(s, 50), P90: Percentile(s, 90), P99: Percentile(s, 99), Max: s[len(s)-1]}
}

// Percentile returns the nearest-rank p-th percentile (1 <= p <= 100) of
// sorted, which must not be empty: the smallest value that at least p % of
// the values are at or below.
func Percentile[T cmp.Ordered](sorted []T, p int) T {
	return sorted[max((p*len(sorted)+99)/100, 1)-1]
}

// RankBytes summarizes bytes per source rank.
type RankBytes struct {
	Mean float64 `json:"mean"`
	Max  int64   `json:"max"`
}

func loadOf(v []int64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	l := Spread{Min: v[0], Max: v[0]}
	sum := int64(0)
	for _, x := range v {
		l.Min, l.Max = min(l.Min, x), max(l.Max, x)
		sum += x
	}
	l.Mean = float64(sum) / float64(len(v))
	if l.Mean > 0 {
		l.Imbalance = float64(l.Max) / l.Mean
	}
	return l
}

func bytesOf(v []int64) RankBytes {
	l := loadOf(v)
	return RankBytes{Mean: l.Mean, Max: l.Max}
}

// Inspect computes routing statistics for every (iteration, layer) of t
// that has route or counts records.
func Inspect(t *Trace) Stats {
	h := t.Header()
	prec, _ := h.DispatchPrecision() // validated when the trace was built
	hid := Model{Hidden: h.Model.Hidden}.DeepEPHidden()
	k := h.Model.TopK
	s := Stats{
		Model: h.Model.Name, EP: t.EP(), RanksPerNode: h.Parallel.RanksPerNode, Nodes: t.Nodes(),
		Slots: t.Slots(), TopK: k, Hidden: h.Model.Hidden, DeepEPHidden: hid, Dispatch: prec.String(),
		LLDispatchMsg: LLDispatchBytes(hid, prec), LLCombineMsg: LLCombineBytes(hid),
		HTDispatchRecord: HTDispatchBytes(hid, k, prec), HTCombineRecord: HTCombineBytes(hid, k),
	}
	for _, it := range t.Iterations() {
		for _, layer := range t.Layers() {
			m, err := t.Step(it, layer)
			if err != nil {
				continue // this (iter, layer) has no records
			}
			s.Steps = append(s.Steps, stepStats(t, m, hid, prec))
		}
	}
	return s
}

func stepStats(t *Trace, m *StepMatrix, hid int, prec Precision) StepStats {
	st := StepStats{Iter: m.Iter, Layer: m.Layer, Exact: m.Exact}
	recv := make([]int64, m.EP)
	llD, llC, htD, htC := make([]int64, m.EP), make([]int64, m.EP), make([]int64, m.EP), make([]int64, m.EP)
	var inter, nodePairs, rankPairs int64
	for src := range m.EP {
		st.Tokens += int64(m.Tokens[src])
		st.Masked += int64(m.Masked[src])
		var sel, tn int64
		for dst, n := range m.Selections[src] {
			recv[dst] += int64(n)
			sel += int64(n)
			if t.NodeOf(dst) != t.NodeOf(src) {
				inter += int64(n)
			}
			rankPairs += int64(m.RankTokens[src][dst])
		}
		for _, n := range m.NodeTokens[src] {
			tn += int64(n)
		}
		nodePairs += tn
		st.Selections += sel
		llD[src] = LLBandwidthBytes(sel, hid, prec)
		llC[src] = LLCombineBandwidthBytes(sel, hid)
		htD[src] = HTBandwidthBytes(tn, hid, prec)
		htC[src] = HTBandwidthBytes(tn, hid, BF16)
	}
	st.RankLoad = loadOf(recv)
	st.RankLoadTail = tailOf(recv)
	recvTok := make([]int64, m.EP)
	for src := range m.EP {
		for dst, n := range m.RankTokens[src] {
			recvTok[dst] += int64(n)
		}
	}
	st.RecvTokensTail = tailOf(recvTok)
	st.Recv = make([]RankRecv, m.EP)
	for r := range st.Recv {
		st.Recv[r] = RankRecv{Rank: r, Selections: recv[r], Tokens: recvTok[r],
			LLDispatchBytes: LLBandwidthBytes(recv[r], hid, prec), LLCombineBytes: LLCombineBandwidthBytes(recv[r], hid)}
	}
	st.Experts = expertLoads(t, m.Iter, m.Layer)
	if st.Selections > 0 {
		st.InterNode = float64(inter) / float64(st.Selections)
	}
	if st.Tokens > 0 {
		st.NodesPerToken = float64(nodePairs) / float64(st.Tokens)
		st.RanksPerToken = float64(rankPairs) / float64(st.Tokens)
	}
	st.LLDispatch, st.LLCombine = bytesOf(llD), bytesOf(llC)
	st.HTDispatch, st.HTCombine = bytesOf(htD), bytesOf(htC)
	return st
}

// expertLoads counts selections per expert slot in (iter, layer), from
// route records where present and counts records otherwise.
func expertLoads(t *Trace, iter, layer int) []ExpertLoad {
	place := t.Placement(layer)
	out := make([]ExpertLoad, t.Slots())
	for e := range out {
		out[e] = ExpertLoad{Slot: e, Rank: place[e], Logical: e}
	}
	i, ok := slices.BinarySearchFunc(t.placements, layer, func(p *Placement, l int) int { return cmp.Compare(p.Layer, l) })
	if ok && t.placements[i].LogicalExpert != nil {
		for e, x := range t.placements[i].LogicalExpert {
			out[e].Logical = x
		}
	}
	for src := range t.EP() {
		if r := t.routeIdx[stepKey{iter, layer, src}]; r != nil {
			for _, row := range r.TopK {
				for _, e := range row {
					if e >= 0 {
						out[e].Selections++
					}
				}
			}
		} else if c := t.countIdx[stepKey{iter, layer, src}]; c != nil {
			for e, n := range c.ExpertTokens {
				out[e].Selections += int64(n)
			}
		}
	}
	return out
}

// WriteRanks writes, for every step, the receive side of every rank.
func (s Stats) WriteRanks(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "iter\tlayer\trank\trecv selections\trecv tokens\tLL disp recv MB\tLL comb send MB\t")
	for _, st := range s.Steps {
		for _, r := range st.Recv {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t\n", st.Iter, st.Layer, r.Rank, r.Selections, r.Tokens,
				float64(r.LLDispatchBytes)/1e6, float64(r.LLCombineBytes)/1e6)
		}
	}
	return tw.Flush()
}

// WriteTopExperts writes, for every step, the n busiest expert slots.
func (s Stats) WriteTopExperts(w io.Writer, n int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "iter\tlayer\tslot\tlogical\trank\tselections\tshare\tx mean\t")
	for _, st := range s.Steps {
		ex := slices.Clone(st.Experts)
		slices.SortStableFunc(ex, func(a, b ExpertLoad) int { return cmp.Compare(b.Selections, a.Selections) })
		mean := float64(st.Selections) / float64(max(len(ex), 1))
		for _, e := range ex[:min(n, len(ex))] {
			share, x := 0.0, 0.0
			if st.Selections > 0 {
				share, x = float64(e.Selections)/float64(st.Selections), float64(e.Selections)/mean
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%.2f%%\t%.2f\t\n", st.Iter, st.Layer, e.Slot, e.Logical, e.Rank, e.Selections, 100*share, x)
		}
	}
	return tw.Flush()
}

// WriteTable writes s as an aligned, human-readable table.
func (s Stats) WriteTable(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "model %s  EP %d (%d nodes x %d)  slots %d  top-k %d  hidden %d (DeepEP %d)  dispatch %s\n"+
		"msg bytes: LL dispatch %d, LL combine %d, HT dispatch record %d, HT combine record %d\n",
		s.Model, s.EP, s.Nodes, s.RanksPerNode, s.Slots, s.TopK, s.Hidden, s.DeepEPHidden, s.Dispatch,
		s.LLDispatchMsg, s.LLCombineMsg, s.HTDispatchRecord, s.HTCombineRecord); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "iter\tlayer\ttokens\tselections\tmasked\tload min\tmean\tp50\tp90\tp99\tmax\timbalance\tinter-node\tnodes/tok\tranks/tok\tLL disp MB/rank\tLL comb MB/rank\tHT disp MB/rank\tHT comb MB/rank\texact\t")
	mb := func(b RankBytes) string { return fmt.Sprintf("%.3f", b.Mean/1e6) }
	for _, st := range s.Steps {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%v\t\n",
			st.Iter, st.Layer, st.Tokens, st.Selections, st.Masked,
			st.RankLoad.Min, st.RankLoad.Mean, st.RankLoadTail.P50, st.RankLoadTail.P90, st.RankLoadTail.P99, st.RankLoad.Max, st.RankLoad.Imbalance,
			st.InterNode, st.NodesPerToken, st.RanksPerToken,
			mb(st.LLDispatch), mb(st.LLCombine), mb(st.HTDispatch), mb(st.HTCombine), st.Exact)
	}
	return tw.Flush()
}

// ExpectedGroups is the expected number of distinct groups a token's top-k
// experts fall into under uniform routing, with experts spread evenly over
// groups: G·(1 − C(E − E/G, k)/C(E, k)) (DeepEP V2's sizing model, spec
// 3.2). Read groups as nodes for HT messages per token and as ranks for V2
// direct messages. It returns 0 for invalid arguments.
func ExpectedGroups(experts, topK, groups int) float64 {
	if groups <= 0 || experts <= 0 || experts%groups != 0 || topK < 0 || topK > experts {
		return 0
	}
	// C(E-E/G, k)/C(E, k) = Π_{i<k} (E-E/G-i)/(E-i).
	p, out := 1.0, experts-experts/groups
	for i := range topK {
		p *= float64(out-i) / float64(experts-i)
		if p <= 0 {
			p = 0
			break
		}
	}
	return float64(groups) * (1 - p)
}
