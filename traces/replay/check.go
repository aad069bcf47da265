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

// recordCheck, when set (by a benchmark), records every event the
// checker sees.
var recordCheck obs.Observer

func newStepChecker(bus *obs.Bus) *stepChecker {
	sc := &stepChecker{chk: check.New()}
	rec := recordCheck
	bus.Subscribe(obs.Func(func(e obs.Event) {
		switch e.Kind {
		case obs.Hop, obs.Dropped, obs.Received, obs.DMARead, obs.Rate, obs.Async:
			return
		}
		if rec != nil {
			rec.Observe(e)
		}
		sc.chk.Observe(e)
	}))
	return sc
}

// end closes the step's check and reports it. The step's simulation
// stopped when the combine phase's last receiver was done, with work
// possibly in flight (HT's trailing credit signals): what had not taken
// effect then is counted (Report.Live), not judged lost.
func (sc *stepChecker) end() check.Report {
	sc.chk.Cut()
	return sc.chk.Report()
}

// failed adds to the error of a step that failed what the checker found
// (nil sc: no check): a broken model often makes the run fail (a deadlock,
// a reset race) after the breach. drained says the simulation ran out of
// events (a deadlock): then ops the NIC completed but never carried out
// are judged lost (check.Checker.Drained).
func (sc *stepChecker) failed(err error, drained bool) error {
	if sc == nil {
		return err
	}
	if drained {
		sc.chk.Drained()
	} else {
		sc.chk.End(true)
	}
	if cerr := sc.chk.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", err, cerr)
	}
	return err
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
