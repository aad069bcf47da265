package verbs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// The TCP exchange of client/server runs, as perftest does it: the client
// sends a Hello (what to run), then each side sends the Info of its QP;
// one byte each way brackets every size. All integers are big-endian.

const (
	helloMagic = "GSVH"
	infoMagic  = "GSVQ"
	version    = 1
	maxSizes   = 64
	// InfoLen is the encoded size of an Info.
	InfoLen    = 44
	helloFixed = 16
)

// Hello is what the client asks the server to run.
type Hello struct {
	Case    string
	Iters   int
	TxDepth int
	Sizes   []int64
}

// Info is one side's QP: what the peer needs to move it to RTR and to
// address its buffer.
type Info struct {
	QPN, PSN, RKey uint32
	Addr           uint64
	LID            uint16
	MTU            uint8 // ibv_mtu enum of the port's active MTU
	Port           uint8
	GID            [16]byte
}

// AppendHello appends h's encoding.
func AppendHello(b []byte, h Hello) ([]byte, error) {
	ci := slices.Index(Cases, h.Case)
	if ci < 0 {
		return nil, fmt.Errorf("hello: case %q unknown", h.Case)
	}
	if len(h.Sizes) == 0 || len(h.Sizes) > maxSizes {
		return nil, fmt.Errorf("hello: %d sizes, want 1 to %d", len(h.Sizes), maxSizes)
	}
	b = append(b, helloMagic...)
	b = append(b, version, byte(ci))
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Sizes)))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Iters))
	b = binary.BigEndian.AppendUint32(b, uint32(h.TxDepth))
	for _, s := range h.Sizes {
		b = binary.BigEndian.AppendUint64(b, uint64(s))
	}
	return b, nil
}

// HelloLen returns the length of the Hello whose first helloFixed bytes
// are head, or an error if head is not the start of one.
func HelloLen(head []byte) (int, error) {
	if len(head) < helloFixed {
		return 0, fmt.Errorf("hello: %d bytes, want at least %d", len(head), helloFixed)
	}
	if !bytes.Equal(head[:4], []byte(helloMagic)) {
		return 0, fmt.Errorf("hello: magic %q, want %q (is the peer a ginsim validate verbs client?)", head[:4], helloMagic)
	}
	if head[4] != version {
		return 0, fmt.Errorf("hello: version %d, want %d", head[4], version)
	}
	n := int(binary.BigEndian.Uint16(head[6:]))
	if n == 0 || n > maxSizes {
		return 0, fmt.Errorf("hello: field sizes: %d sizes, want 1 to %d", n, maxSizes)
	}
	return helloFixed + 8*n, nil
}

// ParseHello decodes and checks a Hello.
func ParseHello(b []byte) (Hello, error) {
	n, err := HelloLen(b)
	if err != nil {
		return Hello{}, err
	}
	if len(b) != n {
		return Hello{}, fmt.Errorf("hello: %d bytes, want %d", len(b), n)
	}
	if int(b[5]) >= len(Cases) {
		return Hello{}, fmt.Errorf("hello: field case: %d unknown", b[5])
	}
	h := Hello{Case: Cases[b[5]], Iters: int(binary.BigEndian.Uint32(b[8:])), TxDepth: int(binary.BigEndian.Uint32(b[12:]))}
	for i := helloFixed; i < n; i += 8 {
		h.Sizes = append(h.Sizes, int64(binary.BigEndian.Uint64(b[i:])))
	}
	o := Options{Case: h.Case, Sizes: h.Sizes, Iters: h.Iters, TxDepth: h.TxDepth}
	if err := o.Check(); err != nil {
		return Hello{}, fmt.Errorf("hello: %w", err)
	}
	if o.Iters != h.Iters || o.TxDepth != h.TxDepth {
		return Hello{}, fmt.Errorf("hello: field iters or tx depth is 0")
	}
	return h, nil
}

// AppendInfo appends i's encoding (InfoLen bytes).
func AppendInfo(b []byte, i Info) []byte {
	b = append(b, infoMagic...)
	b = binary.BigEndian.AppendUint32(b, i.QPN)
	b = binary.BigEndian.AppendUint32(b, i.PSN)
	b = binary.BigEndian.AppendUint32(b, i.RKey)
	b = binary.BigEndian.AppendUint64(b, i.Addr)
	b = binary.BigEndian.AppendUint16(b, i.LID)
	b = append(b, i.MTU, i.Port)
	return append(b, i.GID[:]...)
}

// ParseInfo decodes and checks an Info.
func ParseInfo(b []byte) (Info, error) {
	if len(b) != InfoLen {
		return Info{}, fmt.Errorf("qp info: %d bytes, want %d", len(b), InfoLen)
	}
	if !bytes.Equal(b[:4], []byte(infoMagic)) {
		return Info{}, fmt.Errorf("qp info: magic %q, want %q", b[:4], infoMagic)
	}
	i := Info{QPN: binary.BigEndian.Uint32(b[4:]), PSN: binary.BigEndian.Uint32(b[8:]), RKey: binary.BigEndian.Uint32(b[12:]),
		Addr: binary.BigEndian.Uint64(b[16:]), LID: binary.BigEndian.Uint16(b[24:]), MTU: b[26], Port: b[27]}
	copy(i.GID[:], b[28:])
	switch {
	case i.QPN == 0 || i.QPN >= 1<<24:
		return Info{}, fmt.Errorf("qp info: field qpn: %#x is not a 24-bit QP number above 0", i.QPN)
	case i.PSN >= 1<<24:
		return Info{}, fmt.Errorf("qp info: field psn: %#x is not 24 bits", i.PSN)
	case i.MTU < 1 || i.MTU > 5:
		return Info{}, fmt.Errorf("qp info: field mtu: %d is not an ibv_mtu (1 to 5)", i.MTU)
	case i.Addr == 0:
		return Info{}, fmt.Errorf("qp info: field addr: 0")
	}
	return i, nil
}
