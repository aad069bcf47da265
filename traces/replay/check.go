package replay

import (
	"fmt"

	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/sim/obs"
)

// CheckReport is what the semantic checker (gin/check) found over every
// step of a replay with Options.Check.
type CheckReport struct {
	check.Report
	// First is the first violation of the earliest step that had one,
	// with its step ("iter 0 layer 3: ..."); empty when there is none.
	First string `json:"first_violation,omitempty"`
}

// stepChecker is a step's checker on the step's bus, as gin/check's
// package doc wires one: every NIC, every backend of every communicator
// the step creates and each communicator's front end; it is not handed the
// fabric's packet events, the NICs' DMA reads or their rate and async
// events (costly or beside its rules: it counts what it is handed).
type stepChecker struct {
	chk *check.Checker
}

func newStepChecker(bus *obs.Bus) *stepChecker {
	sc := &stepChecker{chk: check.New()}
	bus.Subscribe(obs.Func(func(e obs.Event) {
		switch e.Kind {
		case obs.Hop, obs.Dropped, obs.Received, obs.DMARead, obs.Rate, obs.Async:
			return
		}
		sc.chk.Observe(e)
	}))
	return sc
}

// end closes the step's check (the run succeeded) and reports it.
func (sc *stepChecker) end() check.Report {
	sc.chk.End(false)
	return sc.chk.Report()
}

// checkOf sums the steps' reports in step order and names the first
// violation; nil when the replay ran without Check.
func checkOf(outs []stepOut) *CheckReport {
	if len(outs) == 0 || outs[0].check == nil {
		return nil
	}
	cr := &CheckReport{}
	for _, o := range outs {
		cr.Add(*o.check)
		if cr.First == "" && len(o.check.Kept) > 0 {
			cr.First = fmt.Sprintf("iter %d layer %d: %v", o.lr.Iter, o.lr.Layer, &o.check.Kept[0])
		}
	}
	return cr
}
