package roce

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBTHView(t *testing.T) {
	b := BTH(make([]byte, BTHLen))
	b.SetOpcode(OpWriteOnlyImm)
	b.SetSE(true)
	b.SetMigReq(true)
	b.SetPadCount(3)
	b.SetTVer(0)
	b.SetPKey(0x8001)
	b.SetFECN(true)
	b.SetBECN(true)
	b.SetDestQP(0xABCDEF)
	b.SetAckReq(true)
	b.SetPSN(0xFFFFFF)
	assert.Equal(t, []byte{0x0B, 0xF0, 0x80, 0x01, 0xC0, 0xAB, 0xCD, 0xEF, 0x80, 0xFF, 0xFF, 0xFF}, []byte(b))
	assert.Equal(t, OpWriteOnlyImm, b.Opcode())
	assert.True(t, b.SE() && b.MigReq() && b.FECN() && b.BECN() && b.AckReq())
	assert.Equal(t, uint8(3), b.PadCount())
	assert.Equal(t, uint16(0x8001), b.PKey())
	assert.Equal(t, uint32(0xABCDEF), b.DestQP())
	assert.Equal(t, uint32(0xFFFFFF), b.PSN())

	// Setters touch only their own bits.
	b.SetSE(false)
	b.SetPadCount(1)
	b.SetTVer(0xF)
	assert.Equal(t, byte(0x5F), b[1])
	assert.Equal(t, uint8(0xF), b.TVer())
	assert.True(t, b.MigReq())
	b.SetFECN(false)
	assert.Equal(t, byte(0x40), b[4])
	b.SetDestQP(0x1000001) // truncated to 24 bits, FECN/BECN byte untouched
	assert.Equal(t, uint32(1), b.DestQP())
	assert.Equal(t, byte(0x40), b[4])
	b.SetPSN(0x2000002)
	assert.Equal(t, uint32(2), b.PSN())
	assert.True(t, b.AckReq())
	b.SetAckReq(false)
	assert.Equal(t, []byte{0, 0, 0, 2}, []byte(b[8:12]))
}

func TestExtensionViews(t *testing.T) {
	r := RETH(make([]byte, RETHLen))
	r.SetVA(0x0102030405060708)
	r.SetRKey(0x0A0B0C0D)
	r.SetDMALen(0x00100000)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 0xA, 0xB, 0xC, 0xD, 0, 0x10, 0, 0}, []byte(r))
	assert.Equal(t, uint64(0x0102030405060708), r.VA())
	assert.Equal(t, uint32(0x0A0B0C0D), r.RKey())
	assert.Equal(t, uint32(0x00100000), r.DMALen())

	a := AETH(make([]byte, AETHLen))
	a.SetSyndrome(NakSyndrome(NakRemoteAccessError))
	a.SetMSN(0x123456)
	assert.Equal(t, []byte{0x62, 0x12, 0x34, 0x56}, []byte(a))
	assert.Equal(t, uint8(0x62), a.Syndrome())
	assert.Equal(t, uint32(0x123456), a.MSN())

	at := AtomicETH(make([]byte, AtomicETHLen))
	at.SetVA(0x1000)
	at.SetRKey(7)
	at.SetSwapAdd(0x1111111122222222)
	at.SetCompare(0x3333333344444444)
	want := []byte{0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 7,
		0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22, 0x33, 0x33, 0x33, 0x33, 0x44, 0x44, 0x44, 0x44}
	assert.Equal(t, want, []byte(at))
	assert.Equal(t, uint64(0x1000), at.VA())
	assert.Equal(t, uint32(7), at.RKey())
	assert.Equal(t, uint64(0x1111111122222222), at.SwapAdd())
	assert.Equal(t, uint64(0x3333333344444444), at.Compare())

	aa := AtomicAckETH(make([]byte, AtomicAckETHLen))
	aa.SetOrigData(0xFEDCBA9876543210)
	assert.Equal(t, []byte{0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10}, []byte(aa))
	assert.Equal(t, uint64(0xFEDCBA9876543210), aa.OrigData())

	im := ImmDt(make([]byte, ImmDtLen))
	im.SetImm(0xDEADBEEF)
	assert.Equal(t, []byte{0xDE, 0xAD, 0xBE, 0xEF}, []byte(im))
	assert.Equal(t, uint32(0xDEADBEEF), im.Imm())
}

func TestSyndromes(t *testing.T) {
	tests := []struct {
		s             uint8
		ack, rnr, nak bool
		arg           uint8
		str           string
	}{
		{AckSyndrome(CreditsUnlimited), true, false, false, 31, "ACK credits=31"},
		{AckSyndrome(0), true, false, false, 0, "ACK credits=0"},
		{RNRNakSyndrome(14), false, true, false, 14, "RNR NAK timer=14"},
		{NakSyndrome(NakPSNSeqError), false, false, true, 0, "NAK PSN sequence error"},
		{NakSyndrome(NakInvalidRequest), false, false, true, 1, "NAK invalid request"},
		{NakSyndrome(NakRemoteAccessError), false, false, true, 2, "NAK remote access error"},
		{NakSyndrome(NakRemoteOpError), false, false, true, 3, "NAK remote operational error"},
		{NakSyndrome(NakInvalidRDRequest), false, false, true, 4, "NAK invalid RD request"},
		{NakSyndrome(9), false, false, true, 9, "NAK code=9"},
		{0x40, false, false, false, 0, "reserved syndrome 0x40"},
		{0x80, false, false, false, 0, "reserved syndrome 0x80"},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			assert.Equal(t, tc.ack, IsAck(tc.s))
			assert.Equal(t, tc.rnr, IsRNRNak(tc.s))
			assert.Equal(t, tc.nak, IsNak(tc.s))
			switch {
			case tc.ack:
				assert.Equal(t, tc.arg, CreditCount(tc.s))
			case tc.rnr:
				assert.Equal(t, tc.arg, RNRTimer(tc.s))
			case tc.nak:
				assert.Equal(t, tc.arg, NakCode(tc.s))
			}
			assert.Equal(t, tc.str, SyndromeString(tc.s))
		})
	}
	// IBTA encodings: ACK 0b000xxxxx, RNR NAK 0b001xxxxx, NAK 0b011xxxxx.
	require.Equal(t, uint8(0x1F), AckSyndrome(0xFF))
	require.Equal(t, uint8(0x3F), RNRNakSyndrome(0xFF))
	require.Equal(t, uint8(0x60), NakSyndrome(NakPSNSeqError))
}
