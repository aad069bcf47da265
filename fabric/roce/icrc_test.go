package roce

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// referenceCRC32 is a deliberately naive bit-at-a-time IEEE 802.3 CRC-32
// (reflected polynomial 0xEDB88320, init and final XOR all ones).
func referenceCRC32(data []byte) uint32 {
	crc := uint32(0xFFFFFFFF)
	for _, b := range data {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xEDB88320
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// referenceICRC builds the masked pseudo-packet explicitly, in one buffer, as
// the RoCEv2 annex describes it, and runs referenceCRC32 over it.
func referenceICRC(t testing.TB, frame []byte) uint32 {
	t.Helper()
	et := binary.BigEndian.Uint16(frame[12:])
	ip := frame[14:]
	var ipLen, hdr int
	switch et {
	case 0x0800:
		ipLen, hdr = int(binary.BigEndian.Uint16(ip[2:])), 20
	case 0x86DD:
		ipLen, hdr = 40+int(binary.BigEndian.Uint16(ip[4:])), 40
	default:
		t.Fatalf("ethertype %#x", et)
	}
	p := append([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, ip[:ipLen-4]...)
	m := p[8:]
	if hdr == 20 {
		m[1] = 0xFF               // TOS
		m[8] = 0xFF               // TTL
		m[10], m[11] = 0xFF, 0xFF // header checksum
	} else {
		m[0] |= 0x0F // traffic class (low nibble of byte 0, high of byte 1)
		m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF
		m[7] = 0xFF // hop limit
	}
	m[hdr+6], m[hdr+7] = 0xFF, 0xFF // UDP checksum
	m[hdr+8+4] = 0xFF               // BTH FECN, BECN, Resv6
	return referenceCRC32(p)
}

func TestReferenceCRC32(t *testing.T) {
	// The standard CRC-32 check value.
	assert.Equal(t, uint32(0xCBF43926), referenceCRC32([]byte("123456789")))
	// The rxe seed is the raw register after 8 bytes of 0xFF.
	assert.Equal(t, uint32(rawSeed), ^referenceCRC32([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}))
}

func TestICRCDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		spec := FrameSpec{IPv6: r.IntN(2) == 1, SrcPort: uint16(r.Uint32()), DSCP: uint8(r.IntN(64)),
			ECN: uint8(r.IntN(4)), TTL: uint8(r.Uint32()), FlowLabel: r.Uint32() & 0xFFFFF}
		for j := range spec.SrcIP {
			spec.SrcIP[j], spec.DstIP[j] = uint8(r.Uint32()), uint8(r.Uint32())
		}
		tc := headerCases[r.IntN(len(headerCases))]
		h := tc.h
		h.FECN, h.BECN = r.IntN(2) == 1, r.IntN(2) == 1
		h.PSN = r.Uint32() & Max24
		payload := make([]byte, r.IntN(300))
		for j := range payload {
			payload[j] = uint8(r.Uint32())
		}
		b := AppendFrame(nil, &spec, &h, payload)
		require.NotEmpty(t, b)
		want := referenceICRC(t, b)
		got := ICRC(b)
		require.Equal(t, want, got, "case %d", i)
		require.Equal(t, want, binary.LittleEndian.Uint32(b[14+ipHeaderLenOf(b)-4:]))
	}
}

func ipHeaderLenOf(frame []byte) int {
	if binary.BigEndian.Uint16(frame[12:]) == 0x0800 {
		return int(binary.BigEndian.Uint16(frame[16:]))
	}
	return 40 + int(binary.BigEndian.Uint16(frame[18:]))
}
