package netemu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{Kind: KindPut, Src: 0, Dst: 1, Seq: 0, Bytes: 1, PostNs: 0},
		{Kind: KindPut, Src: 7, Dst: 3, Seq: 1<<64 - 1, Bytes: MaxBytes, PostNs: -5},
		{Kind: KindPut, Src: 1, Dst: 0, Seq: 42, Bytes: 4096, PostNs: 1 << 62},
	} {
		b := r.Append(nil)
		require.Len(t, b, RequestBytes)
		got, err := DecodeRequest(b)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, r := range []Reply{
		{Status: StatusOK, Src: 0, Dst: 1, Seq: 3, DeliverNs: 123456789},
		{Status: StatusBad, Src: 9, Dst: 9, Seq: 1<<64 - 1, DeliverNs: -1},
	} {
		b := r.Append(nil)
		require.Len(t, b, ReplyBytes)
		got, err := DecodeReply(b)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
}

func TestRequestLayout(t *testing.T) {
	b := Request{Kind: KindPut, Src: 2, Dst: 3, Seq: 0x0102030405060708, Bytes: 16, PostNs: 0x1122}.Append(nil)
	require.Equal(t, []byte{'G', 'F', 'R', 'Q', 1, 0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0,
		8, 7, 6, 5, 4, 3, 2, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0x22, 0x11, 0, 0, 0, 0, 0, 0}, b)
}

func TestDecodeRequestErrors(t *testing.T) {
	good := Request{Kind: KindPut, Src: 0, Dst: 1, Seq: 1, Bytes: 8, PostNs: 1}.Append(nil)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:39], "request of 39 bytes, want 40"},
		{"long", append(append([]byte(nil), good...), 0), "request of 41 bytes, want 40"},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), "request magic"},
		{"reply", Reply{}.Append(append([]byte(nil), good[:8]...))[8:], "request of 32 bytes"},
		{"version", mut(func(b []byte) []byte { b[4] = 2; return b }), "request version 2, want 1"},
		{"kind", mut(func(b []byte) []byte { b[6] = 9; return b }), "request kind 9, want 1"},
		{"zero bytes", mut(func(b []byte) []byte { clear(b[24:32]); return b }), "request bytes 0 out of"},
		{"huge", mut(func(b []byte) []byte { b[31] = 1; return b }), "out of [1, 1048576]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequest(c.b)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestDecodeReplyErrors(t *testing.T) {
	good := Reply{Status: StatusOK, Seq: 1}.Append(nil)
	bad := append([]byte(nil), good...)
	bad[6] = 7
	_, err := DecodeReply(bad)
	require.ErrorContains(t, err, "reply status 7 unknown")
	_, err = DecodeReply(good[:31])
	require.ErrorContains(t, err, "reply of 31 bytes, want 32")
	_, err = DecodeReply(Request{Kind: KindPut, Bytes: 1}.Append(nil)[:32])
	require.ErrorContains(t, err, "reply magic")
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(Request{Kind: KindPut, Src: 0, Dst: 1, Seq: 1, Bytes: 8, PostNs: 1}.Append(nil))
	f.Add([]byte("GFRQ"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		require.Equal(t, b, r.Append(nil), "a decoded request encodes back to its bytes")
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add(Reply{Status: StatusOK, Src: 0, Dst: 1, Seq: 1, DeliverNs: 9}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReply(b)
		if err != nil {
			return
		}
		require.Equal(t, b, r.Append(nil))
	})
}
