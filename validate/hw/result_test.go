package hw

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/sim"
)

const sampleResult = `ginhw-result 1
info rank 1 nranks 2 nccl 22809 cuda_driver 13000 cuda_runtime 13000 gpu NVIDIA H200
clock 9000 4000 4900
clock 5000 4000 4010
op 0 wait_signal 1 0 6000 7000
op 1 read_signal 0 3 7100 7200
signal 0 3
counter 0 0
win 0 00000000000000ff
async 0
done ok ok
`

func TestParseResult(t *testing.T) {
	r, err := ParseResult(strings.NewReader(sampleResult), "r1.txt")
	require.NoError(t, err)
	require.Equal(t, 1, r.Rank)
	require.Equal(t, 22809, r.NCCL)
	require.Equal(t, "NVIDIA H200", r.GPU)
	require.Equal(t, []OpResult{{0, "wait_signal", "timeout", 0, 6000, 7000}, {1, "read_signal", "ok", 3, 7100, 7200}}, r.Ops)
	require.Equal(t, []uint64{3}, r.Signals)
	require.Equal(t, []uint64{255}, r.Windows)
	require.True(t, r.Done)
	require.Equal(t, int64(6000-5000+4005), r.ToHost(6000))
}

func TestParseResultErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"hello\n", `f:1: not a ginhw result file`},
		{"ginhw-result 1\nop 0 put 0 0 1\n", `f:2: op line has 5 fields, want 6`},
		{"ginhw-result 1\nop 1 put 0 0 1 2\n", `f:2: field "index": 1 out of order, want 0`},
		{"ginhw-result 1\nop 0 put 7 0 1 2\n", `f:2: field "status": "7"`},
		{"ginhw-result 1\nop 0 put 0 x 1 2\n", `f:2: field "value": "x" is not an unsigned integer`},
		{"ginhw-result 1\nsignal 0 -1\n", `f:2: field "value"`},
		{"ginhw-result 1\nwin 0 zz\n", `f:2: field "fnv64"`},
		{"ginhw-result 1\nclock 1 2\n", `f:2: clock line has 2 fields, want 3`},
		{"ginhw-result 1\nclock 1 5 4\n", `f:2: field "host_hi_ns": 4 before host_lo_ns 5`},
		{"ginhw-result 1\nbogus\n", `f:2: unknown line "bogus"`},
		{"ginhw-result 1\ndone ok\n", `f:2: field "rank": no info line`},
		{"ginhw-result 1\ninfo rank x\n", `f:2: field "rank": "x" is not an integer`},
	} {
		_, err := ParseResult(strings.NewReader(c.text), "f")
		require.ErrorContains(t, err, c.want, c.text)
		var pe *ParseError
		require.True(t, errors.As(err, &pe), c.text)
	}
	_, err := ParseResult(strings.NewReader(""), "f")
	var ee *EmptyError
	require.True(t, errors.As(err, &ee))
}

const sampleTrace = `fabric zero 0 0.000000
connect 0 1 2
reg 0 0 cuda 524288 1
post 0 0 1 4096 1 0 1 1000
pub 0 0 1 1 4096 1100 0
dlv 0 0 7 1 64 3 0 900 2900
fab 0 0 4 2500 2700
nccl-bug inline -122
close 0 1 1
`

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace(strings.NewReader(sampleTrace), "t")
	require.NoError(t, err)
	require.Equal(t, 1, tr.Rank)
	require.Equal(t, []TracePost{{Peer: 0, Bytes: 4096, At: 1000}}, tr.Posts)
	require.Equal(t, []TraceDelivery{{From: 0, Seq: 1, Bytes: 64, Posted: 900, Done: 2900}}, tr.Deliveries)
	require.Equal(t, []TraceModel{{Peer: 0, Seq: 4, Deliver: 2500, Arrived: 2700}}, tr.Model)
	require.Equal(t, 1, tr.Bugged)
	for _, c := range []struct{ text, want string }{
		{"post 0 1\n", "t:1: post line has 2 fields, want 8"},
		{"connect 0 x 2\n", `t:1: field "rank"`},
		{"connect 0 0 2\nconnect 1 1 2\n", `t:2: field "rank": rank 1 after rank 0`},
		{"what\n", `t:1: unknown line "what"`},
		{"fab 0 1 2 3\n", "t:1: fab line has 4 fields, want 5"},
		{"fab 0 1 x 3 4\n", `t:1: field "seq"`},
		{"fab 0 1 2 3 y\n", `t:1: field "arrived_ns"`},
		{"fabric zero 0 0\n", `field "rank": no connect line`},
	} {
		_, err := ParseTrace(strings.NewReader(c.text), "t")
		require.ErrorContains(t, err, c.want, c.text)
	}
}

func FuzzParseResult(f *testing.F) {
	f.Add([]byte(sampleResult))
	f.Add([]byte("ginhw-result 1\ninfo rank 0\nstuck 2 flush\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseResult(strings.NewReader(string(data)), "fuzz")
		if err != nil {
			return
		}
		for i, o := range r.Ops {
			if o.Index != i || (o.Status != "ok" && o.Status != "timeout" && o.Status != "not built") {
				t.Fatalf("op %d: %+v", i, o)
			}
		}
	})
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(sampleTrace))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTrace(strings.NewReader(string(data)), "fuzz")
		if err == nil && tr.Rank < 0 {
			t.Fatalf("trace without a rank accepted")
		}
	})
}

func TestModelFabric(t *testing.T) {
	tr0 := "connect 0 0 2\nfab 0 1 1 1500 1200\nfab 0 1 2 2600 2700\nfab 0 1 9 9000 9000\n"
	tr1 := "connect 0 1 2\ndlv 0 0 5 1 64 1 0 1000 1800\ndlv 0 0 6 2 64 1 0 2000 3000\n"
	var d Device
	for r, s := range []string{tr0, tr1} {
		tr, err := ParseTrace(strings.NewReader(s), "t")
		require.NoError(t, err)
		d.Traces[r] = tr
	}
	m := d.ModelFabric()
	require.Equal(t, 2, m.N, "seq 9 has no delivery")
	require.Equal(t, 1, m.Late)
	require.Equal(t, 550*sim.Nanosecond, m.Model)  // 500, 600
	require.Equal(t, 450*sim.Nanosecond, m.Reply)  // 200, 700
	require.Equal(t, 900*sim.Nanosecond, m.Device) // 800, 1000
	require.Equal(t, 350*sim.Nanosecond, m.Behind) // 300, 400
	require.Zero(t, (&Device{}).ModelFabric().N)
}
