package hw

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/gin/prog"
)

// WindowBytes is the size of every window of a lowered program, on the
// device and on the model.
const WindowBytes = 1 << 20

// Ranks is the number of ranks the device run has (two processes).
const Ranks = 2

// maxWindows is the executor's window limit.
const maxWindows = 8

// Setup is what a run of a file needs besides its programs: the windows
// (by first use), and how many signals and counters the device
// communicator asks for.
type Setup struct {
	Windows  []string
	Signals  int
	Counters int
	// RailBarriers is the rail GIN barrier count (highest index + 1).
	RailBarriers int
}

// UnsupportedError says which op of which program the device executor
// cannot run, and why.
type UnsupportedError struct {
	Program, Op int
	Field       string
	Msg         string
}

func (e *UnsupportedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hw: program %d", e.Program)
	if e.Op >= 0 {
		fmt.Fprintf(&b, ": op %d", e.Op)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// hwOps are the ops the executor runs (NCCL 2.28's device API, one context).
var hwOps = []string{"put", "put_value", "signal", "flush", "read_signal", "wait_signal", "reset_signal",
	"read_counter", "wait_counter", "reset_counter", "sleep", "compute", "barrier"}

// SetupOf collects f's windows, signals and counters and checks that the
// device executor can run every op: two ranks, one program per rank,
// context 0, the world team (the rail team is the world with one GPU per
// host), indexed signals, offsets inside WindowBytes.
func SetupOf(f *prog.File) (Setup, error) { return SetupIn(f, Layout{}) }

// Layout is how a lowered program's windows are made. The zero Layout is
// the one of --program files: WindowBytes each, filled with the
// executor's own pattern. Verify is gin/verify's (4 MiB windows filled
// with verify.Pattern), for which the executor also runs read and
// lsa_store (a store into the rank's own window: peer 0 of its one-rank
// LSA team), put_value of any size, and rail barriers with the "none"
// fence (2.28's only level, relaxed).
type Layout struct {
	Verify bool
	// Bytes is every window's size (0: WindowBytes).
	Bytes uint64
}

func (l Layout) bytes() uint64 {
	if l.Bytes == 0 {
		return WindowBytes
	}
	return l.Bytes
}

// SetupIn is SetupOf for layout l.
func SetupIn(f *prog.File, l Layout) (Setup, error) {
	var s Setup
	winBytes := l.bytes()
	seen := map[int]bool{}
	win := func(pi, oi int, field, name string) error {
		if name == "" {
			return nil
		}
		if !slices.Contains(s.Windows, name) {
			if len(s.Windows) == maxWindows {
				return &UnsupportedError{pi, oi, field, fmt.Sprintf("more than %d windows", maxWindows)}
			}
			s.Windows = append(s.Windows, name)
		}
		return nil
	}
	span := func(pi, oi int, field string, off, n uint64) error {
		if off > winBytes || n > winBytes-off {
			return &UnsupportedError{pi, oi, field, fmt.Sprintf("%d bytes at offset %d outside the %d-byte window", n, off, winBytes)}
		}
		return nil
	}
	for pi := range f.Programs {
		p := &f.Programs[pi]
		if p.Rank >= Ranks {
			return s, &UnsupportedError{pi, -1, "rank", fmt.Sprintf("rank %d; the device run has %d ranks", p.Rank, Ranks)}
		}
		if seen[p.Rank] {
			return s, &UnsupportedError{pi, -1, "rank", fmt.Sprintf("a second program for rank %d; the executor runs one per rank", p.Rank)}
		}
		seen[p.Rank] = true
		for oi := range p.Ops {
			op := &p.Ops[oi]
			extra := l.Verify && (op.Op == "read" || op.Op == "lsa_store")
			if !slices.Contains(hwOps, op.Op) && !extra {
				return s, &UnsupportedError{pi, oi, "op", fmt.Sprintf("%s is not run on the device yet", op.Op)}
			}
			switch {
			case op.Ctx != 0:
				return s, &UnsupportedError{pi, oi, "ctx", "the executor uses context 0 only"}
			case op.Team == "lsa":
				return s, &UnsupportedError{pi, oi, "team", "the LSA team has one rank per host here"}
			case op.Peer >= Ranks:
				return s, &UnsupportedError{pi, oi, "peer", fmt.Sprintf("peer %d of %d ranks", op.Peer, Ranks)}
			case len(op.Flags) > 0:
				return s, &UnsupportedError{pi, oi, "flags", "op flags are not passed to the device"}
			case op.Release != nil:
				return s, &UnsupportedError{pi, oi, "release", "release scopes are not passed to the device"}
			case op.Op == "lsa_store" && (op.Peer != 0 || op.Src != "" || op.Bytes != 0):
				return s, &UnsupportedError{pi, oi, "peer", "lsa_store runs on the device only as a value stored into the rank's own window (peer 0)"}
			case op.Op == "put_value" && op.Size != 8 && !(l.Verify && slices.Contains([]int{1, 2, 4}, op.Size)):
				return s, &UnsupportedError{pi, oi, "size", "put_value of 8 bytes only"}
			case op.Op == "barrier" && op.Kind != "rail_gin":
				return s, &UnsupportedError{pi, oi, "kind", op.Kind + " barriers are not run on the device (NCCL 2.28 has rail GIN barriers)"}
			case op.Op == "barrier" && op.All:
				return s, &UnsupportedError{pi, oi, "all", "the executor uses one context"}
			case op.Op == "barrier" && len(op.Fence) > 0 && !(l.Verify && slices.Equal(op.Fence, []string{"none"})):
				return s, &UnsupportedError{pi, oi, "fence", "NCCL 2.28 defines only the relaxed fence level"}
			}
			if op.Op == "barrier" {
				s.RailBarriers = max(s.RailBarriers, op.Index+1)
			}
			if a := op.Remote; a != nil {
				if a.Kind != "inc" && a.Kind != "add" {
					return s, &UnsupportedError{pi, oi, "remote.kind", a.Kind + ": VA signals are NCCL 2.30"}
				}
				if a.Weak {
					return s, &UnsupportedError{pi, oi, "remote.weak", "weak signals are NCCL 2.30"}
				}
				s.Signals = max(s.Signals, a.ID+1)
			}
			if op.Counter != nil {
				s.Counters = max(s.Counters, *op.Counter+1)
			}
			switch op.Op {
			case "read_signal", "wait_signal", "reset_signal":
				s.Signals = max(s.Signals, op.ID+1)
			case "read_counter", "wait_counter", "reset_counter":
				s.Counters = max(s.Counters, op.ID+1)
			case "put":
				if err := win(pi, oi, "dst", op.Dst); err != nil {
					return s, err
				}
				if err := win(pi, oi, "src", op.Src); err != nil {
					return s, err
				}
				if op.Dst == "" || op.Src == "" {
					return s, &UnsupportedError{pi, oi, "dst", "a put needs both windows on the device"}
				}
				if err := span(pi, oi, "dst_off", op.DstOff, op.Bytes); err != nil {
					return s, err
				}
				if err := span(pi, oi, "src_off", op.SrcOff, op.Bytes); err != nil {
					return s, err
				}
			case "read":
				if err := win(pi, oi, "src", op.Src); err != nil {
					return s, err
				}
				if err := span(pi, oi, "src_off", op.SrcOff, op.Bytes); err != nil {
					return s, err
				}
			case "lsa_store":
				if err := win(pi, oi, "dst", op.Dst); err != nil {
					return s, err
				}
				if err := span(pi, oi, "dst_off", op.DstOff, uint64(op.Size)); err != nil {
					return s, err
				}
			case "put_value":
				if err := win(pi, oi, "dst", op.Dst); err != nil {
					return s, err
				}
				if err := span(pi, oi, "dst_off", op.DstOff, uint64(op.Size)); err != nil {
					return s, err
				}
			}
		}
	}
	s.Signals, s.Counters = max(s.Signals, 1), max(s.Counters, 1)
	return s, nil
}

// Lower writes f as the executor's op list (see native/ginexec.cu):
//
//	ginhw-ops 1
//	win IDX BYTES NAME
//	signals N / counters N / barriers N
//	program RANK THREADS NAME
//	op KIND PEER DSTWIN DSTOFF SRCWIN SRCOFF BYTES RKIND RID RVALUE COUNTER ID LEAST BITS SIZE VALUE NS
//	end
//
// RKIND is 0 (none), 1 (inc) or 2 (add); absent windows and counters are -1.
// compute and sleep both become a timed spin. A rail GIN barrier is
// barrier_rail with ID its index and LEAST its memory order (0 relaxed,
// 1 acquire, 2 release, 3 acq_rel).
func Lower(f *prog.File) ([]byte, Setup, error) { return LowerIn(f, Layout{}) }

// LowerIn is Lower for layout l; a Verify layout adds the line "fill
// verify" (the executor fills windows with verify.Pattern).
func LowerIn(f *prog.File, l Layout) ([]byte, Setup, error) {
	s, err := SetupIn(f, l)
	if err != nil {
		return nil, s, err
	}
	var b strings.Builder
	b.WriteString("ginhw-ops 1\n")
	if l.Verify {
		b.WriteString("fill verify\n")
	}
	for i, w := range s.Windows {
		fmt.Fprintf(&b, "win %d %d %s\n", i, l.bytes(), w)
	}
	fmt.Fprintf(&b, "signals %d\ncounters %d\nbarriers %d\n", s.Signals, s.Counters, s.RailBarriers)
	idx := func(name string) int { return slices.Index(s.Windows, name) }
	for _, p := range f.Programs {
		fmt.Fprintf(&b, "program %d %d %s\n", p.Rank, p.Threads, p.Group)
		for _, op := range p.Ops {
			kind, id, least := op.Op, op.ID, op.Least
			switch kind {
			case "compute":
				kind = "sleep"
			case "barrier":
				kind, id, least = "barrier_rail", op.Index, uint64(orderCode(op.Order))
			}
			rkind, rid, rval := 0, 0, uint64(0)
			if a := op.Remote; a != nil {
				rkind, rid, rval = 1, a.ID, a.Value
				if a.Kind == "add" {
					rkind = 2
				}
			}
			counter := -1
			if op.Counter != nil {
				counter = *op.Counter
			}
			fmt.Fprintf(&b, "op %s %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d\n", kind, op.Peer, idx(op.Dst), op.DstOff,
				idx(op.Src), op.SrcOff, op.Bytes, rkind, rid, rval, counter, id, least, op.Bits, op.Size, op.Value,
				(op.Ps+999)/1000)
		}
	}
	b.WriteString("end\n")
	return []byte(b.String()), s, nil
}

// orderCode is a barrier's memory order as the executor takes it (the
// program's default is acq_rel).
func orderCode(o string) int {
	switch o {
	case "relaxed":
		return 0
	case "acquire":
		return 1
	case "release":
		return 2
	}
	return 3
}
