package verbs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []Hello{
		{Case: CaseWriteLat, Iters: 1000, TxDepth: 128, Sizes: []int64{8, 4096, 1 << 20}},
		{Case: CaseAtomicLat, Iters: 1, TxDepth: 1, Sizes: []int64{8}},
		{Case: CaseWriteBW, Iters: 5000, TxDepth: 8192, Sizes: []int64{1 << 30}},
	} {
		b, err := AppendHello(nil, h)
		require.NoError(t, err)
		n, err := HelloLen(b[:helloFixed])
		require.NoError(t, err)
		assert.Len(t, b, n)
		got, err := ParseHello(b)
		require.NoError(t, err)
		assert.Equal(t, h, got)
	}
}

func TestHelloErrors(t *testing.T) {
	good, err := AppendHello(nil, Hello{Case: CaseWriteLat, Iters: 10, TxDepth: 1, Sizes: []int64{8}})
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
		want string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "magic"},
		{"version", func(b []byte) []byte { b[4] = 9; return b }, "version 9"},
		{"case", func(b []byte) []byte { b[5] = 7; return b }, "field case"},
		{"no sizes", func(b []byte) []byte { b[7] = 0; return b }, "field sizes"},
		{"size 0", func(b []byte) []byte { b[len(b)-1] = 0; return b }, "size 0"},
		{"iters 0", func(b []byte) []byte { b[11] = 0; return b }, "iters"},
		{"short", func(b []byte) []byte { return b[:len(b)-1] }, "want 24"},
	} {
		b := c.edit(append([]byte(nil), good...))
		_, err := ParseHello(b)
		assert.ErrorContains(t, err, c.want, c.name)
	}
	_, err = AppendHello(nil, Hello{Case: "read_lat", Sizes: []int64{8}})
	assert.ErrorContains(t, err, "read_lat")
}

func TestInfoRoundTrip(t *testing.T) {
	i := Info{QPN: 0x1234, PSN: 0xabcdef, RKey: 0xdeadbeef, Addr: 0x7f0000001000, LID: 7, MTU: 5, Port: 1}
	i.GID[10], i.GID[11], i.GID[15] = 0xff, 0xff, 2
	b := AppendInfo(nil, i)
	require.Len(t, b, InfoLen)
	got, err := ParseInfo(b)
	require.NoError(t, err)
	assert.Equal(t, i, got)
	for _, c := range []struct {
		off  int
		v    byte
		want string
	}{{0, 'x', "magic"}, {4, 1, "field qpn"}, {8, 1, "field psn"}, {26, 9, "field mtu"}} {
		bad := append([]byte(nil), b...)
		bad[c.off] = c.v
		_, err := ParseInfo(bad)
		assert.ErrorContains(t, err, c.want)
	}
}

// FuzzParse feeds arbitrary bytes to both decoders: no panic, and what
// decodes re-encodes to the same bytes.
func FuzzParse(f *testing.F) {
	h, _ := AppendHello(nil, Hello{Case: CaseWriteBW, Iters: 100, TxDepth: 64, Sizes: []int64{8, 65536}})
	f.Add(h)
	f.Add(AppendInfo(nil, Info{QPN: 9, Addr: 4096, MTU: 3, Port: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := ParseHello(b); err == nil {
			again, err := AppendHello(nil, h)
			require.NoError(t, err)
			require.Equal(t, b, again)
		}
		if i, err := ParseInfo(b); err == nil {
			require.Equal(t, b, AppendInfo(nil, i))
		}
	})
}
