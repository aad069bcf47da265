package pcap

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
)

// Errors returned by Writer methods; they are wrapped with details.
var (
	ErrInterface = errors.New("pcap: no such interface")
	ErrTime      = errors.New("pcap: negative timestamp")
)

// zeroPayload is the (read-only) payload of frames written by WriteRoCE; no
// IP packet can carry more.
var zeroPayload [1 << 16]byte

// Application is the shb_userappl string written into the section header.
const Application = "ginsim"

// Writer writes a pcapng stream. Timestamps have nanosecond resolution: the
// interfaces carry if_tsresol = 9 (pcapgo writes no other resolution), so a
// sim.Time in picoseconds is truncated to whole nanoseconds; the timestamp
// is the simulated time since the start of the run, shown by Wireshark as a
// date in January 1970.
//
// Nothing is written until the first AddInterface (pcapng needs a section
// header and an interface before any packet), and output is buffered until
// Flush. A Writer is not safe for concurrent use. A nil *Writer is a valid
// no-op: every method returns nil, so a tap can be left unset at no cost.
type Writer struct {
	out      io.Writer
	ng       *pcapgo.NgWriter
	n        int       // interfaces added
	comments [1]string // reused per packet
	buf      []byte    // frame scratch for WriteRoCE
	snap     int       // capture length limit; 0: whole frames
}

// HeaderSnapLen is a snap length that keeps every header of a RoCEv2
// frame (Ethernet 14, IPv6 40, UDP 8, BTH 12 and the largest extended
// header, AtomicETH 28, is 102 bytes) and drops the payload: pass it to
// SetSnapLen for headers-only captures.
const HeaderSnapLen = 128

// SetSnapLen limits the bytes stored per packet to n (0: no limit, the
// default): a longer frame is stored cut to n bytes with its original
// length kept, as pcapng's Enhanced Packet Block allows (captured length
// below original length); Wireshark marks it "Packet size limited during
// capture" and still dissects the headers, though not the payload or
// ICRC. The interfaces' if_snaplen is n. It must be called before the
// first AddInterface.
func (w *Writer) SetSnapLen(n int) error {
	if w == nil {
		return nil
	}
	if n < 0 {
		return fmt.Errorf("pcap: snap length %d is negative", n)
	}
	if w.ng != nil {
		return errors.New("pcap: SetSnapLen after AddInterface")
	}
	w.snap = n
	return nil
}

// NewWriter returns a Writer that writes pcapng to w.
func NewWriter(w io.Writer) (*Writer, error) {
	if w == nil {
		return nil, errors.New("pcap: nil io.Writer")
	}
	return &Writer{out: w}, nil
}

// AddInterface adds an Ethernet interface, one per tapped port or link, and
// returns its index for WritePacket. Indices count from 0 in the order of
// the calls. name becomes if_name and description if_description; either
// may be empty.
func (w *Writer) AddInterface(name, description string) (int, error) {
	if w == nil {
		return 0, nil
	}
	intf := pcapgo.NgInterface{
		Name:                name,
		Description:         description,
		LinkType:            layers.LinkTypeEthernet,
		SnapLength:          uint32(w.snap), // 0: unlimited
		TimestampResolution: 9,
	}
	if w.ng == nil {
		opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: Application}}
		ng, err := pcapgo.NewNgWriterInterface(w.out, intf, opts)
		if err != nil {
			return 0, fmt.Errorf("pcap: %w", err)
		}
		w.ng = ng
		w.n = 1
		return 0, nil
	}
	id, err := w.ng.AddInterface(intf)
	if err != nil {
		return 0, fmt.Errorf("pcap: %w", err)
	}
	w.n++
	return id, nil
}

// WritePacket writes one captured Ethernet frame (without FCS) seen on
// interface iface at simulated time ts. A non-empty comment is stored as the
// packet's opt_comment, which Wireshark shows as "Packet comments" and
// tshark as the frame.comment field. The frame is copied into the output
// buffer before WritePacket returns.
func (w *Writer) WritePacket(iface int, ts sim.Time, frame []byte, comment string) error {
	if w == nil {
		return nil
	}
	if iface < 0 || iface >= w.n {
		return fmt.Errorf("%w: %d (have %d)", ErrInterface, iface, w.n)
	}
	if ts < 0 {
		return fmt.Errorf("%w: %d ps", ErrTime, int64(ts))
	}
	n := len(frame)
	if w.snap > 0 && w.snap < len(frame) {
		frame = frame[:w.snap]
	}
	ci := gopacket.CaptureInfo{
		Timestamp:      time.Unix(0, int64(ts)/int64(sim.Nanosecond)).UTC(),
		CaptureLength:  len(frame),
		Length:         n,
		InterfaceIndex: iface,
	}
	var opts pcapgo.NgPacketOptions
	if comment != "" {
		w.comments[0] = comment
		opts.Comments = w.comments[:]
	}
	err := w.ng.WritePacketWithOptions(ci, frame, opts)
	w.comments[0] = ""
	if err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	return nil
}

// WriteRoCE builds the RoCEv2 frame for spec, h and a payload of payloadLen
// zero bytes (the simulator tracks sizes, not data) with roce.AppendFrame
// and writes it like WritePacket. It fails if h does not validate or the
// packet is too large for IP.
func (w *Writer) WriteRoCE(iface int, ts sim.Time, spec *roce.FrameSpec, h *roce.Header, payloadLen int, comment string) error {
	if w == nil {
		return nil
	}
	if err := h.Validate(); err != nil {
		return err
	}
	if payloadLen < 0 || payloadLen > len(zeroPayload) {
		return fmt.Errorf("pcap: payload length %d out of range", payloadLen)
	}
	n := roce.FrameLen(spec, h, payloadLen)
	if cap(w.buf) < n {
		w.buf = make([]byte, 0, n)
	}
	frame := roce.AppendFrame(w.buf[:0], spec, h, zeroPayload[:payloadLen])
	if len(frame) == 0 {
		return fmt.Errorf("pcap: %v frame with %d payload bytes exceeds the IP length limit", h.Opcode, payloadLen)
	}
	w.buf = frame
	return w.WritePacket(iface, ts, frame, comment)
}

// Flush writes any buffered data to the underlying io.Writer.
func (w *Writer) Flush() error {
	if w == nil || w.ng == nil {
		return nil
	}
	if err := w.ng.Flush(); err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	return nil
}
