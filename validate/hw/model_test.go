package hw

import (
	"errors"
	"hash/fnv"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/sim"
)

func testCase(t *testing.T, name string) Case {
	t.Helper()
	cs, err := Load("testdata/programs/" + name + ".json")
	require.NoError(t, err)
	return cs[0]
}

func pattern(rank, win int) uint64 {
	b := make([]byte, WindowBytes)
	for i := range b {
		b[i] = byte(rank*31 + win*7 + i)
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func TestModelPutSignal(t *testing.T) {
	c := testCase(t, "put_signal")
	out, err := Model(c, "h100-ib", gin.V2_28)
	require.NoError(t, err)
	require.Empty(t, out.Err)
	r0, r1 := out.Ranks[0], out.Ranks[1]
	require.True(t, r0.Finished && r1.Finished)
	require.Equal(t, []uint64{1}, r1.Signals)
	require.Equal(t, uint64(1), r1.Ops[1].Value) // read_signal after the wait
	require.Equal(t, pattern(0, 0), r0.Windows[0], "rank 0's window is not written")
	require.NotEqual(t, pattern(1, 0), r1.Windows[0], "rank 1's window received the put")
	require.Greater(t, r0.Ops[0].Post, r0.Ops[0].End, "the proxy posts after the GPU wrote the descriptor")
	require.Greater(t, r1.Ops[0].End, sim.Duration(0))

	again, err := Model(c, "h100-ib", gin.V2_28)
	require.NoError(t, err)
	require.Equal(t, out, again, "same programs, same outcome")
}

func TestModelSelfAndRejections(t *testing.T) {
	// A put to the rank itself goes through its loop-back connection,
	// as NCCL's proxy GIN does (it once was a model gap).
	self, err := Model(testCase(t, "self_put_signal_loop"), "h100-ib", gin.V2_28)
	require.NoError(t, err)
	require.Empty(t, self.Err)

	out, err := Model(testCase(t, "signal_inc_add_mixed"), "h100-ib", gin.V2_28)
	require.NoError(t, err)
	require.Contains(t, out.Err, "SignalInc mixed with SignalAdd")

	_, err = Model(testCase(t, "put_signal"), "h200-nvl", gin.V2_28)
	require.ErrorContains(t, err, "has one node")
}

func TestCompare(t *testing.T) {
	base := func() *Outcome {
		o := &Outcome{}
		o.Ranks[0] = RankOutcome{Finished: true, Signals: []uint64{0}, Windows: []uint64{7},
			Ops: []OpOutcome{{Kind: "put", Status: "ok", Post: -1}}}
		o.Ranks[1] = RankOutcome{Finished: true, Signals: []uint64{1}, Counters: []uint64{0}, Windows: []uint64{9},
			Ops: []OpOutcome{{Kind: "wait_signal", Status: "ok", Value: 1}, {Kind: "read_signal", Status: "ok", Value: 1}}}
		return o
	}
	require.Empty(t, Compare(base(), base()))
	dev := base()
	dev.Ranks[1].Ops[0] = OpOutcome{Kind: "wait_signal", Status: "timeout", Value: 0}
	dev.Ranks[1].Ops[1].Value = 0
	dev.Ranks[1].Signals[0] = 0
	dev.Ranks[0].Windows[0] = 8
	dev.Ranks[0].Finished = false
	var got []string
	for _, d := range Compare(base(), dev) {
		got = append(got, d.String())
	}
	require.Equal(t, []string{
		"rank 0: finished: model true, device false",
		"rank 0: window 0 content differs (fnv 0000000000000007 vs 0000000000000008)",
		"rank 1: op 0 wait_signal: model ok (1), device timeout (0)",
		"rank 1: op 1 read_signal: model read 1, device 0",
		"rank 1: signal 0: model 1, device 0",
	}, got)
}

func TestTimings(t *testing.T) {
	us := func(x int) sim.Duration { return sim.Duration(x) * sim.Microsecond }
	mk := func(scale int) *Outcome {
		o := &Outcome{}
		for i := range 3 {
			at := us(100 * i)
			o.Ranks[0].Ops = append(o.Ranks[0].Ops,
				OpOutcome{Kind: "put", Status: "ok", Start: at, End: at + us(scale), Post: at + us(2*scale)},
				OpOutcome{Kind: "wait_signal", Status: "ok", Start: at + us(scale), End: at + us(10*scale+i)})
		}
		return o
	}
	got := Timings(mk(1), mk(3))
	require.Equal(t, []Timing{
		{Name: "GFD op issue on the GPU", N: 3, Model: us(1), Device: us(3)},
		{Name: "op start -> proxy post", N: 3, Model: us(2), Device: us(6)},
		{Name: "GFD written -> proxy post", N: 3, Model: us(1), Device: us(3)},
		{Name: "op start -> signal seen", N: 3, Model: us(11), Device: us(31)},
	}, got)
	require.InDelta(t, 3.0, got[0].Ratio(), 1e-9)
	require.Zero(t, Timings(nil, mk(3))[0].Model)
}

// The committed device run agrees with the model on every program both
// can run, except where NCCL 2.28.9's putValue bug shows.
func TestCommittedRunAgrees(t *testing.T) {
	fsys, err := Measured(DefaultRun)
	require.NoError(t, err)
	cases, err := Load("testdata/programs")
	require.NoError(t, err)
	compared := 0
	for _, c := range cases {
		model, err := Model(c, "h100-ib", gin.V2_28)
		require.NoError(t, err, c.Name)
		d, err := LoadDevice(fsys, c.Name, "zero")
		if errors.Is(err, fs.ErrNotExist) {
			continue // a program newer than the run
		}
		require.NoError(t, err, c.Name)
		dev, err := d.Outcome(c)
		require.NoError(t, err, c.Name)
		if model.Err != "" {
			continue
		}
		compared++
		diffs := Compare(model, dev)
		if c.Name == "put_value_signal" {
			require.NotEmpty(t, dev.Notes, "the plugin saw NCCL's bug")
			require.Contains(t, dev.Notes[0], "putValue bug")
			require.Len(t, diffs, 3, "the wait, the read and the signal")
			continue
		}
		require.Empty(t, diffs, c.Name)
	}
	require.GreaterOrEqual(t, compared, 8)
}
