package proxy

import "fmt"

// GFD op bits (the op field of a GPU function descriptor).
const (
	GFDPut           uint16 = 1   // RDMA WRITE of Size bytes
	GFDWithInline    uint16 = 2   // payload is the inline value in q1/q2 (putValue)
	GFDWithCounter   uint16 = 4   // bump local counter CounterID after the CQE
	GFDWithSignalInc uint16 = 8   // ATOMIC_FETCH_ADD +1 on the peer's signal SignalID
	GFDWithSignalAdd uint16 = 16  // ATOMIC_FETCH_ADD +SignalVal on the peer's signal SignalID
	GFDVASignal      uint16 = 32  // signal is a window word (VASigHandle, VASigOff); 2.30 only
	GFDGet           uint16 = 64  // RDMA READ; 2.30 only
	GFDFlush         uint16 = 128 // local GDR read-after-write flush for gets; 2.30 only
)

// GFD is a decoded GPU function descriptor: what the GPU asks the proxy to
// post. Offsets are relative to the registered region named by the handle.
type GFD struct {
	Op                    uint16
	Size                  uint64 // payload bytes (0: signal only)
	SrcOff, SrcHandle     uint64 // put source (or get destination)
	DstOff, DstHandle     uint64 // put destination (or get source)
	Inline                uint64 // putValue payload (GFDWithInline)
	CounterID, SignalID   uint32
	SignalVal             uint64
	Strong                bool   // 2.30 isStrongSignal (carried, ignored on IB)
	VASigOff, VASigHandle uint64 // 2.30 VA signal target
}

// GFDVersion selects the descriptor layout: GFDv1 is NCCL 2.28's 64-byte
// descriptor (8 qwords), GFDv2 is 2.30's 128-byte one (16 qwords, version
// field 2, op in q7).
type GFDVersion int

// Descriptor layouts.
const (
	GFDv1 GFDVersion = 1
	GFDv2 GFDVersion = 2
)

// Qwords returns the descriptor's size in 8-byte words (8 or 16).
func (v GFDVersion) Qwords() int {
	if v == GFDv2 {
		return 16
	}
	return 8
}

// Bytes returns the descriptor's size in bytes (64 or 128).
func (v GFDVersion) Bytes() int { return 8 * v.Qwords() }

const (
	flag  = 1
	m63   = 1<<63 - 1
	m16   = 1<<16 - 1
	m23   = 1<<23 - 1
	m24   = 1<<24 - 1
	m32   = 1<<32 - 1
	m57   = 1<<57 - 1
	m6    = 1<<6 - 1
	vbits = 2 // the version field value of a 2.30 descriptor
)

// Encode writes g into q (v.Qwords() words), every word with its valid flag
// (bit 0) set, and reports a field that does not fit the layout.
func (g *GFD) Encode(v GFDVersion, q []uint64) error {
	n := v.Qwords()
	if len(q) < n {
		return fmt.Errorf("proxy: GFD buffer of %d qwords, need %d", len(q), n)
	}
	if g.Size > m57 || g.SrcOff > m63 || g.SrcHandle > m63 || g.DstOff > m63 || g.DstHandle > m63 {
		return fmt.Errorf("proxy: GFD field out of range: %+v", *g)
	}
	q1, q2 := g.SrcOff, g.SrcHandle
	if g.Op&GFDWithInline != 0 {
		q1, q2 = g.Inline&m32, g.Inline>>32
	}
	if g.Op&GFDVASignal != 0 {
		q1, q2 = g.VASigOff, g.VASigHandle
	}
	sv := g.SignalVal
	switch v {
	case GFDv1:
		if g.Op > m6 || g.CounterID > m16 || g.SignalID > m16 {
			return fmt.Errorf("proxy: 2.28 GFD cannot carry op %#x counter %d signal %d", g.Op, g.CounterID, g.SignalID)
		}
		q[0] = flag | uint64(g.Op)<<1 | g.Size<<7
		q[5] = flag | uint64(g.CounterID)<<1 | uint64(g.SignalID)<<17 | (sv&m16)<<33
		q[6] = flag | (sv>>16&m16)<<1 | (sv>>32)<<17
		q[7] = flag
	case GFDv2:
		if g.CounterID > m23 || g.SignalID > m24 {
			return fmt.Errorf("proxy: 2.30 GFD cannot carry counter %d signal %d", g.CounterID, g.SignalID)
		}
		q[0] = flag | vbits<<1 | g.Size<<7
		q[5] = flag | uint64(g.CounterID)<<1 | uint64(g.SignalID)<<24 | (sv&m16)<<48
		var strong uint64
		if g.Strong {
			strong = 1
		}
		q[6] = flag | strong<<1 | (sv>>16&m16)<<2 | (sv>>32)<<18
		q[7] = flag | uint64(g.Op)<<1
		for i := 8; i < 16; i++ {
			q[i] = flag
		}
	default:
		return fmt.Errorf("proxy: unknown GFD version %d", v)
	}
	q[1] = flag | q1<<1
	q[2] = flag | q2<<1
	q[3] = flag | g.DstOff<<1
	q[4] = flag | g.DstHandle<<1
	return nil
}

// Decode reads a descriptor from q. It assumes every flag is set (the
// proxy checks them before copying).
func Decode(v GFDVersion, q []uint64) GFD {
	var g GFD
	var sv uint64
	switch v {
	case GFDv1:
		g.Op = uint16(q[0] >> 1 & m6)
		g.CounterID = uint32(q[5] >> 1 & m16)
		g.SignalID = uint32(q[5] >> 17 & m16)
		sv = q[5]>>33&m16 | (q[6]>>1&m16)<<16 | (q[6]>>17)<<32
	default:
		g.Op = uint16(q[7] >> 1 & m16)
		g.CounterID = uint32(q[5] >> 1 & m23)
		g.SignalID = uint32(q[5] >> 24 & m24)
		sv = q[5]>>48&m16 | (q[6]>>2&m16)<<16 | (q[6]>>18)<<32
		g.Strong = q[6]>>1&1 == 1
	}
	g.Size = q[0] >> 7
	g.SignalVal = sv
	q1, q2 := q[1]>>1, q[2]>>1
	switch {
	case g.Op&GFDWithInline != 0:
		g.Inline = q1&m32 | q2<<32
	case g.Op&GFDVASignal != 0:
		g.VASigOff, g.VASigHandle = q1, q2
	default:
		g.SrcOff, g.SrcHandle = q1, q2
	}
	g.DstOff, g.DstHandle = q[3]>>1, q[4]>>1
	return g
}
