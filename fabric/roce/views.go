package roce

import "encoding/binary"

// Header lengths in bytes.
const (
	BTHLen          = 12 // Base Transport Header
	RETHLen         = 16 // RDMA Extended Transport Header
	AETHLen         = 4  // ACK Extended Transport Header
	AtomicETHLen    = 28 // Atomic Extended Transport Header
	AtomicAckETHLen = 8  // Atomic ACK Extended Transport Header
	ImmDtLen        = 4  // Immediate Data
	CNPReservedLen  = 16 // reserved bytes after the BTH of a CNP
	ICRCLen         = 4  // invariant CRC trailer
)

// BTH is a view of a 12-byte Base Transport Header:
//
//	byte 0      OpCode
//	byte 1      SE(7) M(6) PadCnt(5:4) TVer(3:0)
//	bytes 2-3   P_Key
//	byte 4      FECN(7) BECN(6) Resv6(5:0)
//	bytes 5-7   DestQP
//	byte 8      AckReq(7) Resv7(6:0)
//	bytes 9-11  PSN
//
// The slice must be at least BTHLen bytes long.
type BTH []byte

// Opcode returns the OpCode field.
func (b BTH) Opcode() Opcode { return Opcode(b[0]) }

// SetOpcode sets the OpCode field.
func (b BTH) SetOpcode(o Opcode) { b[0] = byte(o) }

// SE returns the solicited event bit.
func (b BTH) SE() bool { return b[1]&0x80 != 0 }

// SetSE sets the solicited event bit.
func (b BTH) SetSE(v bool) { b[1] = setBit(b[1], 0x80, v) }

// MigReq returns the migration request bit.
func (b BTH) MigReq() bool { return b[1]&0x40 != 0 }

// SetMigReq sets the migration request bit.
func (b BTH) SetMigReq(v bool) { b[1] = setBit(b[1], 0x40, v) }

// PadCount returns the pad count (0..3 bytes of pad after the payload).
func (b BTH) PadCount() uint8 { return b[1] >> 4 & 3 }

// SetPadCount sets the pad count; only the low 2 bits of n are used.
func (b BTH) SetPadCount(n uint8) { b[1] = b[1]&^0x30 | (n&3)<<4 }

// TVer returns the transport header version (0 for IBTA).
func (b BTH) TVer() uint8 { return b[1] & 0x0F }

// SetTVer sets the transport header version; only the low 4 bits are used.
func (b BTH) SetTVer(v uint8) { b[1] = b[1]&^0x0F | v&0x0F }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// SetPKey sets the partition key.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[2:], k) }

// FECN returns the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[4]&0x80 != 0 }

// SetFECN sets the forward explicit congestion notification bit.
func (b BTH) SetFECN(v bool) { b[4] = setBit(b[4], 0x80, v) }

// BECN returns the backward explicit congestion notification bit.
func (b BTH) BECN() bool { return b[4]&0x40 != 0 }

// SetBECN sets the backward explicit congestion notification bit.
func (b BTH) SetBECN(v bool) { b[4] = setBit(b[4], 0x40, v) }

// DestQP returns the 24-bit destination queue pair number.
func (b BTH) DestQP() uint32 { return get24(b[5:]) }

// SetDestQP sets the destination QP; only the low 24 bits of qp are used.
// It leaves the FECN/BECN byte alone.
func (b BTH) SetDestQP(qp uint32) { put24(b[5:], qp) }

// AckReq returns the acknowledge request bit.
func (b BTH) AckReq() bool { return b[8]&0x80 != 0 }

// SetAckReq sets the acknowledge request bit.
func (b BTH) SetAckReq(v bool) { b[8] = setBit(b[8], 0x80, v) }

// PSN returns the 24-bit packet sequence number.
func (b BTH) PSN() uint32 { return get24(b[9:]) }

// SetPSN sets the PSN; only the low 24 bits of psn are used. It leaves the
// AckReq byte alone.
func (b BTH) SetPSN(psn uint32) { put24(b[9:], psn) }

// RETH is a view of a 16-byte RDMA Extended Transport Header: virtual
// address (8), R_Key (4), DMA length (4). The slice must be at least RETHLen
// bytes long.
type RETH []byte

// VA returns the remote virtual address.
func (b RETH) VA() uint64 { return binary.BigEndian.Uint64(b) }

// SetVA sets the remote virtual address.
func (b RETH) SetVA(va uint64) { binary.BigEndian.PutUint64(b, va) }

// RKey returns the remote key.
func (b RETH) RKey() uint32 { return binary.BigEndian.Uint32(b[8:]) }

// SetRKey sets the remote key.
func (b RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(b[8:], k) }

// DMALen returns the length of the whole RDMA operation in bytes.
func (b RETH) DMALen() uint32 { return binary.BigEndian.Uint32(b[12:]) }

// SetDMALen sets the DMA length.
func (b RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32(b[12:], n) }

// AETH is a view of a 4-byte ACK Extended Transport Header: syndrome (1),
// MSN (3). The slice must be at least AETHLen bytes long.
type AETH []byte

// Syndrome returns the syndrome byte; see IsAck, IsRNRNak and IsNak.
func (b AETH) Syndrome() uint8 { return b[0] }

// SetSyndrome sets the syndrome byte.
func (b AETH) SetSyndrome(s uint8) { b[0] = s }

// MSN returns the 24-bit message sequence number.
func (b AETH) MSN() uint32 { return get24(b[1:]) }

// SetMSN sets the MSN; only the low 24 bits of msn are used.
func (b AETH) SetMSN(msn uint32) { put24(b[1:], msn) }

// AtomicETH is a view of a 28-byte Atomic Extended Transport Header:
// virtual address (8), R_Key (4), swap or add data (8), compare data (8). The
// slice must be at least AtomicETHLen bytes long.
type AtomicETH []byte

// VA returns the remote virtual address of the 8-byte operand.
func (b AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(b) }

// SetVA sets the remote virtual address.
func (b AtomicETH) SetVA(va uint64) { binary.BigEndian.PutUint64(b, va) }

// RKey returns the remote key.
func (b AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(b[8:]) }

// SetRKey sets the remote key.
func (b AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(b[8:], k) }

// SwapAdd returns the swap (CmpSwap) or add (FetchAdd) operand.
func (b AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(b[12:]) }

// SetSwapAdd sets the swap or add operand.
func (b AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(b[12:], v) }

// Compare returns the compare operand (CmpSwap only).
func (b AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(b[20:]) }

// SetCompare sets the compare operand.
func (b AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(b[20:], v) }

// AtomicAckETH is a view of an 8-byte Atomic ACK Extended Transport Header
// holding the original remote data. The slice must be at least
// AtomicAckETHLen bytes long.
type AtomicAckETH []byte

// OrigData returns the value the target held before the atomic.
func (b AtomicAckETH) OrigData() uint64 { return binary.BigEndian.Uint64(b) }

// SetOrigData sets the original remote data.
func (b AtomicAckETH) SetOrigData(v uint64) { binary.BigEndian.PutUint64(b, v) }

// ImmDt is a view of the 4-byte Immediate Data header. The slice must be at
// least ImmDtLen bytes long.
type ImmDt []byte

// Imm returns the immediate data as a big-endian (network order) value.
func (b ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(b) }

// SetImm sets the immediate data.
func (b ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(b, v) }

func setBit(b, mask byte, v bool) byte {
	if v {
		return b | mask
	}
	return b &^ mask
}

func get24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}
