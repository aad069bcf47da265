package v2

import "github.com/ginsim/ginsim/gin"

// Accessors for the external tests (v2_test), which run the workloads
// through replay.

func ExpectedTopK(e, k, g int) float64 { return expectedTopK(e, k, g) }
func HybridChannels(rec, crec, ranks, experts int, p Params) int {
	return hybridChannels(rec, crec, ranks, experts, p)
}
func QPFor(sms, qps, chPerSM, sm, ch int, withNotify bool) (int, gin.Sharing) {
	return qpFor(sms, qps, chPerSM, sm, ch, withNotify)
}
func CombineBytes(hidden, topK int) int { return combineBytes(hidden, topK) }
func (w *Hybrid) NCh() int              { return w.nch }
func (w *Direct) Rec() int              { return w.rec }
func (w *Direct) CRec() int             { return w.crec }
