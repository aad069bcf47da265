package hw

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/prog"
)

func file(t *testing.T, doc string) *prog.File {
	t.Helper()
	f, err := prog.Decode([]byte(doc))
	require.NoError(t, err)
	return f
}

func TestLower(t *testing.T) {
	f := file(t, `{"format":1,"nccl":"2.28","programs":[
	 {"rank":0,"group":"a","threads":1,"ops":[
	  {"op":"put","team":"world","peer":1,"dst":"recv","dst_off":64,"src":"send","src_off":8,"bytes":32,"remote":{"kind":"add","id":2,"value":5},"counter":1},
	  {"op":"put_value","team":"rail","peer":1,"dst":"send","dst_off":16,"value":7,"size":8,"remote":{"kind":"inc","id":0}},
	  {"op":"signal","team":"world","peer":1,"remote":{"kind":"inc","id":3}},
	  {"op":"flush"},
	  {"op":"compute","ps":1500},
	  {"op":"barrier","kind":"rail_gin","index":1,"order":"release"}]},
	 {"rank":1,"group":"b","threads":32,"ops":[
	  {"op":"wait_signal","id":2,"least":5,"bits":32},
	  {"op":"wait_counter","id":0,"least":1},
	  {"op":"reset_signal","id":3}]}]}`)
	got, s, err := Lower(f)
	require.NoError(t, err)
	require.Equal(t, Setup{Windows: []string{"recv", "send"}, Signals: 4, Counters: 2, RailBarriers: 2}, s)
	require.Equal(t, `ginhw-ops 1
win 0 1048576 recv
win 1 1048576 send
signals 4
counters 2
barriers 2
program 0 1 a
op put 1 0 64 1 8 32 2 2 5 1 0 0 0 0 0 0
op put_value 1 1 16 -1 0 0 1 0 0 -1 0 0 0 8 7 0
op signal 1 -1 0 -1 0 0 1 3 0 -1 0 0 0 0 0 0
op flush 0 -1 0 -1 0 0 0 0 0 -1 0 0 0 0 0 0
op sleep 0 -1 0 -1 0 0 0 0 0 -1 0 0 0 0 0 2
op barrier_rail 0 -1 0 -1 0 0 0 0 0 -1 1 2 0 0 0 0
program 1 32 b
op wait_signal 0 -1 0 -1 0 0 0 0 0 -1 2 5 32 0 0 0
op wait_counter 0 -1 0 -1 0 0 0 0 0 -1 0 1 0 0 0 0
op reset_signal 0 -1 0 -1 0 0 0 0 0 -1 3 0 0 0 0 0
end
`, string(got))
}

func TestLowerUnsupported(t *testing.T) {
	head := `{"format":1,"nccl":"2.30","programs":[{"rank":0,"group":"g","threads":1,"ops":[`
	for _, c := range []struct{ ops, field, msg string }{
		{`{"op":"get","team":"world","src":"w","dst":"w"}`, "op", "get is not run on the device"},
		{`{"op":"flush","ctx":1}`, "ctx", "context 0 only"},
		{`{"op":"signal","team":"lsa","remote":{"kind":"inc"}}`, "team", "LSA team"},
		{`{"op":"signal","team":"world","peer":2,"remote":{"kind":"inc"}}`, "peer", "peer 2 of 2"},
		{`{"op":"signal","team":"world","remote":{"kind":"va_inc","win":"w"}}`, "remote.kind", "VA signals"},
		{`{"op":"signal","team":"world","remote":{"kind":"inc","weak":true}}`, "remote.weak", "weak"},
		{`{"op":"signal","team":"world","remote":{"kind":"inc"},"flags":["aggregate"]}`, "flags", "not passed"},
		{`{"op":"put_value","team":"world","dst":"w","size":4}`, "size", "8 bytes only"},
		{`{"op":"put","team":"world","dst":"w","src":"w","dst_off":1048000,"bytes":1000}`, "dst_off", "outside the 1048576-byte window"},
		{`{"op":"put","team":"world","dst":"w","src":"w","src_off":18446744073709551615,"bytes":2}`, "src_off", "outside"},
		{`{"op":"barrier","kind":"world_gin"}`, "kind", "world_gin barriers"},
		{`{"op":"barrier","kind":"rail_gin","fence":["put"]}`, "fence", "relaxed"},
		{`{"op":"barrier","kind":"rail_gin","all":true}`, "all", "one context"},
	} {
		_, _, err := Lower(file(t, head+c.ops+`]}]}`))
		var ue *UnsupportedError
		require.True(t, errors.As(err, &ue), "%s: %v", c.ops, err)
		require.Equal(t, 0, ue.Op, c.ops)
		require.Equal(t, c.field, ue.Field, c.ops)
		require.Contains(t, ue.Error(), c.msg, c.ops)
	}
	for _, c := range []struct{ doc, field string }{
		{`{"format":1,"nccl":"2.28","programs":[{"rank":2,"group":"g","threads":1,"ops":[]}]}`, "rank"},
		{`{"format":1,"nccl":"2.28","programs":[{"rank":0,"group":"g","threads":1,"ops":[]},{"rank":0,"group":"h","threads":1,"ops":[]}]}`, "rank"},
	} {
		_, err := SetupOf(file(t, c.doc))
		var ue *UnsupportedError
		require.True(t, errors.As(err, &ue), c.doc)
		require.Equal(t, c.field, ue.Field)
		require.Equal(t, -1, ue.Op)
	}
}

// Every committed program lowers, and windows, signals and counters cover
// what the ops name.
func TestLowerTestdata(t *testing.T) {
	cases, err := Load("testdata/programs")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 8)
	for _, c := range cases {
		_, s, err := Lower(c.File)
		require.NoError(t, err, c.Name)
		require.NotZero(t, s.Signals, c.Name)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/nope")
	require.ErrorContains(t, err, "testdata/nope")
	dir := t.TempDir()
	_, err = Load(dir)
	require.ErrorContains(t, err, "no *.json program files")
}
