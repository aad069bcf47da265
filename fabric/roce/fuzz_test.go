package roce

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// canonical returns the transport header bytes as Encode would write them
// after decoding: TVer was checked, reserved bits and CNP padding cleared.
func canonical(b []byte, o Opcode) []byte {
	c := append([]byte(nil), b...)
	c[4] &= 0xC0 // FECN, BECN; Resv6 cleared
	c[8] &= 0x80 // AckReq; Resv7 cleared
	if o.IsCNP() {
		clear(c[BTHLen:])
	}
	return c
}

func FuzzDecodeHeader(f *testing.F) {
	for _, tc := range headerCases {
		b := unhex(f, tc.hex)
		f.Add(b)
		f.Add(append(b, 1, 2, 3)) // with trailing payload
	}
	f.Add([]byte{})
	f.Add([]byte{0x04, 0x0F, 0xFF, 0xFF, 0x3F, 0, 0, 1, 0x7F, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := DecodeHeader(b)
		if err != nil {
			require.Zero(t, n)
			return
		}
		require.Equal(t, h.Len(), n)
		require.LessOrEqual(t, n, len(b))
		require.NoError(t, h.Validate())
		out := make([]byte, n)
		m, err := h.Encode(out)
		require.NoError(t, err)
		require.Equal(t, n, m)
		require.Equal(t, canonical(b[:n], h.Opcode), out)
		h2, n2, err := DecodeHeader(out)
		require.NoError(t, err)
		require.Equal(t, n, n2)
		require.Equal(t, h, h2)
	})
}

func FuzzParseFrame(f *testing.F) {
	for _, spec := range []FrameSpec{specV4, specV6} {
		for _, tc := range headerCases {
			var payload []byte
			if tc.h.Opcode.HasPayload() {
				payload = []byte("0123456789abcdef")
			}
			f.Add(AppendFrame(nil, &spec, &tc.h, payload))
		}
	}
	f.Add(unhex(f, cnpConnectX4))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame(b)
		if err != nil {
			return
		}
		require.Equal(t, fr.ICRCValid, ICRC(b) == fr.ICRC)
		// Rebuild from the parsed fields: it must parse back to the same
		// values with a valid ICRC.
		out := AppendFrame(nil, &fr.Spec, &fr.Header, fr.Payload)
		require.Equal(t, FrameLen(&fr.Spec, &fr.Header, len(fr.Payload)), len(out))
		fr2, err := ParseFrame(out)
		require.NoError(t, err)
		require.True(t, fr2.ICRCValid)
		if fr.Spec.TTL == 0 {
			fr.Spec.TTL = DefaultTTL
		}
		if !fr.Spec.IPv6 {
			fr.Spec.FlowLabel = 0
		}
		require.Equal(t, fr.Spec, fr2.Spec)
		require.Equal(t, fr.Header, fr2.Header)
		require.Equal(t, string(fr.Payload), string(fr2.Payload))
	})
}
