package pcap

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
)

var update = flag.Bool("update", false, "rewrite testdata/roce.pcapng")

const goldenPath = "testdata/roce.pcapng"

var (
	hostA = roce.FrameSpec{
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x0a}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x0b},
		SrcIP: [16]byte{10, 0, 0, 1}, DstIP: [16]byte{10, 0, 0, 2}, SrcPort: 0xC00C, DSCP: 26, ECN: 2, TTL: 64,
	}
	hostB = roce.FrameSpec{ // the reverse direction
		SrcMAC: hostA.DstMAC, DstMAC: hostA.SrcMAC,
		SrcIP: hostA.DstIP, DstIP: hostA.SrcIP, SrcPort: 0xC00D, DSCP: 26, ECN: 2, TTL: 64,
	}
	hostC = roce.FrameSpec{
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x0c}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x0d}, IPv6: true,
		SrcIP:   [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0c},
		DstIP:   [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d},
		SrcPort: 0xC123, DSCP: 26, ECN: 1, TTL: 32, FlowLabel: 0x12345,
	}
	hostD = roce.FrameSpec{
		SrcMAC: hostC.DstMAC, DstMAC: hostC.SrcMAC, IPv6: true,
		SrcIP: hostC.DstIP, DstIP: hostC.SrcIP, SrcPort: 0xC124, DSCP: 48, TTL: 32,
	}
)

// pkt is one packet of the sample capture.
type pkt struct {
	iface      int
	ts         sim.Time
	spec       *roce.FrameSpec
	h          roce.Header
	payloadLen int
	comment    string
}

const pk = roce.DefaultPKey

// samplePackets is a small RC conversation: a 3-packet RDMA WRITE and its ACK,
// a FetchAdd and its ATOMIC ACK, a 2-packet RDMA READ, a SEND with immediate
// data, an RNR NAK and a CNP, over IPv4 (interface 0) and IPv6 (interface 1).
func samplePackets() []pkt {
	us := func(n int64) sim.Time { return sim.Time(n * int64(sim.Microsecond)) }
	return []pkt{
		{0, us(1), &hostA, roce.Header{Opcode: roce.OpWriteFirst, PKey: pk, DestQP: 0x12, PSN: 5,
			VA: 0x7f0000100000, RKey: 0x1234, DMALen: 2560}, 1024, "qp=0x11 psn=5 wqe=3"},
		{0, us(1) + 84, &hostA, roce.Header{Opcode: roce.OpWriteMiddle, PKey: pk, DestQP: 0x12, PSN: 6}, 1024, "qp=0x11 psn=6 wqe=3"},
		{0, us(2), &hostA, roce.Header{Opcode: roce.OpWriteLast, PKey: pk, DestQP: 0x12, PSN: 7, AckReq: true}, 512, "qp=0x11 psn=7 wqe=3"},
		{0, us(3), &hostB, roce.Header{Opcode: roce.OpAck, PKey: pk, DestQP: 0x11, PSN: 7,
			Syndrome: roce.AckSyndrome(roce.CreditsUnlimited), MSN: 1}, 0, "ack psn=7"},
		{0, us(4), &hostA, roce.Header{Opcode: roce.OpFetchAdd, PKey: pk, DestQP: 0x12, PSN: 8, AckReq: true,
			VA: 0x7f0000200008, RKey: 0x1234, SwapAdd: 1}, 0, "signal add"},
		{0, us(5), &hostB, roce.Header{Opcode: roce.OpAtomicAck, PKey: pk, DestQP: 0x11, PSN: 8,
			Syndrome: roce.AckSyndrome(roce.CreditsUnlimited), MSN: 2, OrigData: 41}, 0, ""},
		{1, us(6), &hostC, roce.Header{Opcode: roce.OpReadRequest, PKey: pk, DestQP: 0x2001, PSN: 100, AckReq: true,
			VA: 0x10000, RKey: 0x77, DMALen: 6000}, 0, "read wqe=9"},
		{1, us(7), &hostD, roce.Header{Opcode: roce.OpReadRespFirst, PKey: pk, DestQP: 0x2000, PSN: 100,
			Syndrome: roce.AckSyndrome(roce.CreditsUnlimited), MSN: 0}, 4096, ""},
		{1, us(8), &hostD, roce.Header{Opcode: roce.OpReadRespLast, PKey: pk, DestQP: 0x2000, PSN: 101,
			Syndrome: roce.AckSyndrome(roce.CreditsUnlimited), MSN: 1}, 1904, ""},
		{1, us(9), &hostC, roce.Header{Opcode: roce.OpSendOnlyImm, SE: true, PKey: pk, DestQP: 0x2001, PSN: 101,
			AckReq: true, PadCount: 1, Imm: 0xCAFEF00D}, 63, "send imm"},
		{1, us(10), &hostD, roce.Header{Opcode: roce.OpAck, PKey: pk, DestQP: 0x2000, PSN: 101,
			Syndrome: roce.RNRNakSyndrome(14), MSN: 1}, 0, "rnr nak"},
		{0, us(11), &hostB, roce.Header{Opcode: roce.OpCNP, PKey: pk, BECN: true, DestQP: 0x11}, 0, "cnp"},
		{0, us(12) + 1, &hostA, roce.Header{Opcode: roce.OpSendOnly, PKey: pk, DestQP: 0x12, PSN: 9}, 0, "tiny"},
	}
}

// payloadFor returns a deterministic payload.
func payloadFor(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i*31 + j)
	}
	return p
}

// writeSample writes the sample capture; odd packets go through WriteRoCE
// (zero payload), even ones through AppendFrame + WritePacket.
func writeSample(t testing.TB, out io.Writer) [][]byte {
	t.Helper()
	return writeSampleSnap(t, out, 0)
}

// writeSampleSnap is writeSample with SetSnapLen(snap); it returns the
// whole frames.
func writeSampleSnap(t testing.TB, out io.Writer, snap int) [][]byte {
	t.Helper()
	w, err := NewWriter(out)
	require.NoError(t, err)
	require.NoError(t, w.SetSnapLen(snap))
	id, err := w.AddInterface("sw0-p1", "leaf0 port 1 (IPv4 RoCEv2)")
	require.NoError(t, err)
	require.Equal(t, 0, id)
	id, err = w.AddInterface("sw1-p7", "leaf1 port 7 (IPv6 RoCEv2)")
	require.NoError(t, err)
	require.Equal(t, 1, id)
	var frames [][]byte
	for i, p := range samplePackets() {
		var frame []byte
		if i%2 == 1 {
			require.NoError(t, w.WriteRoCE(p.iface, p.ts, p.spec, &p.h, p.payloadLen, p.comment))
			frame = roce.AppendFrame(nil, p.spec, &p.h, make([]byte, p.payloadLen))
		} else {
			frame = roce.AppendFrame(nil, p.spec, &p.h, payloadFor(i, p.payloadLen))
			require.NoError(t, w.WritePacket(p.iface, p.ts, frame, p.comment))
		}
		frames = append(frames, frame)
	}
	require.NoError(t, w.Flush())
	return frames
}

func TestWriterReadBack(t *testing.T) {
	var buf bytes.Buffer
	frames := writeSample(t, &buf)
	pkts := samplePackets()

	r, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	require.Equal(t, layers.LinkTypeEthernet, r.LinkType())
	for i := 0; ; i++ {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if errors.Is(err, io.EOF) {
			require.Equal(t, len(pkts), i)
			break
		}
		require.NoError(t, err)
		p := pkts[i]
		assert.Equal(t, frames[i], data, "packet %d", i)
		assert.Equal(t, p.iface, ci.InterfaceIndex)
		assert.Equal(t, len(data), ci.Length)
		assert.Equal(t, int64(p.ts)/1000, ci.Timestamp.UnixNano(), "ns timestamp, sub-ns truncated")
		if p.comment != "" {
			assert.Equal(t, []string{p.comment}, opts.Comments)
		} else {
			assert.Empty(t, opts.Comments)
		}

		f, err := roce.ParseFrame(data)
		require.NoError(t, err)
		assert.True(t, f.ICRCValid)
		assert.Equal(t, p.h, f.Header)
		assert.Equal(t, *p.spec, f.Spec)
		assert.Len(t, f.Payload, p.payloadLen)

		// gopacket agrees on Ethernet/IP/UDP and the IPv4 checksum.
		gp := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		require.Nil(t, gp.ErrorLayer(), "packet %d", i)
		udp, _ := gp.Layer(layers.LayerTypeUDP).(*layers.UDP)
		require.NotNil(t, udp)
		assert.Equal(t, layers.UDPPort(roce.UDPPort), udp.DstPort)
		assert.Equal(t, p.spec.SrcPort, uint16(udp.SrcPort))
		if ip4, ok := gp.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			assert.False(t, p.spec.IPv6)
			assert.Equal(t, uint8(p.spec.DSCP<<2|p.spec.ECN), ip4.TOS)
			hdr := append([]byte(nil), data[14:34]...)
			hdr[10], hdr[11] = 0, 0
			assert.Equal(t, ip4.Checksum, ipv4Checksum(hdr))
		} else {
			ip6, ok := gp.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			require.True(t, ok)
			assert.True(t, p.spec.IPv6)
			assert.Equal(t, p.spec.FlowLabel, ip6.FlowLabel)
			assert.Equal(t, uint8(p.spec.DSCP<<2|p.spec.ECN), ip6.TrafficClass)
		}
	}
	require.Equal(t, 2, r.NInterfaces())
	if0, err := r.Interface(0)
	require.NoError(t, err)
	if1, err := r.Interface(1)
	require.NoError(t, err)
	assert.Equal(t, "sw0-p1", if0.Name)
	assert.Equal(t, "leaf0 port 1 (IPv4 RoCEv2)", if0.Description)
	assert.Equal(t, "sw1-p7", if1.Name)
	assert.Equal(t, "leaf1 port 7 (IPv6 RoCEv2)", if1.Description)
	for _, intf := range []pcapgo.NgInterface{if0, if1} {
		assert.Equal(t, pcapgo.NgResolution(9), intf.TimestampResolution)
		assert.Equal(t, layers.LinkTypeEthernet, intf.LinkType)
		assert.Empty(t, intf.OS, "no host details in the output")
	}
	assert.Equal(t, Application, r.SectionInfo().Application)
}

// With a snap length, long frames are stored cut with their original
// length kept, short ones whole, and the interfaces say the snap length.
func TestSnapLen(t *testing.T) {
	for _, snap := range []int{HeaderSnapLen, 60} {
		var buf bytes.Buffer
		frames := writeSampleSnap(t, &buf, snap)
		r, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
		require.NoError(t, err)
		cut := 0
		for i := 0; ; i++ {
			data, ci, err := r.ReadPacketData()
			if errors.Is(err, io.EOF) {
				require.Equal(t, len(frames), i)
				break
			}
			require.NoError(t, err)
			want := frames[i][:min(len(frames[i]), snap)]
			assert.Equal(t, want, data, "snap %d packet %d", snap, i)
			assert.Equal(t, len(want), ci.CaptureLength)
			assert.Equal(t, len(frames[i]), ci.Length, "original length kept")
			if len(data) < len(frames[i]) {
				cut++
			}
		}
		assert.Positive(t, cut, "snap %d cut some frames", snap)
		for k := range r.NInterfaces() {
			intf, err := r.Interface(k)
			require.NoError(t, err)
			assert.Equal(t, uint32(snap), intf.SnapLength)
		}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	assert.Error(t, w.SetSnapLen(-1))
	_, err = w.AddInterface("x", "")
	require.NoError(t, err)
	assert.EqualError(t, w.SetSnapLen(64), "pcap: SetSnapLen after AddInterface")
	assert.NoError(t, (*Writer)(nil).SetSnapLen(64))
}

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}

func TestGolden(t *testing.T) {
	var buf bytes.Buffer
	writeSample(t, &buf)
	if *update {
		require.NoError(t, os.WriteFile(goldenPath, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(goldenPath)
	require.NoError(t, err, "run go test ./traces/pcap -run TestGolden -update")
	require.True(t, bytes.Equal(want, buf.Bytes()), "output differs from %s (%d vs %d bytes); rerun with -update if intended",
		goldenPath, buf.Len(), len(want))
}

func TestNilWriter(t *testing.T) {
	var w *Writer
	id, err := w.AddInterface("x", "y")
	assert.NoError(t, err)
	assert.Zero(t, id)
	assert.NoError(t, w.WritePacket(3, -1, nil, "c"))
	h := roce.Header{Opcode: 0x77}
	assert.NoError(t, w.WriteRoCE(0, 0, &hostA, &h, 0, ""))
	assert.NoError(t, w.Flush())
}

func TestWriterErrors(t *testing.T) {
	_, err := NewWriter(nil)
	assert.Error(t, err)

	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	assert.ErrorIs(t, w.WritePacket(0, 0, make([]byte, 60), ""), ErrInterface, "no interface yet")
	require.NoError(t, w.Flush())
	assert.Zero(t, buf.Len(), "nothing is written before the first interface")

	_, err = w.AddInterface("p0", "")
	require.NoError(t, err)
	assert.ErrorIs(t, w.WritePacket(1, 0, nil, ""), ErrInterface)
	assert.ErrorIs(t, w.WritePacket(-1, 0, nil, ""), ErrInterface)
	assert.ErrorIs(t, w.WritePacket(0, -5, nil, ""), ErrTime)
	bad := roce.Header{Opcode: 0x15}
	assert.ErrorIs(t, w.WriteRoCE(0, 0, &hostA, &bad, 0, ""), roce.ErrOpcode)
	ok := roce.Header{Opcode: roce.OpWriteMiddle, PKey: pk}
	assert.Error(t, w.WriteRoCE(0, 0, &hostA, &ok, -1, ""))
	assert.Error(t, w.WriteRoCE(0, 0, &hostA, &ok, 65535, ""), "too large for IPv4")
	require.NoError(t, w.WriteRoCE(0, 0, &hostC, &ok, 65535-8-12-4, ""), "fits IPv6")

	// Write errors from the underlying writer surface at Flush.
	fw, err := NewWriter(failWriter{})
	require.NoError(t, err)
	_, err = fw.AddInterface("p0", "")
	require.NoError(t, err)
	assert.Error(t, fw.Flush())
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestTimestampTruncation(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	_, err = w.AddInterface("p0", "")
	require.NoError(t, err)
	ts := sim.Time(3*sim.Second + 1234567)
	require.NoError(t, w.WritePacket(0, ts, make([]byte, 60), ""))
	require.NoError(t, w.Flush())
	r, err := pcapgo.NewNgReader(&buf, pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	_, ci, err := r.ReadPacketData()
	require.NoError(t, err)
	assert.Equal(t, time.Unix(3, 1234).UTC(), ci.Timestamp.UTC())
}

func TestMain(m *testing.M) {
	flag.Parse()
	if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
