package netemu

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the datagrams, fixed, little-endian.
const (
	RequestBytes = 40
	ReplyBytes   = 32
)

// Magic numbers: "GFRQ" and "GFRP" read as little-endian uint32.
const (
	RequestMagic uint32 = 'G' | 'F'<<8 | 'R'<<16 | 'Q'<<24
	ReplyMagic   uint32 = 'G' | 'F'<<8 | 'R'<<16 | 'P'<<24
	Version      uint16 = 1
)

// Request kinds.
const (
	KindPut uint16 = 1 // a message from Src to Dst
)

// Reply statuses.
const (
	StatusOK  uint16 = 0
	StatusBad uint16 = 1 // the request was refused (a rank out of range, bytes out of range); DeliverNs is 0
)

// MaxBytes is the largest message a request may carry.
const MaxBytes = 1 << 20

// Request asks the model to carry Bytes from rank Src to rank Dst, posted
// at PostNs (the client's CLOCK_MONOTONIC). Seq names it in the reply.
//
//	offset size field
//	0      4    magic "GFRQ"
//	4      2    version (1)
//	6      2    kind (1: put)
//	8      4    src
//	12     4    dst
//	16     8    seq
//	24     8    bytes
//	32     8    post_ns (signed)
type Request struct {
	Kind     uint16
	Src, Dst uint32
	Seq      uint64
	Bytes    uint64
	PostNs   int64
}

// Reply says when the model delivered request Seq of Src to Dst, in the
// client's CLOCK_MONOTONIC nanoseconds.
//
//	offset size field
//	0      4    magic "GFRP"
//	4      2    version (1)
//	6      2    status (0 ok, 1 refused)
//	8      4    src
//	12     4    dst
//	16     8    seq
//	24     8    deliver_ns (signed)
type Reply struct {
	Status    uint16
	Src, Dst  uint32
	Seq       uint64
	DeliverNs int64
}

var le = binary.LittleEndian

// Append appends r's datagram to b.
func (r Request) Append(b []byte) []byte {
	b = le.AppendUint32(b, RequestMagic)
	b = le.AppendUint16(b, Version)
	b = le.AppendUint16(b, r.Kind)
	b = le.AppendUint32(b, r.Src)
	b = le.AppendUint32(b, r.Dst)
	b = le.AppendUint64(b, r.Seq)
	b = le.AppendUint64(b, r.Bytes)
	return le.AppendUint64(b, uint64(r.PostNs))
}

// Append appends r's datagram to b.
func (r Reply) Append(b []byte) []byte {
	b = le.AppendUint32(b, ReplyMagic)
	b = le.AppendUint16(b, Version)
	b = le.AppendUint16(b, r.Status)
	b = le.AppendUint32(b, r.Src)
	b = le.AppendUint32(b, r.Dst)
	b = le.AppendUint64(b, r.Seq)
	return le.AppendUint64(b, uint64(r.DeliverNs))
}

func header(b []byte, size int, magic uint32, what string) error {
	if len(b) != size {
		return fmt.Errorf("netemu: %s of %d bytes, want %d", what, len(b), size)
	}
	if m := le.Uint32(b); m != magic {
		return fmt.Errorf("netemu: %s magic %#08x, want %#08x", what, m, magic)
	}
	if v := le.Uint16(b[4:]); v != Version {
		return fmt.Errorf("netemu: %s version %d, want %d", what, v, Version)
	}
	return nil
}

// DecodeRequest reads a request datagram. It checks the size, magic,
// version and kind, and that Bytes is in [1, MaxBytes]; the ranks are
// checked by the server, which knows how many there are.
func DecodeRequest(b []byte) (Request, error) {
	if err := header(b, RequestBytes, RequestMagic, "request"); err != nil {
		return Request{}, err
	}
	r := Request{Kind: le.Uint16(b[6:]), Src: le.Uint32(b[8:]), Dst: le.Uint32(b[12:]),
		Seq: le.Uint64(b[16:]), Bytes: le.Uint64(b[24:]), PostNs: int64(le.Uint64(b[32:]))}
	if r.Kind != KindPut {
		return r, fmt.Errorf("netemu: request kind %d, want %d (put)", r.Kind, KindPut)
	}
	if r.Bytes < 1 || r.Bytes > MaxBytes {
		return r, fmt.Errorf("netemu: request bytes %d out of [1, %d]", r.Bytes, MaxBytes)
	}
	return r, nil
}

// DecodeReply reads a reply datagram.
func DecodeReply(b []byte) (Reply, error) {
	if err := header(b, ReplyBytes, ReplyMagic, "reply"); err != nil {
		return Reply{}, err
	}
	r := Reply{Status: le.Uint16(b[6:]), Src: le.Uint32(b[8:]), Dst: le.Uint32(b[12:]),
		Seq: le.Uint64(b[16:]), DeliverNs: int64(le.Uint64(b[24:]))}
	if r.Status != StatusOK && r.Status != StatusBad {
		return r, fmt.Errorf("netemu: reply status %d unknown", r.Status)
	}
	return r, nil
}
