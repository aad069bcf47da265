package roce

import (
	"errors"
	"fmt"
)

// DefaultPKey is the default partition key (full membership of the default
// partition). The zero Header has P_Key 0, which is encoded as is; set PKey
// explicitly.
const DefaultPKey uint16 = 0xFFFF

// Max24 is the largest value of the 24-bit DestQP, PSN and MSN fields.
const Max24 = 1<<24 - 1

// Errors returned by Encode, DecodeHeader and ParseFrame. They are wrapped
// with details; test with errors.Is.
var (
	ErrShort      = errors.New("roce: buffer too short")
	ErrOpcode     = errors.New("roce: unsupported opcode")
	ErrField      = errors.New("roce: field out of range")
	ErrTVer       = errors.New("roce: unsupported BTH transport version")
	ErrNotRoCE    = errors.New("roce: not a RoCEv2 frame")
	ErrLength     = errors.New("roce: inconsistent length fields")
	ErrFrameLarge = errors.New("roce: frame too large")
)

// Header is the decoded transport header of one RC packet: the BTH plus the
// extension headers its opcode carries (RETH, AtomicETH, AETH, AtomicAckETH,
// ImmDt, in that wire order). Fields of extension headers that the opcode
// does not carry are ignored by Encode and zero after DecodeHeader. Header
// holds no pointers and is meant to be copied by value.
type Header struct {
	Opcode   Opcode
	SE       bool   // solicited event
	MigReq   bool   // migration request
	PadCount uint8  // pad bytes after the payload, 0..3
	PKey     uint16 // partition key; see DefaultPKey
	FECN     bool   // forward explicit congestion notification
	BECN     bool   // backward explicit congestion notification
	DestQP   uint32 // destination QP number, 24 bits
	AckReq   bool   // acknowledge request
	PSN      uint32 // packet sequence number, 24 bits
	VA       uint64 // RETH or AtomicETH virtual address
	RKey     uint32 // RETH or AtomicETH remote key
	DMALen   uint32 // RETH DMA length
	Syndrome uint8  // AETH syndrome; see AckSyndrome, RNRNakSyndrome, NakSyndrome
	MSN      uint32 // AETH message sequence number, 24 bits
	SwapAdd  uint64 // AtomicETH swap (CmpSwap) or add (FetchAdd) data
	Compare  uint64 // AtomicETH compare data (CmpSwap)
	OrigData uint64 // AtomicAckETH original remote data
	Imm      uint32 // ImmDt immediate data
}

// opLen is the encoded transport header length per opcode, 0 if unknown.
var opLen = func() (t [256]uint8) {
	for i := range t {
		o := Opcode(i)
		if !o.Valid() {
			continue
		}
		n := BTHLen
		if o.HasRETH() {
			n += RETHLen
		}
		if o.HasAtomicETH() {
			n += AtomicETHLen
		}
		if o.HasAETH() {
			n += AETHLen
		}
		if o.HasAtomicAckETH() {
			n += AtomicAckETHLen
		}
		if o.HasImm() {
			n += ImmDtLen
		}
		if o.IsCNP() {
			n += CNPReservedLen
		}
		t[i] = uint8(n)
	}
	return t
}()

// Len returns the encoded length of the BTH and the extension headers that
// h.Opcode carries, or 0 for an opcode this package does not know.
func (h *Header) Len() int { return int(opLen[h.Opcode]) }

// Validate reports whether h can be encoded: a known opcode, PadCount at most
// 3 and DestQP, PSN and MSN within 24 bits.
func (h *Header) Validate() error {
	if !h.Opcode.Valid() {
		return fmt.Errorf("%w: 0x%02x", ErrOpcode, uint8(h.Opcode))
	}
	if h.PadCount > 3 || h.DestQP > Max24 || h.PSN > Max24 || h.MSN > Max24 {
		return fmt.Errorf("%w: pad %d qp %#x psn %#x msn %#x", ErrField, h.PadCount, h.DestQP, h.PSN, h.MSN)
	}
	return nil
}

// Encode writes h's headers (Len bytes) to the start of b and returns the
// number of bytes written. Reserved bits and TVer are written as zero. It
// does not allocate; it fails if h does not Validate or b is too short.
func (h *Header) Encode(b []byte) (int, error) {
	if err := h.Validate(); err != nil {
		return 0, err
	}
	n := h.Len()
	if len(b) < n {
		return 0, fmt.Errorf("%w: need %d bytes, have %d", ErrShort, n, len(b))
	}
	h.encode(b[:n])
	return n, nil
}

// encode writes a validated header into b, which is exactly h.Len() bytes.
func (h *Header) encode(b []byte) {
	bth := BTH(b[:BTHLen])
	bth[0] = byte(h.Opcode)
	bth[1] = (h.PadCount & 3) << 4
	bth.SetSE(h.SE)
	bth.SetMigReq(h.MigReq)
	bth.SetPKey(h.PKey)
	bth[4] = 0
	bth.SetFECN(h.FECN)
	bth.SetBECN(h.BECN)
	bth.SetDestQP(h.DestQP)
	bth[8] = 0
	bth.SetAckReq(h.AckReq)
	bth.SetPSN(h.PSN)
	o := h.Opcode
	p := b[BTHLen:]
	if o.HasRETH() {
		r := RETH(p[:RETHLen])
		r.SetVA(h.VA)
		r.SetRKey(h.RKey)
		r.SetDMALen(h.DMALen)
		p = p[RETHLen:]
	}
	if o.HasAtomicETH() {
		a := AtomicETH(p[:AtomicETHLen])
		a.SetVA(h.VA)
		a.SetRKey(h.RKey)
		a.SetSwapAdd(h.SwapAdd)
		a.SetCompare(h.Compare)
		p = p[AtomicETHLen:]
	}
	if o.HasAETH() {
		a := AETH(p[:AETHLen])
		a.SetSyndrome(h.Syndrome)
		a.SetMSN(h.MSN)
		p = p[AETHLen:]
	}
	if o.HasAtomicAckETH() {
		AtomicAckETH(p[:AtomicAckETHLen]).SetOrigData(h.OrigData)
		p = p[AtomicAckETHLen:]
	}
	if o.HasImm() {
		ImmDt(p[:ImmDtLen]).SetImm(h.Imm)
		p = p[ImmDtLen:]
	}
	if o.IsCNP() {
		clear(p[:CNPReservedLen])
	}
}

// DecodeHeader decodes the transport headers at the start of b and returns
// them with the number of bytes consumed (Header.Len). It fails on an
// unknown opcode, a nonzero TVer or a buffer shorter than the opcode's
// headers. Reserved bits are ignored. It does not allocate on success.
func DecodeHeader(b []byte) (Header, int, error) {
	var h Header
	if len(b) < BTHLen {
		return h, 0, fmt.Errorf("%w: BTH needs %d bytes, have %d", ErrShort, BTHLen, len(b))
	}
	bth := BTH(b)
	o := bth.Opcode()
	if !o.Valid() {
		return h, 0, fmt.Errorf("%w: 0x%02x", ErrOpcode, uint8(o))
	}
	if v := bth.TVer(); v != 0 {
		return h, 0, fmt.Errorf("%w: %d", ErrTVer, v)
	}
	n := int(opLen[o])
	if len(b) < n {
		return h, 0, fmt.Errorf("%w: %v needs %d bytes, have %d", ErrShort, o, n, len(b))
	}
	h.Opcode = o
	h.SE = bth.SE()
	h.MigReq = bth.MigReq()
	h.PadCount = bth.PadCount()
	h.PKey = bth.PKey()
	h.FECN = bth.FECN()
	h.BECN = bth.BECN()
	h.DestQP = bth.DestQP()
	h.AckReq = bth.AckReq()
	h.PSN = bth.PSN()
	p := b[BTHLen:n]
	if o.HasRETH() {
		r := RETH(p)
		h.VA, h.RKey, h.DMALen = r.VA(), r.RKey(), r.DMALen()
		p = p[RETHLen:]
	}
	if o.HasAtomicETH() {
		a := AtomicETH(p)
		h.VA, h.RKey, h.SwapAdd, h.Compare = a.VA(), a.RKey(), a.SwapAdd(), a.Compare()
		p = p[AtomicETHLen:]
	}
	if o.HasAETH() {
		a := AETH(p)
		h.Syndrome, h.MSN = a.Syndrome(), a.MSN()
		p = p[AETHLen:]
	}
	if o.HasAtomicAckETH() {
		h.OrigData = AtomicAckETH(p).OrigData()
		p = p[AtomicAckETHLen:]
	}
	if o.HasImm() {
		h.Imm = ImmDt(p).Imm()
	}
	return h, n, nil
}
