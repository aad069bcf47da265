package roce

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Frame layout constants, in bytes.
const (
	EthernetHeaderLen = 14   // destination MAC, source MAC, EtherType (no VLAN tag)
	FCSLen            = 4    // Ethernet frame check sequence
	IPv4HeaderLen     = 20   // IPv4 header without options
	IPv6HeaderLen     = 40   // IPv6 fixed header
	UDPHeaderLen      = 8    // UDP header
	MinFrameLen       = 64   // smallest Ethernet frame, FCS included
	PreambleIFGLen    = 20   // preamble (7) + SFD (1) + minimum inter-frame gap (12)
	UDPPort           = 4791 // IANA RoCEv2 UDP destination port
	DefaultTTL        = 64   // IPv4 TTL / IPv6 hop limit used when FrameSpec.TTL is 0
)

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86DD
	protoUDP      = 17
)

// WireOverhead returns the bytes a RoCEv2 packet adds around its transport
// headers and payload on an Ethernet link: Ethernet header 14 + FCS 4 + IPv4
// header 20 (or IPv6 header 40) + UDP header 8 + ICRC 4, that is 50 (IPv4) or
// 70 (IPv6). It excludes the transport headers (Header.Len), the payload and
// pad, the minimum-frame padding and PreambleIFGLen; WireLen adds them all.
func WireOverhead(ipv6 bool) int {
	return EthernetHeaderLen + FCSLen + ipHeaderLen(ipv6) + UDPHeaderLen + ICRCLen
}

// WireLen returns the link time a packet occupies, in bytes: the Ethernet
// frame including FCS (WireOverhead + h.Len() + payloadLen + h.PadCount,
// raised to MinFrameLen if shorter) plus PreambleIFGLen. For a 4096-byte
// RDMA WRITE Middle over IPv4 that is 50 + 12 + 4096 + 20 = 4178.
func WireLen(ipv6 bool, h *Header, payloadLen int) int {
	return max(WireOverhead(ipv6)+h.Len()+payloadLen+int(h.PadCount&3), MinFrameLen) + PreambleIFGLen
}

func ipHeaderLen(ipv6 bool) int {
	if ipv6 {
		return IPv6HeaderLen
	}
	return IPv4HeaderLen
}

// FrameSpec describes the Ethernet, IP and UDP headers of a RoCEv2 frame.
type FrameSpec struct {
	SrcMAC, DstMAC [6]byte
	// IPv6 selects IPv6; otherwise IPv4 with the addresses in the first 4
	// bytes of SrcIP and DstIP (the other 12 are ignored, and zero after
	// ParseFrame).
	IPv6         bool
	SrcIP, DstIP [16]byte
	// SrcPort is the UDP source port, the ECMP entropy of the flow (rxe uses
	// 0xC000 | hash(QPN)&0x3FFF). The destination port is always UDPPort.
	SrcPort uint16
	DSCP    uint8 // 6 bits: upper bits of IPv4 TOS / IPv6 traffic class
	ECN     uint8 // 2 bits: lower bits of IPv4 TOS / IPv6 traffic class
	// TTL is the IPv4 TTL or IPv6 hop limit; AppendFrame writes DefaultTTL
	// when it is 0.
	TTL       uint8
	FlowLabel uint32 // IPv6 flow label, 20 bits; ignored for IPv4
	ID        uint16 // IPv4 identification; ignored for IPv6
}

// FrameLen returns the length of the frame AppendFrame builds, as captured
// (without FCS): Ethernet + IP + UDP + h.Len() + payloadLen + h.PadCount +
// ICRC, raised to MinFrameLen-FCSLen (60) with Ethernet padding if shorter.
func FrameLen(spec *FrameSpec, h *Header, payloadLen int) int {
	return max(ipEnd(spec.IPv6, h, payloadLen), MinFrameLen-FCSLen)
}

// ipEnd is the offset of the end of the IP packet in the frame.
func ipEnd(ipv6 bool, h *Header, payloadLen int) int {
	return EthernetHeaderLen + ipHeaderLen(ipv6) + UDPHeaderLen + h.Len() + payloadLen + int(h.PadCount&3) + ICRCLen
}

// AppendFrame appends a complete RoCEv2 frame (without FCS) carrying h and
// payload to dst and returns the extended slice. It writes h.PadCount zero pad
// bytes after the payload, fills in the IPv4 header checksum, the IP and UDP
// lengths and the ICRC, and pads the frame to 60 bytes if it is shorter. IPv4
// packets have Don't Fragment set and a UDP checksum of 0, as RoCEv2 NICs send
// them (the ICRC protects the packet); IPv6 packets get a computed UDP
// checksum, since RFC 8200 forbids 0 and Wireshark flags it (RoCEv2
// receivers ignore the field either way). DSCP, ECN and FlowLabel
// are truncated to their field widths. It allocates only when dst lacks
// capacity. If h does not Validate or the packet exceeds the IP length limit
// it returns dst unchanged; callers that build headers from untrusted input
// should call Validate first.
func AppendFrame(dst []byte, spec *FrameSpec, h *Header, payload []byte) []byte {
	if h.Validate() != nil {
		return dst
	}
	v6 := spec.IPv6
	end := ipEnd(v6, h, len(payload))
	ipLen := end - EthernetHeaderLen
	if v6 && ipLen-IPv6HeaderLen > 0xFFFF || !v6 && ipLen > 0xFFFF {
		return dst
	}
	n := max(end, MinFrameLen-FCSLen)
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	b := dst[start:]

	copy(b[0:6], spec.DstMAC[:])
	copy(b[6:12], spec.SrcMAC[:])
	ttl := spec.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	tc := spec.DSCP<<2 | spec.ECN&3
	ip := b[EthernetHeaderLen:end]
	var udp []byte
	if v6 {
		binary.BigEndian.PutUint16(b[12:], etherTypeIPv6)
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(tc)<<20|spec.FlowLabel&0xFFFFF)
		binary.BigEndian.PutUint16(ip[4:], uint16(ipLen-IPv6HeaderLen))
		ip[6] = protoUDP
		ip[7] = ttl
		copy(ip[8:24], spec.SrcIP[:])
		copy(ip[24:40], spec.DstIP[:])
		udp = ip[IPv6HeaderLen:]
	} else {
		binary.BigEndian.PutUint16(b[12:], etherTypeIPv4)
		ip[0] = 0x45
		ip[1] = tc
		binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
		binary.BigEndian.PutUint16(ip[4:], spec.ID)
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF, offset 0
		ip[8] = ttl
		ip[9] = protoUDP
		ip[10], ip[11] = 0, 0
		copy(ip[12:16], spec.SrcIP[:4])
		copy(ip[16:20], spec.DstIP[:4])
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:IPv4HeaderLen]))
		udp = ip[IPv4HeaderLen:]
	}
	binary.BigEndian.PutUint16(udp[0:], spec.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], UDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	udp[6], udp[7] = 0, 0
	t := udp[UDPHeaderLen:]
	hl := h.Len()
	h.encode(t[:hl])
	copy(t[hl:], payload)
	pad := t[hl+len(payload) : len(t)-ICRCLen]
	clear(pad)
	binary.LittleEndian.PutUint32(t[len(t)-ICRCLen:], icrcIP(ip[:len(ip)-ICRCLen], v6))
	if v6 {
		binary.BigEndian.PutUint16(udp[6:], udp6Checksum(ip))
	}
	clear(b[end:])
	return dst
}

// udp6Checksum returns the UDP checksum of an IPv6 packet whose UDP checksum
// field is zero (RFC 8200 pseudo-header; 0 is sent as 0xFFFF).
func udp6Checksum(ip []byte) uint16 {
	udp := ip[IPv6HeaderLen:]
	s := sum16(ip[8:40]) + uint32(len(udp)) + protoUDP + sum16(udp)
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	if c := ^uint16(s); c != 0 {
		return c
	}
	return 0xFFFF
}

// sum16 returns the (unfolded) sum of b as big-endian 16-bit words, with a
// trailing odd byte padded with zero.
func sum16(b []byte) uint32 {
	var s uint64
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		s += v>>48 + v>>32&0xFFFF + v>>16&0xFFFF + v&0xFFFF
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return uint32(s)
}

// ipv4Checksum returns the Internet checksum of an IPv4 header whose checksum
// field is zero.
func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}

// Frame is a parsed RoCEv2 frame.
type Frame struct {
	Spec   FrameSpec
	Header Header
	// Payload is the data after the transport headers, without pad bytes and
	// ICRC. It aliases the buffer given to ParseFrame.
	Payload []byte
	// ICRC is the value of the ICRC field as sent (little-endian, see ICRC).
	ICRC uint32
	// ICRCValid reports whether ICRC matches the ICRC computed over the frame.
	ICRCValid bool
}

// ParseFrame parses an Ethernet frame (without FCS; trailing Ethernet padding
// is allowed) carrying RoCEv2 over IPv4 or IPv6 to UDP port UDPPort. It
// checks that the Ethernet, IP and UDP lengths agree and decodes the
// transport headers with DecodeHeader. A wrong ICRC is reported in
// Frame.ICRCValid, not as an error; the IPv4 header checksum and the UDP
// checksum are not checked.
// It does not allocate on success.
func ParseFrame(b []byte) (Frame, error) {
	var f Frame
	if len(b) < EthernetHeaderLen {
		return f, fmt.Errorf("%w: Ethernet header", ErrShort)
	}
	copy(f.Spec.DstMAC[:], b[0:6])
	copy(f.Spec.SrcMAC[:], b[6:12])
	p := b[EthernetHeaderLen:]
	var ip, udp []byte
	switch et := binary.BigEndian.Uint16(b[12:]); et {
	case etherTypeIPv4:
		if len(p) < IPv4HeaderLen {
			return f, fmt.Errorf("%w: IPv4 header", ErrShort)
		}
		if p[0] != 0x45 {
			return f, fmt.Errorf("%w: IPv4 version/IHL byte 0x%02x (options unsupported)", ErrNotRoCE, p[0])
		}
		if p[9] != protoUDP {
			return f, fmt.Errorf("%w: IP protocol %d", ErrNotRoCE, p[9])
		}
		if binary.BigEndian.Uint16(p[6:])&0x3FFF != 0 {
			return f, fmt.Errorf("%w: IPv4 fragment", ErrNotRoCE)
		}
		n := int(binary.BigEndian.Uint16(p[2:]))
		if n < IPv4HeaderLen || n > len(p) {
			return f, fmt.Errorf("%w: IPv4 total length %d, frame holds %d", ErrLength, n, len(p))
		}
		ip = p[:n]
		f.Spec.DSCP, f.Spec.ECN = p[1]>>2, p[1]&3
		f.Spec.TTL = p[8]
		f.Spec.ID = binary.BigEndian.Uint16(p[4:])
		copy(f.Spec.SrcIP[:4], p[12:16])
		copy(f.Spec.DstIP[:4], p[16:20])
		udp = ip[IPv4HeaderLen:]
	case etherTypeIPv6:
		if len(p) < IPv6HeaderLen {
			return f, fmt.Errorf("%w: IPv6 header", ErrShort)
		}
		w := binary.BigEndian.Uint32(p)
		if w>>28 != 6 {
			return f, fmt.Errorf("%w: IPv6 version %d", ErrNotRoCE, w>>28)
		}
		if p[6] != protoUDP {
			return f, fmt.Errorf("%w: IPv6 next header %d", ErrNotRoCE, p[6])
		}
		n := IPv6HeaderLen + int(binary.BigEndian.Uint16(p[4:]))
		if n > len(p) {
			return f, fmt.Errorf("%w: IPv6 payload length %d, frame holds %d", ErrLength, n-IPv6HeaderLen, len(p)-IPv6HeaderLen)
		}
		ip = p[:n]
		f.Spec.IPv6 = true
		tc := uint8(w >> 20)
		f.Spec.DSCP, f.Spec.ECN = tc>>2, tc&3
		f.Spec.FlowLabel = w & 0xFFFFF
		f.Spec.TTL = p[7]
		copy(f.Spec.SrcIP[:], p[8:24])
		copy(f.Spec.DstIP[:], p[24:40])
		udp = ip[IPv6HeaderLen:]
	default:
		return f, fmt.Errorf("%w: EtherType 0x%04x", ErrNotRoCE, et)
	}
	if len(udp) < UDPHeaderLen {
		return f, fmt.Errorf("%w: UDP header", ErrShort)
	}
	if dp := binary.BigEndian.Uint16(udp[2:]); dp != UDPPort {
		return f, fmt.Errorf("%w: UDP destination port %d", ErrNotRoCE, dp)
	}
	if ul := int(binary.BigEndian.Uint16(udp[4:])); ul != len(udp) {
		return f, fmt.Errorf("%w: UDP length %d, IP payload %d", ErrLength, ul, len(udp))
	}
	f.Spec.SrcPort = binary.BigEndian.Uint16(udp)
	t := udp[UDPHeaderLen:]
	if len(t) < BTHLen+ICRCLen {
		return f, fmt.Errorf("%w: BTH and ICRC", ErrShort)
	}
	body := t[:len(t)-ICRCLen]
	h, hl, err := DecodeHeader(body)
	if err != nil {
		return f, err
	}
	pad := int(h.PadCount)
	if hl+pad > len(body) {
		return f, fmt.Errorf("%w: pad count %d exceeds payload", ErrLength, pad)
	}
	f.Header = h
	f.Payload = body[hl : len(body)-pad : len(body)-pad]
	f.ICRC = binary.LittleEndian.Uint32(t[len(t)-ICRCLen:])
	f.ICRCValid = f.ICRC == icrcIP(ip[:len(ip)-ICRCLen], f.Spec.IPv6)
	return f, nil
}
