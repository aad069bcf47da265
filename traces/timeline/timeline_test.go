package timeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimelineGolden(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Process(1, "node0/gpu0")
	w.Thread(1, 2, "warp \"0\"")
	w.Slice(1, 2, "put", "gin", sim.Time(1500*sim.Nanosecond+7), 2*sim.Microsecond,
		Arg{"bytes", 7408}, Arg{"peer", "rank3"}, Arg{"ok", true}, Arg{"d", sim.Duration(3 * sim.Nanosecond)})
	w.Instant(1, 2, "doorbell", "nic", sim.Time(2*sim.Microsecond))
	w.Counter(1, "inflight", sim.Time(sim.Microsecond), 3)
	w.Flow(9, "wqe", 1, 2, sim.Time(sim.Microsecond), 1, 3, sim.Time(4*sim.Microsecond))
	require.NoError(t, w.Close())
	want := `{"displayTimeUnit":"ns","traceEvents":[
{"ph":"M","pid":1,"tid":0,"name":"process_name","args":{"name":"node0/gpu0"}},
{"ph":"M","pid":1,"tid":0,"name":"process_sort_index","args":{"sort_index":1}},
{"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"warp \"0\""}},
{"ph":"M","pid":1,"tid":2,"name":"thread_sort_index","args":{"sort_index":2}},
{"ph":"X","pid":1,"tid":2,"name":"put","cat":"gin","ts":1.500007,"dur":2.000000,"args":{"bytes":7408,"peer":"rank3","ok":true,"d":"3ns"}},
{"ph":"i","pid":1,"tid":2,"name":"doorbell","cat":"nic","ts":2.000000,"s":"t"},
{"ph":"C","pid":1,"tid":0,"name":"inflight","ts":1.000000,"args":{"value":3}},
{"ph":"s","pid":1,"tid":2,"name":"wqe","cat":"flow","id":9,"ts":1.000000},
{"ph":"f","pid":1,"tid":3,"name":"wqe","cat":"flow","id":9,"ts":4.000000,"bp":"e"}
]}
`
	assert.Equal(t, want, b.String())
	var v map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &v), "output must be valid JSON")
	assert.Len(t, v["traceEvents"], 9)
	assert.Equal(t, 9, w.Events())
}

func TestTimelineEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, NewWriter(&b).Close())
	var v map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &v))
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestTimelineError(t *testing.T) {
	w := NewWriter(failWriter{})
	for i := range 10000 {
		w.Slice(0, 0, "x", "", sim.Time(i), 1)
	}
	assert.EqualError(t, w.Close(), "disk full")
}

func TestTS(t *testing.T) {
	assert.Equal(t, "0.000001", ts(1))
	assert.Equal(t, "-1.000000", ts(-1000000))
	assert.Equal(t, "12.345678", ts(12345678))
}

func TestCounterTrack(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Process(3, "resources")
	us := func(n int64) sim.Time { return sim.Time(n * int64(sim.Microsecond)) }
	w.CounterTrack(3, "n0/gpu0 pcie up util", []Point{{us(0), 0}, {us(1), 0.5}, {us(2), 0.5}, {us(3), 0.25}, {us(4), 0.25}})
	w.CounterSeries(3, "n0g0/nic0 util", us(1), Arg{"tx", 0.9}, Arg{"rx", 0.1})
	require.NoError(t, w.Close())
	var v struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Name string         `json:"name"`
			Ts   float64        `json:"ts"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &v))
	var got []string
	for _, e := range v.TraceEvents {
		if e.Ph != "C" {
			continue
		}
		assert.Equal(t, 3, e.Pid)
		got = append(got, fmt.Sprintf("%s@%g=%v", e.Name, e.Ts, e.Args))
	}
	// The repeated 0.5 at 2 us is dropped; the last point is kept so the
	// track ends where the samples end.
	assert.Equal(t, []string{
		"n0/gpu0 pcie up util@0=map[value:0]",
		"n0/gpu0 pcie up util@1=map[value:0.5]",
		"n0/gpu0 pcie up util@3=map[value:0.25]",
		"n0/gpu0 pcie up util@4=map[value:0.25]",
		"n0g0/nic0 util@1=map[rx:0.1 tx:0.9]",
	}, got)
	assert.Panics(t, func() { NewWriter(&b).CounterTrack(1, "x", []Point{{us(2), 1}, {us(1), 1}}) })
}
