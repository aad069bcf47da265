package replay

import (
	"errors"
	"fmt"

	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// ReadsCounts reports whether a mode and backend replay a step from counts
// records (per-(source, expert) selections, no token identities): only
// NCCL's all-to-all-v (backend nccl), whose sizes are those counts. The
// GIN kernels (ll, ncclep, ht, v2) send per token and need route records.
func ReadsCounts(mode, backend string) bool { return backend == BackendNCCL && mode == ModeLL }

// ErrNeedsRoutes is the error of a mode that cannot replay a step that has
// counts records only.
var ErrNeedsRoutes = errors.New("the step has counts records only, and this mode needs each token's experts (route records)")

func hasRoutes(tr *traces.Trace, iter, layer int) bool {
	for r := range tr.EP() {
		if tr.Route(iter, layer, r) != nil {
			return true
		}
	}
	return false
}

func hasCounts(tr *traces.Trace, iter, layer int) bool {
	for r := range tr.EP() {
		if tr.CountsFor(iter, layer, r) != nil {
			return true
		}
	}
	return false
}

// countsOnly reports whether a step has counts records and no route
// record.
func countsOnly(tr *traces.Trace, iter, layer int) bool {
	return !hasRoutes(tr, iter, layer) && hasCounts(tr, iter, layer)
}

// checkCounts fails, before anything runs, when a step has counts
// records only and the mode cannot replay them.
func checkCounts(tr *traces.Trace, steps [][2]int, opt *Options) error {
	if ReadsCounts(opt.Mode, opt.Backend) {
		return nil
	}
	for _, sp := range steps {
		if countsOnly(tr, sp[0], sp[1]) {
			return fmt.Errorf("replay: trace %s, iter %d layer %d: --mode %s --backend %s: %w; --backend nccl reads counts",
				opt.TraceName, sp[0], sp[1], opt.Mode, opt.Backend, ErrNeedsRoutes)
		}
	}
	return nil
}

// newStep resolves a step from its route records or, when it has none
// (and the mode reads counts: checkCounts), from its counts records.
func newStep(tr *traces.Trace, iter, layer int) (*workload.Step, error) {
	if countsOnly(tr, iter, layer) {
		return countsStep(tr, iter, layer)
	}
	return workload.NewStep(tr, iter, layer)
}

// countsStep builds a step from counts records: per-(source, expert)
// selections and distinct tokens per destination rank and node. Token
// identities (TopKIdx, RecvTokens) stay nil: only a workload that never
// reads them (ncclbase) may run it.
func countsStep(tr *traces.Trace, iter, layer int) (*workload.Step, error) {
	st, err := workload.PlacedStep(tr, iter, layer)
	if err != nil {
		return nil, err
	}
	ep, nodes := tr.EP(), tr.Nodes()
	st.Tokens, st.Selections = make([]int, ep), make([]int64, ep)
	st.Count, st.RankTokens, st.NodeTokens = make([][]int, ep), make([][]int, ep), make([][]int, ep)
	for r := range ep {
		c := tr.CountsFor(iter, layer, r)
		if c == nil {
			return nil, fmt.Errorf("iter %d layer %d: no counts record for rank %d", iter, layer, r)
		}
		if len(c.ExpertTokens) != st.Slots || len(c.RankTokens) != ep || len(c.NodeTokens) != nodes {
			return nil, fmt.Errorf("iter %d layer %d rank %d: counts record has %d experts, %d ranks, %d nodes; want %d, %d, %d",
				iter, layer, r, len(c.ExpertTokens), len(c.RankTokens), len(c.NodeTokens), st.Slots, ep, nodes)
		}
		st.Tokens[r] = c.Tokens
		st.MaxTokens = max(st.MaxTokens, c.Tokens)
		st.Count[r] = append([]int(nil), c.ExpertTokens...)
		for _, n := range c.ExpertTokens {
			st.Selections[r] += int64(n)
		}
		st.RankTokens[r] = append([]int(nil), c.RankTokens...)
		st.NodeTokens[r] = append([]int(nil), c.NodeTokens...)
	}
	return st, nil
}
