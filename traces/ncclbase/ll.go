package ncclbase

import (
	"encoding/binary"
	"fmt"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// LL lines (union ncclLLFifoLine): 16 bytes carry 8 data bytes as data1,
// flag1, data2, flag2 (four 32-bit words); the flag of step i of a
// connection is i+1 (NCCL_LL_FLAG of the step count). A line is valid when
// both flags carry the step's flag, so the data needs no tail or fence.
const (
	llLine     = 16
	llLineData = 8
)

// p2pLL reports whether NCCL moves a point-to-point transfer of bytes,
// split over nch channels, with the LL protocol (addP2pToPlan): at most
// nch × NCCL_P2P_LL_THRESHOLD bytes, on a connection that has LL buffers.
// The P2P transport always allocates them; a NET connection of the p2p
// connection index only with NCCL_ALLOC_P2P_NET_LL_BUFFERS=1 (NetP2PLL).
func (c *Config) p2pLL(bytes uint64, nch int, net bool) bool {
	if net && !c.NetP2PLL {
		return false
	}
	return bytes <= uint64(nch)*uint64(c.P2PLLThreshold)
}

// llChunk is the data bytes of one LL step of a p2p connection:
// buffSizes[LL]/NCCL_STEPS bytes of lines carry half as much data, and
// addP2pToPlan halves the chunk of a network connection whose transfer is
// under 8 steps (always so at LL sizes).
func (c *Config) llChunk(net bool) uint64 {
	lines := uint64(c.LLBuffSize) / uint64(c.Steps)
	if net {
		lines /= 2
	}
	return lines / llLine * llLineData
}

// llSlot is one LL FIFO slot of c: a chunk's lines.
func (c *ncclConn) llSlot() uint64 { return (c.chunk + llLineData - 1) / llLineData * llLine }

// llWire is the LL bytes of step i of c: its lines.
func (c *ncclConn) llWire(i int) uint64 {
	return (c.stepBytes(i) + llLineData - 1) / llLineData * llLine
}

// llOff is the offset of step i's slot in c's LL buffers.
func (c *ncclConn) llOff(i int) uint64 { return uint64(i%c.llSlots) * c.llSlot() }

// llFlagWord is the offset in c's LL buffers of the 8-byte word holding the
// last line's data2 and flag2 for step i: the word both the send proxy
// and the receiving kernel test last.
func (c *ncclConn) llFlagWord(i int) uint64 { return c.llOff(i) + c.llWire(i) - 8 }

// llFlagSet reports whether the word v (data2 | flag2<<32) carries the
// flag of step i.
func llFlagSet(v uint64, i int) bool { return v>>32 == uint64(i+1) }

// llDatum is the 8 data bytes at byte offset off of c's stream: data1 names
// the channel and the 8-byte index, data2 the source and destination, so
// that the receiving kernel checks each line against the routing.
func (c *ncclConn) llDatum(off uint64) (data1, data2 uint32) {
	return uint32(c.ch)<<28 | uint32(off/llLineData)&(1<<28-1), uint32(c.src)<<16 | uint32(c.dst)&0xffff
}

// llFill writes step i of c into lines as LL lines: the data and the
// step's flag twice per line.
func (c *ncclConn) llFill(lines []byte, i int) {
	base := uint64(i) * c.chunk
	for k := uint64(0); k < uint64(len(lines)); k += llLine {
		d1, d2 := c.llDatum(base + k/llLine*llLineData)
		binary.LittleEndian.PutUint32(lines[k:], d1)
		binary.LittleEndian.PutUint32(lines[k+4:], uint32(i+1))
		binary.LittleEndian.PutUint32(lines[k+8:], d2)
		binary.LittleEndian.PutUint32(lines[k+12:], uint32(i+1))
	}
}

// llCheck checks the lines of step i of c as the receiving kernel read
// them: every flag is the step's and every datum the one its sender
// stored. It returns the offset of the first bad line, or -1.
func (c *ncclConn) llCheck(lines []byte, i int) int {
	base := uint64(i) * c.chunk
	for k := uint64(0); k < uint64(len(lines)); k += llLine {
		d1, d2 := c.llDatum(base + k/llLine*llLineData)
		if binary.LittleEndian.Uint32(lines[k:]) != d1 || binary.LittleEndian.Uint32(lines[k+8:]) != d2 ||
			binary.LittleEndian.Uint32(lines[k+4:]) != uint32(i+1) ||
			binary.LittleEndian.Uint32(lines[k+12:]) != uint32(i+1) {
			return int(k)
		}
	}
	return -1
}

// llSendStep is one LL step of a send. NET: wait for the proxy's slot
// credit, write the connFifo size and store the lines into the host LL
// buffer over PCIe (the proxy checks the flags, not a tail). P2P: wait for
// the receiver's head credit and store the lines over NVLink straight into
// the receiver's LL buffer. No fence and no tail either way.
func (w *Workload) llSendStep(t *gpu.Group, c *ncclConn, i int) {
	off, n := c.llOff(i), c.llWire(i)
	lines := c.llSrc[off : off+n]
	if c.net {
		t.WaitWord(c.sctl, ctlHead, "nccl LL send: proxy slot credit", func(v uint64) bool { return v > uint64(i) })
		t.Store64(c.sctl, ctlSize, c.stepBytes(i))
		c.llFill(lines, i)
		c.lastQueued = t.Write(c.sll, off, lines, sim.Bytes(n))
		return
	}
	steps := uint64(w.cfg.Steps)
	t.WaitWord(c.phead, 0, "nccl p2p LL send: receiver credit", func(v uint64) bool { return v+steps > uint64(i) })
	c.llFill(lines, i)
	t.Write(c.rll, off, lines, sim.Bytes(n))
}

// llWaitData waits until the LL lines of step i of c are in the receive
// LL buffer (host memory over PCIe for NET, local HBM for P2P), reads and
// checks them. NCCL's threads poll every line; the lines of one WRITE or
// one NVLink copy land in order, so the last flag stands for all of them.
func (w *Workload) llWaitData(t *gpu.Group, c *ncclConn, i int) {
	t.WaitWord(c.rll, c.llFlagWord(i), "nccl LL recv: line flags", func(v uint64) bool { return llFlagSet(v, i) })
	buf := c.llDst[:c.llWire(i)]
	t.Read(c.rll, c.llOff(i), buf)
	if k := c.llCheck(buf, i); k >= 0 {
		s := t.GPU().Sim()
		s.Fail(fmt.Errorf("nccl: t=%v connection %d>%d.%d step %d: LL line at %d is not what the sender stored",
			s.Now(), c.src, c.dst, c.ch, i, k))
		return
	}
	c.llGot += c.stepBytes(i)
}
