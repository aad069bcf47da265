package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// detailRun replays tr with a timeline, with or without its detail, and
// returns the report's JSON and the timeline.
func detailRun(t *testing.T, tr *traces.Trace, mode, backend string, detail bool, jobs int) (string, string) {
	t.Helper()
	spec, _ := machine.Preset("h100-ib")
	var tl bytes.Buffer
	tw := timeline.NewWriter(&tl)
	rep, err := Run(tr, spec, Options{Mode: mode, Backend: backend, Seed: 1, Backends: backends, Jobs: jobs,
		Timeline: tw, TimelineDetail: detail})
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	return string(js), tl.String()
}

type traceEvent struct {
	Ph   string         `json:"ph"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Name string         `json:"name"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Args map[string]any `json:"args"`
}

func parseTimeline(t *testing.T, s string) []traceEvent {
	t.Helper()
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal([]byte(s), &doc))
	return doc.TraceEvents
}

// The timeline detail is deterministic (same run, same bytes; steps at
// once, same bytes), changes nothing in the report, adds to the default
// timeline without changing what it draws, and its tracks hold what they
// say: every wait inside its warp's active slice, every rank with warps
// and busy QPs, each QP's outstanding-WQE counter within what its busy
// slices say.
func TestTimelineDetail(t *testing.T) {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: 16, RanksPerNode: 8, TokensPerRank: 8, Layers: 2, Seed: 3})
	require.NoError(t, err)
	for _, c := range []struct{ mode, backend string }{{ModeLL, BackendGDAKI}, {ModeLL, BackendProxy}, {ModeV2, BackendGDAKI}} {
		t.Run(c.mode+"-"+c.backend, func(t *testing.T) {
			plainRep, plainTL := detailRun(t, tr, c.mode, c.backend, false, 1)
			rep, tl := detailRun(t, tr, c.mode, c.backend, true, 1)
			rep2, tl2 := detailRun(t, tr, c.mode, c.backend, true, 2)
			require.Equal(t, plainRep, rep, "the detail only reads the run")
			require.Equal(t, rep, rep2)
			require.Equal(t, tl, tl2, "same run, same detail bytes whatever the jobs")

			// Every event of the plain timeline is in the detailed one, in order.
			plain, all := parseTimeline(t, plainTL), parseTimeline(t, tl)
			i := 0
			for _, e := range all {
				if i < len(plain) && equalEvent(e, plain[i]) {
					i++
				}
			}
			require.Equal(t, len(plain), i, "the detailed timeline keeps the default one's events in order")

			type track struct{ pid, tid int }
			names := map[track]string{}
			active := map[track][]traceEvent{}
			var waits []traceEvent
			for _, e := range all {
				k := track{e.Pid, e.Tid}
				switch {
				case e.Ph == "M" && e.Name == "thread_name":
					names[k] = e.Args["name"].(string)
				case e.Ph == "X" && strings.HasPrefix(names[k], "warp ") && e.Name == "active":
					active[k] = append(active[k], e)
				case e.Ph == "X" && strings.HasPrefix(names[k], "warp "):
					waits = append(waits, e)
				case e.Ph == "X" && strings.HasPrefix(names[k], "qp "):
					require.Equal(t, "busy", e.Name)
					w, mo := e.Args["wqes"].(float64), e.Args["max_outstanding"].(float64)
					assert.GreaterOrEqual(t, w, mo)
					assert.GreaterOrEqual(t, mo, 1.0)
				}
			}
			require.NotEmpty(t, waits)
			for _, w := range waits {
				in := false
				for _, a := range active[track{w.Pid, w.Tid}] {
					in = in || a.Ts <= w.Ts && w.Ts+w.Dur <= a.Ts+a.Dur+1e-6
				}
				assert.True(t, in, "wait %q at %v on pid %d tid %d outside its warp's active slices", w.Name, w.Ts, w.Pid, w.Tid)
			}
			warps, qps := map[int]int{}, map[int]int{}
			for k, n := range names {
				if strings.HasPrefix(n, "warp ") {
					warps[k.pid]++
				}
				if strings.HasPrefix(n, "qp ") {
					qps[k.pid]++
				}
			}
			for r := range tr.EP() {
				assert.Positive(t, warps[r], "rank %d warps", r)
				assert.Positive(t, qps[r], "rank %d QPs", r)
			}
			// Each QP's counter (one point per instant) peaks at no more
			// than its busy slices' max_outstanding, and is never negative.
			peak, maxOut := map[string]float64{}, map[string]float64{}
			for _, e := range all {
				k := track{e.Pid, e.Tid}
				if e.Ph == "C" && strings.HasSuffix(e.Name, " outstanding WQEs") {
					key := fmt.Sprint(e.Pid, strings.TrimSuffix(e.Name, " outstanding WQEs"))
					v := e.Args["value"].(float64)
					require.GreaterOrEqual(t, v, 0.0)
					peak[key] = max(peak[key], v)
				}
				if e.Ph == "X" && e.Name == "busy" {
					key := fmt.Sprint(e.Pid, names[k])
					maxOut[key] = max(maxOut[key], e.Args["max_outstanding"].(float64))
				}
			}
			require.NotEmpty(t, peak)
			require.Equal(t, len(maxOut), len(peak))
			for k, p := range peak {
				assert.LessOrEqual(t, p, maxOut[k], k)
				assert.GreaterOrEqual(t, p, 1.0, k)
			}
		})
	}
}

func equalEvent(a, b traceEvent) bool {
	if a.Ph != b.Ph || a.Pid != b.Pid || a.Tid != b.Tid || a.Name != b.Name || a.Ts != b.Ts || a.Dur != b.Dur {
		return false
	}
	ja, _ := json.Marshal(a.Args)
	jb, _ := json.Marshal(b.Args)
	return bytes.Equal(ja, jb)
}

// TimelineDetail without a timeline is refused.
func TestTimelineDetailNeedsTimeline(t *testing.T) {
	o := Options{Mode: ModeLL, Backend: BackendGDAKI, TimelineDetail: true}
	require.ErrorContains(t, o.Validate(), "timeline detail")
}
