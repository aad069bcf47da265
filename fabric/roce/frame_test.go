package roce

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	specV4 = FrameSpec{
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 1}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 2},
		SrcIP: [16]byte{10, 0, 0, 1}, DstIP: [16]byte{10, 0, 0, 2},
		SrcPort: 0xC123, DSCP: 26, ECN: 2, TTL: 64, ID: 0x1234,
	}
	specV6 = FrameSpec{
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 3}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 4}, IPv6: true,
		SrcIP:   [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		DstIP:   [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
		SrcPort: 0xC456, DSCP: 46, ECN: 1, TTL: 255, FlowLabel: 0xABCDE,
	}
)

// cnpConnectX4 is a RoCEv2 CNP captured on a ConnectX-4 Lx (published as a
// hex dump in scapy's RoCE tests); its last 4 bytes are a hardware ICRC.
const cnpConnectX4 = "e41d2dab2bc2 7cfe90643b32 0800" +
	"45c2003c718c4000401191610a0011010a001201" +
	"000012b700280000" +
	"8100ffff4000011800000000" + "00000000000000000000000000000000" +
	"82fd002a"

func TestICRCHardwareCapture(t *testing.T) {
	b := unhex(t, cnpConnectX4)
	require.Len(t, b, 74)
	assert.Equal(t, uint32(0x2a00fd82), ICRC(b))
	assert.Equal(t, ICRC(b), referenceICRC(t, b))

	f, err := ParseFrame(b)
	require.NoError(t, err)
	assert.True(t, f.ICRCValid)
	assert.Equal(t, uint32(0x2a00fd82), f.ICRC)
	assert.Equal(t, Header{Opcode: OpCNP, PKey: 0xFFFF, BECN: true, DestQP: 0x118}, f.Header)
	assert.Equal(t, FrameSpec{
		SrcMAC: [6]byte{0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32}, DstMAC: [6]byte{0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2},
		SrcIP: [16]byte{10, 0, 17, 1}, DstIP: [16]byte{10, 0, 18, 1}, DSCP: 0x30, ECN: 2, TTL: 64, ID: 0x718c,
	}, f.Spec)
	assert.Empty(t, f.Payload)

	// Rebuilding it from the parsed fields gives the captured bytes,
	// IPv4 checksum and ICRC included.
	assert.Equal(t, b, AppendFrame(nil, &f.Spec, &f.Header, nil))
}

func TestFrameRoundTrip(t *testing.T) {
	for _, spec := range []FrameSpec{specV4, specV6} {
		for _, tc := range headerCases {
			name := tc.name + "/v4"
			if spec.IPv6 {
				name = tc.name + "/v6"
			}
			t.Run(name, func(t *testing.T) {
				var payload []byte
				if tc.h.Opcode.HasPayload() {
					payload = make([]byte, 61)
					for i := range payload {
						payload[i] = byte(i * 7)
					}
				}
				prefix := []byte("prefix")
				b := AppendFrame(prefix, &spec, &tc.h, payload)
				require.Equal(t, "prefix", string(b[:6]), "AppendFrame must append")
				fr := b[6:]
				require.Equal(t, FrameLen(&spec, &tc.h, len(payload)), len(fr))
				assert.Equal(t, WireLen(spec.IPv6, &tc.h, len(payload)), len(fr)+FCSLen+PreambleIFGLen)

				f, err := ParseFrame(fr)
				require.NoError(t, err)
				assert.True(t, f.ICRCValid)
				assert.Equal(t, ICRC(fr), f.ICRC)
				assert.Equal(t, referenceICRC(t, fr), f.ICRC)
				assert.Equal(t, spec, f.Spec)
				assert.Equal(t, tc.h, f.Header)
				assert.Equal(t, len(payload), len(f.Payload))
				if len(payload) > 0 {
					assert.Equal(t, payload, f.Payload)
				}
				ipStart := EthernetHeaderLen
				if spec.IPv6 {
					assert.Equal(t, uint16(0x86DD), binary.BigEndian.Uint16(fr[12:]))
					ip := fr[ipStart : len(fr)-(len(fr)-ipEnd(true, &tc.h, len(payload)))]
					assert.NotZero(t, binary.BigEndian.Uint16(ip[46:]), "IPv6 UDP checksum is mandatory")
					assert.Equal(t, uint16(0xFFFF), refUDP6Sum(ip), "IPv6 UDP checksum")
				} else {
					assert.Equal(t, uint16(0x0800), binary.BigEndian.Uint16(fr[12:]))
					assert.Equal(t, uint16(0xFFFF), ^ipv4Checksum(fr[ipStart:ipStart+20]), "IPv4 checksum")
				}
			})
		}
	}
}

func TestFrameLayout(t *testing.T) {
	h := Header{Opcode: OpWriteMiddle, PKey: DefaultPKey, DestQP: 7, PSN: 8}
	payload := make([]byte, 4096)
	b := AppendFrame(nil, &specV4, &h, payload)
	require.Len(t, b, 14+20+8+12+4096+4)
	ip := b[14:]
	assert.Equal(t, []byte{0x45, 26<<2 | 2}, ip[:2])
	assert.Equal(t, uint16(20+8+12+4096+4), binary.BigEndian.Uint16(ip[2:]))
	assert.Equal(t, []byte{0x12, 0x34, 0x40, 0x00, 64, 17}, ip[4:10])
	udp := ip[20:]
	assert.Equal(t, uint16(0xC123), binary.BigEndian.Uint16(udp))
	assert.Equal(t, uint16(4791), binary.BigEndian.Uint16(udp[2:]))
	assert.Equal(t, uint16(8+12+4096+4), binary.BigEndian.Uint16(udp[4:]))
	assert.Equal(t, uint16(0), binary.BigEndian.Uint16(udp[6:]))
	assert.Equal(t, 4178, WireLen(false, &h, 4096))
	assert.Equal(t, 4198, WireLen(true, &h, 4096))

	b6 := AppendFrame(nil, &specV6, &h, payload)
	ip6 := b6[14:]
	assert.Equal(t, uint32(6<<28|(46<<2|1)<<20|0xABCDE), binary.BigEndian.Uint32(ip6))
	assert.Equal(t, uint16(8+12+4096+4), binary.BigEndian.Uint16(ip6[4:]))
	assert.Equal(t, []byte{17, 255}, ip6[6:8])

	// A zero TTL means DefaultTTL; out-of-range DSCP/ECN/flow label are truncated.
	s := specV6
	s.TTL, s.DSCP, s.ECN, s.FlowLabel = 0, 0xFF, 0xFF, 0xFFFFFFFF
	b6 = AppendFrame(nil, &s, &h, nil)
	assert.Equal(t, uint32(0x6FFFFFFF), binary.BigEndian.Uint32(b6[14:]))
	assert.Equal(t, byte(DefaultTTL), b6[14+7])
}

func TestFrameMinimumSizeAndPad(t *testing.T) {
	// SEND Only with no payload: 14+20+8+12+4 = 58 bytes, padded to 60.
	h := Header{Opcode: OpSendOnly, PKey: DefaultPKey, DestQP: 1, PSN: 1}
	b := AppendFrame(nil, &specV4, &h, nil)
	require.Len(t, b, 60)
	assert.Equal(t, []byte{0, 0}, b[58:])
	assert.Equal(t, 60, FrameLen(&specV4, &h, 0))
	assert.Equal(t, MinFrameLen+PreambleIFGLen, WireLen(false, &h, 0))
	f, err := ParseFrame(b)
	require.NoError(t, err)
	assert.True(t, f.ICRCValid)
	assert.Equal(t, h, f.Header)

	// Pad bytes follow the payload, are zero, and are excluded from Payload.
	h.PadCount = 3
	b = AppendFrame(nil, &specV6, &h, []byte{1, 2, 3, 4, 5})
	require.Len(t, b, 14+40+8+12+5+3+4)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 0, 0, 0}, b[74:82])
	f, err = ParseFrame(b)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 3, 4, 5}, f.Payload)
	assert.Equal(t, 5, cap(f.Payload), "payload must not expose pad or ICRC")
	assert.True(t, f.ICRCValid)
}

func TestAppendFrameRejectsBadInput(t *testing.T) {
	dst := []byte{1, 2, 3}
	h := Header{Opcode: 0x15}
	assert.Equal(t, dst, AppendFrame(dst, &specV4, &h, nil))
	h = Header{Opcode: OpWriteMiddle}
	big := make([]byte, 65536)
	assert.Equal(t, dst, AppendFrame(dst, &specV4, &h, big))
	assert.Equal(t, dst, AppendFrame(dst, &specV6, &h, big))
	// IPv6 allows a 65535-byte payload length, which IPv4's total length does not.
	n := 65535 - 8 - 12 - 4
	assert.Len(t, AppendFrame(nil, &specV6, &h, big[:n]), 14+40+65535)
	assert.Equal(t, dst, AppendFrame(dst, &specV4, &h, big[:n]))
}

func TestICRCMasking(t *testing.T) {
	for _, spec := range []FrameSpec{specV4, specV6} {
		h := Header{Opcode: OpWriteOnly, PKey: DefaultPKey, DestQP: 0x10, PSN: 0x20, VA: 0x1000, RKey: 3, DMALen: 4}
		base := AppendFrame(nil, &spec, &h, []byte{9, 9, 9, 9})
		want := ICRC(base)
		ip := EthernetHeaderLen
		udp := ip + ipHeaderLen(spec.IPv6)
		bth := udp + UDPHeaderLen
		// Variant fields: changing them must not change the ICRC.
		variant := []int{bth + 4, udp + 6, udp + 7}
		if spec.IPv6 {
			variant = append(variant, ip+0 /* low nibble only */, ip+1, ip+2, ip+3, ip+7)
		} else {
			variant = append(variant, ip+1, ip+8, ip+10, ip+11)
		}
		for _, off := range variant {
			b := append([]byte(nil), base...)
			if spec.IPv6 && off == ip {
				b[off] ^= 0x0F
			} else {
				b[off] ^= 0xFF
			}
			assert.Equal(t, want, ICRC(b), "v6=%v offset %d is variant", spec.IPv6, off)
		}
		// Every other byte before the ICRC field is covered.
		ipLen := len(base) - EthernetHeaderLen
		for off := ip; off < ip+ipLen-ICRCLen; off++ {
			if contains(variant, off) {
				continue
			}
			if spec.IPv6 && (off == ip+4 || off == ip+5) || !spec.IPv6 && (off == ip+2 || off == ip+3) {
				continue // length fields: changing them breaks framing, checked below
			}
			b := append([]byte(nil), base...)
			b[off] ^= 0x01
			assert.NotEqual(t, want, ICRC(b), "v6=%v offset %d is invariant", spec.IPv6, off)
			f, err := ParseFrame(b)
			if err == nil {
				assert.False(t, f.ICRCValid, "offset %d", off)
			}
		}
		// The Ethernet header and the ICRC field itself are not covered.
		for _, off := range []int{0, 6, 12, len(base) - 1} {
			b := append([]byte(nil), base...)
			b[off] ^= 0x01
			if off != 12 {
				assert.Equal(t, want, ICRC(b))
			}
		}
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestParseFrameErrors(t *testing.T) {
	h := Header{Opcode: OpSendOnly, PKey: DefaultPKey, DestQP: 1, PSN: 1}
	good := AppendFrame(nil, &specV4, &h, []byte("hello world, this is a payload!"))
	good6 := AppendFrame(nil, &specV6, &h, []byte("hello"))
	mut := func(src []byte, f func(b []byte)) []byte {
		b := append([]byte(nil), src...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrShort},
		{"ethernet only", good[:14], ErrShort},
		{"arp", mut(good, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), ErrNotRoCE},
		{"ipv4 options", mut(good, func(b []byte) { b[14] = 0x46 }), ErrNotRoCE},
		{"tcp", mut(good, func(b []byte) { b[14+9] = 6 }), ErrNotRoCE},
		{"fragment", mut(good, func(b []byte) { b[14+6] = 0x20 }), ErrNotRoCE},
		{"ipv4 total length too long", mut(good, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 2000) }), ErrLength},
		{"ipv4 total length too short", mut(good, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 10) }), ErrLength},
		{"truncated ipv4", good[:30], ErrShort},
		{"other port", mut(good, func(b []byte) { binary.BigEndian.PutUint16(b[36:], 4792) }), ErrNotRoCE},
		{"udp length", mut(good, func(b []byte) { binary.BigEndian.PutUint16(b[38:], 20) }), ErrLength},
		{"no BTH", mut(good[:14+20+8+8], func(b []byte) {
			binary.BigEndian.PutUint16(b[16:], 36)
			binary.BigEndian.PutUint16(b[38:], 16)
		}), ErrShort},
		{"bad opcode", mut(good, func(b []byte) { b[42] = 0x64 }), ErrOpcode},
		{"pad exceeds payload", mut(AppendFrame(nil, &specV4, &h, []byte{1}), func(b []byte) { b[43] = 0x30 }), nil},
		{"ipv6 version", mut(good6, func(b []byte) { b[14] = 0x40 }), ErrNotRoCE},
		{"ipv6 next header", mut(good6, func(b []byte) { b[14+6] = 0 }), ErrNotRoCE},
		{"ipv6 payload length", mut(good6, func(b []byte) { binary.BigEndian.PutUint16(b[18:], 1000) }), ErrLength},
		{"truncated ipv6", good6[:50], ErrShort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFrame(tc.b)
			if tc.err == nil {
				// pad 3 with 1 payload byte: 1 < 3.
				assert.ErrorIs(t, err, ErrLength)
				return
			}
			assert.ErrorIs(t, err, tc.err)
		})
	}
	// ICRC of a non-RoCE frame is 0.
	assert.Equal(t, uint32(0), ICRC(good[:20]))
	assert.Equal(t, uint32(0), ICRC(mut(good, func(b []byte) { b[12] = 0x88 })))
}

// refUDP6Sum folds the one's complement sum of the IPv6 pseudo-header and the
// UDP datagram (checksum included) the slow way; 0xFFFF means valid.
func refUDP6Sum(ip []byte) uint16 {
	udp := ip[40:]
	var words []byte
	words = append(words, ip[8:40]...)
	words = binary.BigEndian.AppendUint32(words, uint32(len(udp)))
	words = append(words, 0, 0, 0, 17)
	words = append(words, udp...)
	if len(words)%2 == 1 {
		words = append(words, 0)
	}
	var s uint32
	for i := 0; i < len(words); i += 2 {
		s += uint32(words[i])<<8 | uint32(words[i+1])
		s = s&0xFFFF + s>>16
	}
	return uint16(s)
}
