package roce

import "strconv"

// Opcode is a BTH OpCode. The values below are the IBTA Reliable Connection
// (RC) opcodes (transport bits 000) plus the RoCEv2 congestion notification
// packet, which is all that ginsim's RC NIC model sends.
type Opcode uint8

// RC opcodes (IBTA Vol. 1, table "OpCode field") and the RoCEv2 CNP.
const (
	OpSendFirst      Opcode = 0x00
	OpSendMiddle     Opcode = 0x01
	OpSendLast       Opcode = 0x02
	OpSendLastImm    Opcode = 0x03
	OpSendOnly       Opcode = 0x04
	OpSendOnlyImm    Opcode = 0x05
	OpWriteFirst     Opcode = 0x06
	OpWriteMiddle    Opcode = 0x07
	OpWriteLast      Opcode = 0x08
	OpWriteLastImm   Opcode = 0x09
	OpWriteOnly      Opcode = 0x0A
	OpWriteOnlyImm   Opcode = 0x0B
	OpReadRequest    Opcode = 0x0C
	OpReadRespFirst  Opcode = 0x0D
	OpReadRespMiddle Opcode = 0x0E
	OpReadRespLast   Opcode = 0x0F
	OpReadRespOnly   Opcode = 0x10
	OpAck            Opcode = 0x11
	OpAtomicAck      Opcode = 0x12
	OpCmpSwap        Opcode = 0x13
	OpFetchAdd       Opcode = 0x14

	// OpCNP is the RoCEv2 Congestion Notification Packet (transport bits
	// 100, opcode 0x81). Its BTH is followed by 16 reserved bytes
	// (CNPReservedLen) and it carries BECN set by convention.
	OpCNP Opcode = 0x81
)

// opcode properties, one bit each.
const (
	fValid uint16 = 1 << iota
	fRETH
	fAETH
	fAtomicETH
	fAtomicAckETH
	fImm
	fRequest
	fResponse
	fPayload
	fFirst
	fMiddle
	fLast
	fOnly
	fCNP
)

type opInfo struct {
	flags uint16
	name  string
}

var opTable = [256]opInfo{
	OpSendFirst:      {fValid | fRequest | fPayload | fFirst, "RC SEND First"},
	OpSendMiddle:     {fValid | fRequest | fPayload | fMiddle, "RC SEND Middle"},
	OpSendLast:       {fValid | fRequest | fPayload | fLast, "RC SEND Last"},
	OpSendLastImm:    {fValid | fRequest | fPayload | fLast | fImm, "RC SEND Last with Immediate"},
	OpSendOnly:       {fValid | fRequest | fPayload | fOnly, "RC SEND Only"},
	OpSendOnlyImm:    {fValid | fRequest | fPayload | fOnly | fImm, "RC SEND Only with Immediate"},
	OpWriteFirst:     {fValid | fRequest | fPayload | fFirst | fRETH, "RC RDMA WRITE First"},
	OpWriteMiddle:    {fValid | fRequest | fPayload | fMiddle, "RC RDMA WRITE Middle"},
	OpWriteLast:      {fValid | fRequest | fPayload | fLast, "RC RDMA WRITE Last"},
	OpWriteLastImm:   {fValid | fRequest | fPayload | fLast | fImm, "RC RDMA WRITE Last with Immediate"},
	OpWriteOnly:      {fValid | fRequest | fPayload | fOnly | fRETH, "RC RDMA WRITE Only"},
	OpWriteOnlyImm:   {fValid | fRequest | fPayload | fOnly | fRETH | fImm, "RC RDMA WRITE Only with Immediate"},
	OpReadRequest:    {fValid | fRequest | fOnly | fRETH, "RC RDMA READ Request"},
	OpReadRespFirst:  {fValid | fResponse | fPayload | fFirst | fAETH, "RC RDMA READ Response First"},
	OpReadRespMiddle: {fValid | fResponse | fPayload | fMiddle, "RC RDMA READ Response Middle"},
	OpReadRespLast:   {fValid | fResponse | fPayload | fLast | fAETH, "RC RDMA READ Response Last"},
	OpReadRespOnly:   {fValid | fResponse | fPayload | fOnly | fAETH, "RC RDMA READ Response Only"},
	OpAck:            {fValid | fResponse | fOnly | fAETH, "RC Acknowledge"},
	OpAtomicAck:      {fValid | fResponse | fOnly | fAETH | fAtomicAckETH, "RC ATOMIC Acknowledge"},
	OpCmpSwap:        {fValid | fRequest | fOnly | fAtomicETH, "RC CmpSwap"},
	OpFetchAdd:       {fValid | fRequest | fOnly | fAtomicETH, "RC FetchAdd"},
	OpCNP:            {fValid | fCNP, "CNP"},
}

func (o Opcode) has(f uint16) bool { return opTable[o].flags&f != 0 }

// String returns the IBTA name of the opcode prefixed with the transport,
// for example "RC RDMA WRITE Only with Immediate", "RC Acknowledge" or
// "CNP"; opcodes this package does not know print as "Opcode(0xNN)".
func (o Opcode) String() string {
	if n := opTable[o].name; n != "" {
		return n
	}
	s := strconv.FormatUint(uint64(o)|0x100, 16) // keeps the leading zero
	return "Opcode(0x" + s[1:] + ")"
}

// Valid reports whether this package can encode and decode o.
func (o Opcode) Valid() bool { return o.has(fValid) }

// HasRETH reports whether packets with opcode o carry an RDMA extended
// transport header (RDMA WRITE First/Only and RDMA READ Request).
func (o Opcode) HasRETH() bool { return o.has(fRETH) }

// HasAETH reports whether packets with opcode o carry an ACK extended
// transport header (ACK, ATOMIC ACK, READ response First/Last/Only).
func (o Opcode) HasAETH() bool { return o.has(fAETH) }

// HasAtomicETH reports whether packets with opcode o carry an atomic extended
// transport header (CmpSwap, FetchAdd).
func (o Opcode) HasAtomicETH() bool { return o.has(fAtomicETH) }

// HasAtomicAckETH reports whether packets with opcode o carry an atomic ACK
// extended transport header (ATOMIC Acknowledge).
func (o Opcode) HasAtomicAckETH() bool { return o.has(fAtomicAckETH) }

// HasImm reports whether packets with opcode o carry immediate data (the
// "with Immediate" SEND and RDMA WRITE opcodes).
func (o Opcode) HasImm() bool { return o.has(fImm) }

// HasPayload reports whether packets with opcode o may carry a data payload
// (SEND, RDMA WRITE and RDMA READ response packets).
func (o Opcode) HasPayload() bool { return o.has(fPayload) }

// IsRequest reports whether o is sent by the requester (SEND, RDMA WRITE,
// RDMA READ Request, atomics).
func (o Opcode) IsRequest() bool { return o.has(fRequest) }

// IsResponse reports whether o is sent by the responder (RDMA READ responses,
// ACK/NAK, ATOMIC ACK).
func (o Opcode) IsResponse() bool { return o.has(fResponse) }

// IsSend reports whether o is one of the SEND opcodes.
func (o Opcode) IsSend() bool { return o <= OpSendOnlyImm }

// IsWrite reports whether o is one of the RDMA WRITE opcodes.
func (o Opcode) IsWrite() bool { return o >= OpWriteFirst && o <= OpWriteOnlyImm }

// IsReadResponse reports whether o is one of the RDMA READ response opcodes.
func (o Opcode) IsReadResponse() bool { return o >= OpReadRespFirst && o <= OpReadRespOnly }

// IsAtomic reports whether o is an atomic request (CmpSwap or FetchAdd).
func (o Opcode) IsAtomic() bool { return o.has(fAtomicETH) }

// IsCNP reports whether o is the RoCEv2 congestion notification opcode.
func (o Opcode) IsCNP() bool { return o.has(fCNP) }

// IsFirst reports whether o is the first packet of a multi-packet message.
func (o Opcode) IsFirst() bool { return o.has(fFirst) }

// IsMiddle reports whether o is a middle packet of a multi-packet message.
func (o Opcode) IsMiddle() bool { return o.has(fMiddle) }

// IsLast reports whether o is the last packet of a multi-packet message.
func (o Opcode) IsLast() bool { return o.has(fLast) }

// IsOnly reports whether o is a single-packet message (including READ
// requests, ACKs and atomics).
func (o Opcode) IsOnly() bool { return o.has(fOnly) }
