package verify

import "github.com/ginsim/ginsim/gin"

// WindowBytes is the size of every test's window "buf" (sources in the
// first 2 MiB, put destinations from 2 MiB).
const WindowBytes = winLen

// Pattern returns rank r's initial window bytes: byte i is
// i*7 + r*101 + 13 + i>>11 (mod 256). Another backend that runs a test's
// program (the device, validate/hw) fills its windows the same way so
// that Allowed can judge what its reads return.
func Pattern(r int) []byte { return pattern(r) }

// Judge is the suite's verdict on one outcome of t: bad is a broken
// guarantee or an unreported rule (or, for any kind but Rule, the run's
// error); surprise is true when a non-guarantee's surprising outcome
// appeared.
func (t *Test) Judge(o *Outcome) (bad error, surprise bool) {
	v := (&Runner{}).judge(t, o)
	return v.bad, v.surprise
}

// Model runs t's program once on the model (backend b, version v, under
// schedule s) and returns its outcome, as the suite's runner does for
// each schedule.
func (t *Test) Model(b string, v gin.Version, s Schedule) *Outcome {
	r := NewRunner(Options{})
	return r.exec(t, t.Program(v, b), b, v, s)
}
