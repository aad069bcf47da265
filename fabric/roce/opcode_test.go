package roce

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOpcodeProperties(t *testing.T) {
	type props struct {
		reth, aeth, atomic, atomicAck, imm, req, resp, payload bool
	}
	tests := []struct {
		op   Opcode
		name string
		p    props
	}{
		{OpSendFirst, "RC SEND First", props{req: true, payload: true}},
		{OpSendMiddle, "RC SEND Middle", props{req: true, payload: true}},
		{OpSendLast, "RC SEND Last", props{req: true, payload: true}},
		{OpSendLastImm, "RC SEND Last with Immediate", props{imm: true, req: true, payload: true}},
		{OpSendOnly, "RC SEND Only", props{req: true, payload: true}},
		{OpSendOnlyImm, "RC SEND Only with Immediate", props{imm: true, req: true, payload: true}},
		{OpWriteFirst, "RC RDMA WRITE First", props{reth: true, req: true, payload: true}},
		{OpWriteMiddle, "RC RDMA WRITE Middle", props{req: true, payload: true}},
		{OpWriteLast, "RC RDMA WRITE Last", props{req: true, payload: true}},
		{OpWriteLastImm, "RC RDMA WRITE Last with Immediate", props{imm: true, req: true, payload: true}},
		{OpWriteOnly, "RC RDMA WRITE Only", props{reth: true, req: true, payload: true}},
		{OpWriteOnlyImm, "RC RDMA WRITE Only with Immediate", props{reth: true, imm: true, req: true, payload: true}},
		{OpReadRequest, "RC RDMA READ Request", props{reth: true, req: true}},
		{OpReadRespFirst, "RC RDMA READ Response First", props{aeth: true, resp: true, payload: true}},
		{OpReadRespMiddle, "RC RDMA READ Response Middle", props{resp: true, payload: true}},
		{OpReadRespLast, "RC RDMA READ Response Last", props{aeth: true, resp: true, payload: true}},
		{OpReadRespOnly, "RC RDMA READ Response Only", props{aeth: true, resp: true, payload: true}},
		{OpAck, "RC Acknowledge", props{aeth: true, resp: true}},
		{OpAtomicAck, "RC ATOMIC Acknowledge", props{aeth: true, atomicAck: true, resp: true}},
		{OpCmpSwap, "RC CmpSwap", props{atomic: true, req: true}},
		{OpFetchAdd, "RC FetchAdd", props{atomic: true, req: true}},
		{OpCNP, "CNP", props{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.op
			assert.Equal(t, tc.name, o.String())
			assert.True(t, o.Valid())
			got := props{o.HasRETH(), o.HasAETH(), o.HasAtomicETH(), o.HasAtomicAckETH(), o.HasImm(),
				o.IsRequest(), o.IsResponse(), o.HasPayload()}
			assert.Equal(t, tc.p, got)
			// Exactly one position in the message, except for the CNP.
			n := 0
			for _, b := range []bool{o.IsFirst(), o.IsMiddle(), o.IsLast(), o.IsOnly()} {
				if b {
					n++
				}
			}
			if o.IsCNP() {
				assert.Equal(t, 0, n)
			} else {
				assert.Equal(t, 1, n)
			}
		})
	}
	assert.True(t, OpSendLastImm.IsSend())
	assert.False(t, OpWriteFirst.IsSend())
	assert.True(t, OpWriteOnlyImm.IsWrite())
	assert.False(t, OpReadRequest.IsWrite())
	assert.True(t, OpReadRespMiddle.IsReadResponse())
	assert.False(t, OpAck.IsReadResponse())
	assert.True(t, OpCmpSwap.IsAtomic())
	assert.False(t, OpAtomicAck.IsAtomic())
}

func TestOpcodeUnknown(t *testing.T) {
	for _, o := range []Opcode{0x15, 0x1F, 0x24, 0x64, 0x80, 0xFF} {
		assert.False(t, o.Valid(), "%#x", uint8(o))
		assert.False(t, o.IsRequest() || o.IsResponse() || o.HasRETH())
	}
	assert.Equal(t, "Opcode(0x15)", Opcode(0x15).String())
	assert.Equal(t, "Opcode(0xff)", Opcode(0xFF).String())
	// 22 known opcodes in total.
	n := 0
	for i := range 256 {
		if Opcode(i).Valid() {
			n++
		}
	}
	assert.Equal(t, 22, n)
}
