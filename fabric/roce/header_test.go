package roce

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// headerCase is one opcode family case: a header and its exact encoding.
type headerCase struct {
	name string
	h    Header
	hex  string // expected encoding, spaces ignored
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// headerCases covers every opcode with the fields its headers carry; the
// encodings were written out by hand from the IBTA header layouts.
var headerCases = []headerCase{
	{"send first", Header{Opcode: OpSendFirst, PKey: DefaultPKey, DestQP: 0x12, PSN: 1},
		"00 00 ffff 00 000012 00 000001"},
	{"send middle", Header{Opcode: OpSendMiddle, PKey: DefaultPKey, DestQP: 0x12, PSN: 2},
		"01 00 ffff 00 000012 00 000002"},
	{"send last", Header{Opcode: OpSendLast, PKey: DefaultPKey, DestQP: 0x12, PSN: 3, AckReq: true, PadCount: 1},
		"02 10 ffff 00 000012 80 000003"},
	{"send last imm", Header{Opcode: OpSendLastImm, SE: true, PKey: DefaultPKey, DestQP: 0x12, PSN: 4, AckReq: true, Imm: 0xCAFEF00D},
		"03 80 ffff 00 000012 80 000004 cafef00d"},
	{"send only", Header{Opcode: OpSendOnly, PKey: 0x8001, DestQP: 0xFFFFFF, PSN: 0xFFFFFF},
		"04 00 8001 00 ffffff 00 ffffff"},
	{"send only imm all flags", Header{Opcode: OpSendOnlyImm, SE: true, MigReq: true, PadCount: 2, PKey: DefaultPKey,
		FECN: true, BECN: true, DestQP: 1, AckReq: true, PSN: 2, Imm: 0xDEADBEEF},
		"05 e0 ffff c0 000001 80 000002 deadbeef"},
	{"write first", Header{Opcode: OpWriteFirst, PKey: DefaultPKey, DestQP: 0x12, PSN: 5,
		VA: 0x1122334455667788, RKey: 0xAABBCCDD, DMALen: 0x3000},
		"06 00 ffff 00 000012 00 000005 1122334455667788 aabbccdd 00003000"},
	{"write middle", Header{Opcode: OpWriteMiddle, PKey: DefaultPKey, DestQP: 0x12, PSN: 6},
		"07 00 ffff 00 000012 00 000006"},
	{"write last", Header{Opcode: OpWriteLast, PKey: DefaultPKey, DestQP: 0x12, PSN: 7, AckReq: true},
		"08 00 ffff 00 000012 80 000007"},
	{"write last imm", Header{Opcode: OpWriteLastImm, PKey: DefaultPKey, DestQP: 0x12, PSN: 8, AckReq: true, Imm: 7},
		"09 00 ffff 00 000012 80 000008 00000007"},
	{"write only", Header{Opcode: OpWriteOnly, PKey: DefaultPKey, DestQP: 0x12, PSN: 9, AckReq: true,
		VA: 0x7F0000001000, RKey: 0x1234, DMALen: 64},
		"0a 00 ffff 00 000012 80 000009 00007f0000001000 00001234 00000040"},
	{"write only imm", Header{Opcode: OpWriteOnlyImm, PKey: DefaultPKey, DestQP: 0x12, PSN: 10, AckReq: true,
		VA: 0x2000, RKey: 0x55, DMALen: 8, Imm: 0x01020304},
		"0b 00 ffff 00 000012 80 00000a 0000000000002000 00000055 00000008 01020304"},
	{"read request", Header{Opcode: OpReadRequest, PKey: DefaultPKey, DestQP: 0x34, PSN: 0x100, AckReq: true,
		VA: 0xABCDEF0000, RKey: 0x99, DMALen: 0x10000},
		"0c 00 ffff 00 000034 80 000100 000000abcdef0000 00000099 00010000"},
	{"read resp first", Header{Opcode: OpReadRespFirst, PKey: DefaultPKey, DestQP: 0x56, PSN: 0x100,
		Syndrome: AckSyndrome(CreditsUnlimited), MSN: 3},
		"0d 00 ffff 00 000056 00 000100 1f000003"},
	{"read resp middle", Header{Opcode: OpReadRespMiddle, PKey: DefaultPKey, DestQP: 0x56, PSN: 0x101},
		"0e 00 ffff 00 000056 00 000101"},
	{"read resp last", Header{Opcode: OpReadRespLast, PKey: DefaultPKey, DestQP: 0x56, PSN: 0x102,
		Syndrome: AckSyndrome(CreditsUnlimited), MSN: 4},
		"0f 00 ffff 00 000056 00 000102 1f000004"},
	{"read resp only", Header{Opcode: OpReadRespOnly, PKey: DefaultPKey, DestQP: 0x56, PSN: 0x103, PadCount: 3,
		Syndrome: AckSyndrome(5), MSN: 5},
		"10 30 ffff 00 000056 00 000103 05000005"},
	{"ack", Header{Opcode: OpAck, PKey: DefaultPKey, DestQP: 0xABCDEF, PSN: 0x123456,
		Syndrome: AckSyndrome(CreditsUnlimited), MSN: 7},
		"11 00 ffff 00 abcdef 00 123456 1f000007"},
	{"nak seq error", Header{Opcode: OpAck, PKey: DefaultPKey, DestQP: 1, PSN: 9,
		Syndrome: NakSyndrome(NakPSNSeqError), MSN: 2},
		"11 00 ffff 00 000001 00 000009 60000002"},
	{"rnr nak", Header{Opcode: OpAck, PKey: DefaultPKey, DestQP: 1, PSN: 9, Syndrome: RNRNakSyndrome(14), MSN: 2},
		"11 00 ffff 00 000001 00 000009 2e000002"},
	{"atomic ack", Header{Opcode: OpAtomicAck, PKey: DefaultPKey, DestQP: 3, PSN: 9,
		Syndrome: AckSyndrome(CreditsUnlimited), MSN: 4, OrigData: 0x0102030405060708},
		"12 00 ffff 00 000003 00 000009 1f000004 0102030405060708"},
	{"cmp swap", Header{Opcode: OpCmpSwap, PKey: DefaultPKey, DestQP: 3, PSN: 10, AckReq: true,
		VA: 0x8000, RKey: 0x42, SwapAdd: 1, Compare: 0},
		"13 00 ffff 00 000003 80 00000a 0000000000008000 00000042 0000000000000001 0000000000000000"},
	{"fetch add", Header{Opcode: OpFetchAdd, PKey: DefaultPKey, DestQP: 3, PSN: 11, AckReq: true,
		VA: 0x8008, RKey: 0x42, SwapAdd: 0xFFFFFFFFFFFFFFFF},
		"14 00 ffff 00 000003 80 00000b 0000000000008008 00000042 ffffffffffffffff 0000000000000000"},
	{"cnp", Header{Opcode: OpCNP, PKey: DefaultPKey, BECN: true, DestQP: 0x118},
		"81 00 ffff 40 000118 00 000000 00000000000000000000000000000000"},
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, tc := range headerCases {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.hex)
			require.Equal(t, len(want), tc.h.Len())
			buf := make([]byte, 128)
			for i := range buf {
				buf[i] = 0xA5 // Encode must overwrite every byte it claims
			}
			n, err := tc.h.Encode(buf)
			require.NoError(t, err)
			require.Equal(t, len(want), n)
			assert.Equal(t, want, buf[:n])
			assert.Equal(t, byte(0xA5), buf[n], "wrote past Len")

			// Decode with trailing payload bytes present.
			got, m, err := DecodeHeader(buf)
			require.NoError(t, err)
			assert.Equal(t, n, m)
			assert.Equal(t, tc.h, got)

			// Every truncation fails cleanly.
			for k := range n {
				_, _, err := DecodeHeader(want[:k])
				require.ErrorIs(t, err, ErrShort, "len %d", k)
				_, err = tc.h.Encode(make([]byte, k))
				require.ErrorIs(t, err, ErrShort, "len %d", k)
			}
		})
	}
}

func TestHeaderLen(t *testing.T) {
	want := map[Opcode]int{
		OpSendFirst: 12, OpSendMiddle: 12, OpSendLast: 12, OpSendLastImm: 16, OpSendOnly: 12, OpSendOnlyImm: 16,
		OpWriteFirst: 28, OpWriteMiddle: 12, OpWriteLast: 12, OpWriteLastImm: 16, OpWriteOnly: 28, OpWriteOnlyImm: 32,
		OpReadRequest: 28, OpReadRespFirst: 16, OpReadRespMiddle: 12, OpReadRespLast: 16, OpReadRespOnly: 16,
		OpAck: 16, OpAtomicAck: 24, OpCmpSwap: 40, OpFetchAdd: 40, OpCNP: 28,
	}
	for i := range 256 {
		h := Header{Opcode: Opcode(i)}
		assert.Equal(t, want[h.Opcode], h.Len(), "%v", h.Opcode)
	}
}

func TestHeaderIgnoresFieldsOfAbsentHeaders(t *testing.T) {
	h := Header{Opcode: OpWriteMiddle, PKey: DefaultPKey, DestQP: 1, PSN: 2,
		VA: 1, RKey: 2, DMALen: 3, Syndrome: 4, MSN: 5, SwapAdd: 6, Compare: 7, OrigData: 8, Imm: 9}
	var b [BTHLen]byte
	n, err := h.Encode(b[:])
	require.NoError(t, err)
	got, m, err := DecodeHeader(b[:n])
	require.NoError(t, err)
	assert.Equal(t, BTHLen, m)
	assert.Equal(t, Header{Opcode: OpWriteMiddle, PKey: DefaultPKey, DestQP: 1, PSN: 2}, got)
}

func TestHeaderErrors(t *testing.T) {
	var buf [64]byte
	bad := []struct {
		name string
		h    Header
		err  error
	}{
		{"unknown opcode", Header{Opcode: 0x15}, ErrOpcode},
		{"UD send", Header{Opcode: 0x64}, ErrOpcode},
		{"pad", Header{Opcode: OpSendOnly, PadCount: 4}, ErrField},
		{"qp", Header{Opcode: OpSendOnly, DestQP: 1 << 24}, ErrField},
		{"psn", Header{Opcode: OpSendOnly, PSN: 1 << 24}, ErrField},
		{"msn", Header{Opcode: OpAck, MSN: 1 << 24}, ErrField},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.h.Encode(buf[:])
			assert.ErrorIs(t, err, tc.err)
			assert.ErrorIs(t, tc.h.Validate(), tc.err)
		})
	}

	// Decoding: unknown opcode, nonzero TVer; reserved bits are ignored.
	b := unhex(t, "15 00 ffff 00 000012 00 000001")
	_, _, err := DecodeHeader(b)
	assert.ErrorIs(t, err, ErrOpcode)
	b = unhex(t, "04 01 ffff 00 000012 00 000001")
	_, _, err = DecodeHeader(b)
	assert.ErrorIs(t, err, ErrTVer)
	b = unhex(t, "04 00 ffff 3f 000012 7f 000001")
	h, _, err := DecodeHeader(b)
	require.NoError(t, err)
	assert.Equal(t, Header{Opcode: OpSendOnly, PKey: 0xFFFF, DestQP: 0x12, PSN: 1}, h)
	assert.True(t, errors.Is(err, nil))
}

// TestHeaderIsPlainValue guards the contract the fabric relies on: Header is
// copied inside every simulated packet, so it must stay a small comparable
// value with no pointers, slices, maps or strings.
func TestHeaderIsPlainValue(t *testing.T) {
	typ := reflect.TypeOf(Header{})
	assert.True(t, typ.Comparable())
	assert.LessOrEqual(t, typ.Size(), uintptr(80))
	for i := range typ.NumField() {
		switch k := typ.Field(i).Type.Kind(); k {
		case reflect.Bool, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			t.Errorf("field %s has kind %v", typ.Field(i).Name, k)
		}
	}
}
