package roce

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

var benchHeader = Header{Opcode: OpWriteFirst, PKey: DefaultPKey, DestQP: 0x12, PSN: 5, AckReq: true,
	VA: 0x7F0000001000, RKey: 0xAABB, DMALen: 1 << 20}

func TestZeroAllocs(t *testing.T) {
	buf := make([]byte, 128)
	enc := unhex(t, headerCases[6].hex)
	frame := AppendFrame(nil, &specV4, &benchHeader, make([]byte, 4096))
	frame6 := AppendFrame(nil, &specV6, &benchHeader, make([]byte, 4096))
	dst := make([]byte, 0, 8192)
	payload := make([]byte, 4096)
	checks := map[string]func(){
		"Encode":       func() { _, _ = benchHeader.Encode(buf) },
		"DecodeHeader": func() { _, _, _ = DecodeHeader(enc) },
		"AppendFrame":  func() { _ = AppendFrame(dst[:0], &specV6, &benchHeader, payload) },
		"ParseFrame":   func() { _, _ = ParseFrame(frame) },
		"ParseFrame6":  func() { _, _ = ParseFrame(frame6) },
		"ICRC":         func() { _ = ICRC(frame6) },
		"WireLen":      func() { _ = WireLen(true, &benchHeader, 4096) },
	}
	for name, fn := range checks {
		assert.Zero(t, testing.AllocsPerRun(100, fn), name)
	}
}

func BenchmarkHeaderEncode(b *testing.B) {
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = benchHeader.Encode(buf)
	}
}

func BenchmarkDecodeHeader(b *testing.B) {
	buf := make([]byte, 64)
	n, _ := benchHeader.Encode(buf)
	buf = buf[:n]
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = DecodeHeader(buf)
	}
}

func BenchmarkAppendFrame4K(b *testing.B) {
	payload := make([]byte, 4096)
	dst := make([]byte, 0, 8192)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendFrame(dst[:0], &specV4, &benchHeader, payload)
	}
}

func BenchmarkParseFrame4K(b *testing.B) {
	frame := AppendFrame(nil, &specV4, &benchHeader, make([]byte, 4096))
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseFrame(frame)
	}
}

func BenchmarkICRC64(b *testing.B) {
	h := Header{Opcode: OpAck, PKey: DefaultPKey, DestQP: 1, PSN: 2, Syndrome: AckSyndrome(CreditsUnlimited)}
	frame := AppendFrame(nil, &specV4, &h, nil)
	b.ReportAllocs()
	for b.Loop() {
		_ = ICRC(frame)
	}
}
