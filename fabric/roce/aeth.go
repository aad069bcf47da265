package roce

import "strconv"

// AETH syndrome encoding (IBTA Vol. 1, "AETH syndrome"): bit 7 is reserved
// (zero), bits 6:5 select the kind, bits 4:0 are its argument.
//
//	00 ACK       credit count (0x1F: credits not limited / invalid)
//	01 RNR NAK   RNR timer code (0..31, minimum RNR NAK timer table index)
//	10 reserved
//	11 NAK       NAK code (NakPSNSeqError ... NakInvalidRDRequest)
const (
	syndromeKindMask = 0x60
	syndromeArgMask  = 0x1F
	syndromeAck      = 0x00
	syndromeRNRNak   = 0x20
	syndromeNak      = 0x60
)

// NAK codes, the low 5 bits of a NAK syndrome.
const (
	NakPSNSeqError       uint8 = 0 // PSN sequence error: retransmit from the MSN's PSN
	NakInvalidRequest    uint8 = 1 // invalid request
	NakRemoteAccessError uint8 = 2 // remote access error (R_Key, bounds, rights)
	NakRemoteOpError     uint8 = 3 // remote operational error
	NakInvalidRDRequest  uint8 = 4 // invalid RD request
)

// CreditsUnlimited is the ACK credit count meaning "no end-to-end flow control
// credits advertised" (used when the responder has no SRQ-less credit limit).
const CreditsUnlimited uint8 = 0x1F

// AckSyndrome returns the syndrome of a positive ACK advertising credit
// (only the low 5 bits are used).
func AckSyndrome(credit uint8) uint8 { return syndromeAck | credit&syndromeArgMask }

// RNRNakSyndrome returns the syndrome of a receiver-not-ready NAK with the
// given RNR timer code (low 5 bits).
func RNRNakSyndrome(timerCode uint8) uint8 { return syndromeRNRNak | timerCode&syndromeArgMask }

// NakSyndrome returns the syndrome of a NAK with the given NAK code (low 5
// bits).
func NakSyndrome(code uint8) uint8 { return syndromeNak | code&syndromeArgMask }

// IsAck reports whether s is a positive ACK syndrome.
func IsAck(s uint8) bool { return s&(0x80|syndromeKindMask) == syndromeAck }

// IsRNRNak reports whether s is an RNR NAK syndrome.
func IsRNRNak(s uint8) bool { return s&(0x80|syndromeKindMask) == syndromeRNRNak }

// IsNak reports whether s is a NAK syndrome (not including RNR NAK).
func IsNak(s uint8) bool { return s&(0x80|syndromeKindMask) == syndromeNak }

// CreditCount returns the credit count of an ACK syndrome.
func CreditCount(s uint8) uint8 { return s & syndromeArgMask }

// RNRTimer returns the RNR timer code of an RNR NAK syndrome.
func RNRTimer(s uint8) uint8 { return s & syndromeArgMask }

// NakCode returns the NAK code of a NAK syndrome.
func NakCode(s uint8) uint8 { return s & syndromeArgMask }

// SyndromeString describes s, e.g. "ACK credits=31", "RNR NAK timer=14",
// "NAK PSN sequence error" or "reserved syndrome 0x40".
func SyndromeString(s uint8) string {
	switch {
	case IsAck(s):
		return "ACK credits=" + strconv.Itoa(int(CreditCount(s)))
	case IsRNRNak(s):
		return "RNR NAK timer=" + strconv.Itoa(int(RNRTimer(s)))
	case IsNak(s):
		switch NakCode(s) {
		case NakPSNSeqError:
			return "NAK PSN sequence error"
		case NakInvalidRequest:
			return "NAK invalid request"
		case NakRemoteAccessError:
			return "NAK remote access error"
		case NakRemoteOpError:
			return "NAK remote operational error"
		case NakInvalidRDRequest:
			return "NAK invalid RD request"
		}
		return "NAK code=" + strconv.Itoa(int(NakCode(s)))
	}
	return "reserved syndrome 0x" + strconv.FormatUint(uint64(s), 16)
}
