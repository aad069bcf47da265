package roce

import (
	"encoding/binary"
	"hash/crc32"
)

// rawSeed is the raw (uninverted) CRC-32 register after the initial
// 0xFFFFFFFF and 8 bytes of 0xFF, the seed Linux rxe starts from.
const rawSeed = 0xdebb20e3

// maskV4 and maskV6 are ORed onto IP + UDP + BTH to set the variant fields to
// all ones.
var maskV4, maskV6 = func() (m4 [IPv4HeaderLen + UDPHeaderLen + BTHLen]byte, m6 [IPv6HeaderLen + UDPHeaderLen + BTHLen]byte) {
	m4[1] = 0xFF                           // TOS: DSCP + ECN
	m4[8] = 0xFF                           // TTL
	m4[10], m4[11] = 0xFF, 0xFF            // header checksum
	m6[0] = 0x0F                           // traffic class, high nibble
	m6[1], m6[2], m6[3] = 0xFF, 0xFF, 0xFF // traffic class low nibble, flow label
	m6[7] = 0xFF                           // hop limit
	for _, m := range [][]byte{m4[IPv4HeaderLen:], m6[IPv6HeaderLen:]} {
		m[6], m[7] = 0xFF, 0xFF  // UDP checksum
		m[UDPHeaderLen+4] = 0xFF // BTH FECN, BECN, Resv6
	}
	return m4, m6
}()

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
// field (at least IP + UDP + BTH long): the masked headers go through a
// bytewise table loop, the rest through hash/crc32.
func icrcIP(p []byte, v6 bool) uint32 {
	m := maskV4[:]
	if v6 {
		m = maskV6[:]
	}
	tab := crc32.IEEETable
	c := uint32(rawSeed)
	for i, b := range p[:len(m)] {
		c = tab[byte(c)^(b|m[i])] ^ c>>8
	}
	return crc32.Update(^c, tab, p[len(m):])
}
