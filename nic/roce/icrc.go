package roce

import (
	"encoding/binary"
	"hash/crc32"
)

// ones supplies the all-ones bytes that stand in for masked fields.
var ones = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// ipv6Masked is the first word of an IPv6 header with traffic class and flow
// label masked.
var ipv6Masked = [4]byte{0x6F, 0xFF, 0xFF, 0xFF}

// ICRC returns the RoCEv2 invariant CRC of an Ethernet frame that carries a
// RoCEv2 packet over IPv4 or IPv6. The IP header's length field delimits the
// packet; its last 4 bytes are the ICRC field, whose content is ignored, and
// any Ethernet padding after the IP packet is ignored too. ICRC returns 0 if
// the frame is not Ethernet + IPv4 (no options) or IPv6 (no extension
// headers) + UDP + a BTH; use ParseFrame to learn why.
//
// The value is the IEEE 802.3 CRC-32 (reflected polynomial 0xEDB88320,
// initial value and final XOR 0xFFFFFFFF, as hash/crc32.ChecksumIEEE) of
//
//	8 bytes of 0xFF                    (stands in for the absent IB LRH)
//	IP header with variant fields set to all ones:
//	  IPv4: TOS (DSCP+ECN), TTL, header checksum
//	  IPv6: traffic class, flow label, hop limit
//	UDP header with the checksum set to all ones
//	BTH with byte 4 (FECN, BECN, Resv6) set to all ones
//	the remaining transport headers, the payload and the pad bytes
//
// It goes on the wire least significant byte first, like the Ethernet FCS:
// the ICRC field holds binary.LittleEndian.PutUint32(field, ICRC(frame)).
// This follows Linux rxe (rxe_icrc.c), whose seed 0xdebb20e3 is the CRC
// register after the 8 bytes of 0xFF, and is checked against a CNP captured
// on a ConnectX-4 Lx in the tests.
func ICRC(frame []byte) uint32 {
	ip, v6, ok := ipPacket(frame)
	if !ok {
		return 0
	}
	return icrcIP(ip[:len(ip)-ICRCLen], v6)
}

// ipPacket returns the IP packet in an Ethernet frame (from the IP header to
// the end given by its length field) if it is long enough to hold IP, UDP,
// BTH and ICRC.
func ipPacket(frame []byte) (ip []byte, v6, ok bool) {
	if len(frame) < EthernetHeaderLen {
		return nil, false, false
	}
	p := frame[EthernetHeaderLen:]
	var n int
	switch binary.BigEndian.Uint16(frame[12:]) {
	case etherTypeIPv4:
		if len(p) < IPv4HeaderLen || p[0] != 0x45 {
			return nil, false, false
		}
		n = int(binary.BigEndian.Uint16(p[2:]))
	case etherTypeIPv6:
		if len(p) < IPv6HeaderLen || p[0]>>4 != 6 {
			return nil, false, false
		}
		n = IPv6HeaderLen + int(binary.BigEndian.Uint16(p[4:]))
		v6 = true
	default:
		return nil, false, false
	}
	if n > len(p) || n < ipHeaderLen(v6)+UDPHeaderLen+BTHLen+ICRCLen {
		return nil, false, false
	}
	return p[:n], v6, true
}

// icrcIP computes the ICRC of an IP packet that ends just before the ICRC
// field. Masked fields are fed from ones, so nothing is copied or allocated.
func icrcIP(p []byte, v6 bool) uint32 {
	t := crc32.IEEETable
	c := crc32.Update(0, t, ones[:8])
	var udp []byte
	if v6 {
		// Version nibble (6) kept; traffic class and flow label masked.
		c = crc32.Update(c, t, ipv6Masked[:])
		c = crc32.Update(c, t, p[4:7]) // payload length, next header
		c = crc32.Update(c, t, ones[:1])
		c = crc32.Update(c, t, p[8:40])
		udp = p[40:]
	} else {
		c = crc32.Update(c, t, p[0:1])
		c = crc32.Update(c, t, ones[:1]) // TOS
		c = crc32.Update(c, t, p[2:8])
		c = crc32.Update(c, t, ones[:1]) // TTL
		c = crc32.Update(c, t, p[9:10])
		c = crc32.Update(c, t, ones[:2]) // header checksum
		c = crc32.Update(c, t, p[12:20])
		udp = p[20:]
	}
	c = crc32.Update(c, t, udp[0:6])
	c = crc32.Update(c, t, ones[:2]) // UDP checksum
	bth := udp[UDPHeaderLen:]
	c = crc32.Update(c, t, bth[0:4])
	c = crc32.Update(c, t, ones[:1]) // FECN, BECN, Resv6
	return crc32.Update(c, t, bth[5:])
}
