package verify

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/prog"
)

// Kind says what a test checks.
type Kind int

const (
	// Guarantee: every outcome under every schedule must be allowed.
	Guarantee Kind = iota
	// Rule: the program breaks a usage rule; every schedule must report it.
	Rule
	// NonGuarantee: some schedule must produce the surprising outcome.
	NonGuarantee
)

func (k Kind) String() string {
	switch k {
	case Rule:
		return "rule"
	case NonGuarantee:
		return "non-guarantee"
	case programKind:
		return "program"
	}
	return "guarantee"
}

// Test is one litmus test.
type Test struct {
	Name string
	// Spec is the section of shared/spec/gin.md and the statement checked.
	Spec string
	Kind Kind
	// Backends it runs on ("gdaki", "proxy", "lsa") and versions.
	Backends []string
	Versions []gin.Version
	// Setup is the environment the program needs.
	Setup Setup
	// Program returns the programs (rank 0 and rank 1) for version v on
	// backend b.
	Program func(v gin.Version, b string) *prog.File
	// Allowed returns nil when an outcome is one the spec allows
	// (Guarantee), or whether it is the surprising one (NonGuarantee:
	// non-nil means surprising).
	Allowed func(o *Outcome) error
	// Expect is the error kind a Rule test must report.
	Expect error
}

// Setup is what a test's environment has beyond the defaults (two ranks,
// a 4 MiB backed window "buf" filled with each rank's pattern, 8 signals,
// 4 counters, one context).
type Setup struct {
	Contexts        int
	RailGinBarriers int
	WorldGinBarrier bool // 2.30 only
	LSABarriers     int
	// FourRanks runs on two nodes of two GPUs (GIN backends): LSA teams
	// {0,1} and {2,3}, rail teams {0,2} and {1,3}.
	FourRanks bool
	// Barriers is barrierCount (hybrid barriers).
	Barriers int
}

// Outcome is what one run of a test's program produced.
type Outcome struct {
	// Err is the run's error (a gin usage error, a deadlock, a failed
	// run), nil when every op returned.
	Err error
	// Res are the ops' results, by program and op index.
	Res *prog.Results
	// Pattern returns the initial byte pattern of rank r's window.
	Pattern func(r int) []byte
	// choices records the same-instant choices of the run, when the
	// schedule perturbed them.
	choices *choiceLog
}

// V is the value returned by op i of program p.
func (o *Outcome) V(p, i int) uint64 { return o.Res.Ops[p][i].Value }

// B is the bytes read by op i of program p.
func (o *Outcome) B(p, i int) []byte { return o.Res.Ops[p][i].Bytes }

// Window layout of the litmus programs: sources in [0, 2 MiB), put
// destinations at 2 MiB and up (get destinations at 3 MiB).
const (
	dstOff = 2 << 20
	getOff = 3 << 20
	winLen = 4 << 20
)

// pattern is rank r's initial window content.
func pattern(r int) []byte {
	b := make([]byte, winLen)
	for i := range b {
		b[i] = byte(i*7 + r*101 + 13 + i>>11)
	}
	return b
}

var (
	both  = []gin.Version{gin.V2_28, gin.V2_30}
	v230  = []gin.Version{gin.V2_30}
	ib    = []string{"gdaki", "proxy"}
	lsaBk = []string{"lsa"}
)

// file builds a two-program file for version v.
func file(v gin.Version, p0, p1 []prog.Op) *prog.File {
	f := &prog.File{Format: prog.FormatVersion, NCCL: v.String()}
	f.Programs = append(f.Programs, prog.Program{Rank: 0, Group: "r0", Threads: 32, Ops: p0})
	if p1 != nil {
		f.Programs = append(f.Programs, prog.Program{Rank: 1, Group: "r1", Threads: 32, Ops: p1})
	}
	return f
}

// files builds a file of one program per (rank, group, ops).
func files(v gin.Version, ps ...prog.Program) *prog.File {
	for i := range ps {
		ps[i].Threads = 32
	}
	return &prog.File{Format: prog.FormatVersion, NCCL: v.String(), Programs: ps}
}

func inc(id int) *prog.Action { return &prog.Action{Kind: "inc", ID: id} }

func put(peer int, off, dst, n uint64, r *prog.Action) prog.Op {
	return prog.Op{Op: "put", Team: "world", Peer: peer, Src: "buf", SrcOff: off, Dst: "buf", DstOff: dst, Bytes: n, Remote: r}
}

func putCtx(ctx, peer int, off, dst, n uint64, r *prog.Action) prog.Op {
	op := put(peer, off, dst, n, r)
	op.Ctx = ctx
	return op
}

func waitSig(id int, least uint64) prog.Op { return prog.Op{Op: "wait_signal", ID: id, Least: least} }
func read(off, n uint64) prog.Op           { return prog.Op{Op: "read", Src: "buf", SrcOff: off, Bytes: n} }
func sleep(us int64) prog.Op               { return prog.Op{Op: "sleep", Ps: us * 1_000_000} }

// lsaStore stores 8 bytes into LSA peer peer's window (peer 0 of a
// one-rank LSA team is the rank itself: a local store).
func lsaStore(peer int, off, v uint64) prog.Op {
	return prog.Op{Op: "lsa_store", Peer: peer, Dst: "buf", DstOff: off, Value: v, Size: 8}
}

// same compares bytes read with rank r's pattern at off.
func same(o *Outcome, got []byte, r int, off uint64, what string) error {
	want := o.Pattern(r)[off : off+uint64(len(got))]
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		return fmt.Errorf("%s: byte %d is %#x, want %#x (rank %d's source)", what, i, got[i], want[i], r)
	}
	return nil
}

func eq(got, want uint64, what string) error {
	if got != want {
		return fmt.Errorf("%s = %d, want %d", what, got, want)
	}
	return nil
}

// Suite returns the conformance tests.
func Suite() []Test {
	const big = 1 << 20
	return []Test{
		{
			Name: "put-signal-payload", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.1, 2.4.6: a strong signal seen with acquire implies its put's payload is settled at the peer",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{put(1, 0, dstOff, 256<<10, inc(0))},
					[]prog.Op{waitSig(0, 1), read(dstOff, 256<<10)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "payload after signal") },
		},
		{
			Name: "signal-covers-earlier-puts", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.1: a strong signal implies every earlier put on the same context to the same peer is settled",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{put(1, 0, dstOff, big, nil), put(1, big, dstOff+big, 64, nil),
					{Op: "signal", Team: "world", Peer: 1, Remote: inc(1)}},
					[]prog.Op{waitSig(1, 1), read(dstOff, big+64)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "earlier puts after a signal") },
		},
		{
			Name: "put-value-size", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.2 putValue: writes exactly sizeof(T) bytes (here 4) at the offset; the signal covers it",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{{Op: "put_value", Team: "world", Peer: 1, Dst: "buf", DstOff: dstOff, Value: 0x1122334455667788, Size: 4, Remote: inc(0)}},
					[]prog.Op{waitSig(0, 1), read(dstOff, 16)})
			},
			Allowed: func(o *Outcome) error {
				got := o.B(1, 1)
				if !bytes.Equal(got[:4], []byte{0x88, 0x77, 0x66, 0x55}) {
					return fmt.Errorf("putValue bytes %x, want 88776655", got[:4])
				}
				return same(o, got[4:], 1, dstOff+4, "bytes after a 4-byte putValue")
			},
		},
		{
			Name: "signal-exactly-once", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.3, 6.4.5: every SignalInc adds exactly 1 once (RC: no loss, no duplicate execution)",
			Program: func(v gin.Version, _ string) *prog.File {
				var p0 []prog.Op
				for range 24 {
					p0 = append(p0, put(1, 0, dstOff, 4096, inc(2)))
				}
				return file(v, p0, []prog.Op{waitSig(2, 24), sleep(200), {Op: "read_signal", ID: 2}})
			},
			Allowed: func(o *Outcome) error { return eq(o.V(1, 2), 24, "signal after 24 increments") },
		},
		{
			Name: "counter-local-completion", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.3: a counter means its put is locally complete: the source may be reused",
			Program: func(v gin.Version, _ string) *prog.File {
				c := 0
				p := put(1, 0, dstOff, big, nil)
				p.Counter = &c
				return file(v, []prog.Op{p, {Op: "wait_counter", ID: 0, Least: 1}, lsaStore(0, big-8, 0xdead), lsaStore(0, big-16, 0xbeef),
					sleep(5), {Op: "signal", Team: "world", Peer: 1, Remote: inc(0)}},
					[]prog.Op{waitSig(0, 1), read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error {
				return same(o, o.B(1, 1), 0, 0, "payload of a put whose source was reused after its counter")
			},
		},
		{
			Name: "counter-exactly-once", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.3: one counter increment per put, after its local completion",
			Program: func(v gin.Version, _ string) *prog.File {
				c := 1
				var p0 []prog.Op
				for range 6 {
					p := put(1, 0, dstOff, 8192, nil)
					p.Counter = &c
					p0 = append(p0, p)
				}
				p0 = append(p0, prog.Op{Op: "wait_counter", ID: 1, Least: 6}, sleep(200), prog.Op{Op: "read_counter", ID: 1})
				return file(v, p0, nil)
			},
			Allowed: func(o *Outcome) error { return eq(o.V(0, 8), 6, "counter after 6 puts") },
		},
		{
			Name: "flush-local-completion", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.4: flush = local completion of every operation issued earlier on the context: sources reusable",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{put(1, big+4096, dstOff+big+4096, 64, nil), put(1, 0, dstOff, big, nil), {Op: "flush"}, lsaStore(0, big-8, 0xdead), lsaStore(0, big-16, 0xbeef),
					sleep(5), {Op: "signal", Team: "world", Peer: 1, Remote: inc(0)}},
					[]prog.Op{waitSig(0, 1), read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error {
				return same(o, o.B(1, 1), 0, 0, "payload of a put whose source was reused after flush")
			},
		},
		{
			Name: "flush-covers-all-coops", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.4: flush covers every thread's operations on the context issued before it, not only the caller's",
			Program: func(v gin.Version, _ string) *prog.File {
				f := file(v, []prog.Op{put(1, 0, dstOff, big, nil), sleep(300), {Op: "signal", Team: "world", Peer: 1, Remote: inc(0)}},
					[]prog.Op{waitSig(0, 1), read(dstOff, big)})
				f.Programs = append(f.Programs, prog.Program{Rank: 0, Group: "r0b", Threads: 32, Ops: []prog.Op{
					sleep(1), {Op: "flush"}, lsaStore(0, big-8, 0xdead), lsaStore(0, big-16, 0xbeef)}})
				return f
			},
			Allowed: func(o *Outcome) error {
				return same(o, o.B(1, 1), 0, 0, "payload of another coop's put, source reused after flush")
			},
		},
		{
			Name: "get-after-flush", Kind: Guarantee, Backends: ib, Versions: v230,
			Spec: "2.2 get: the data is visible locally after flush",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{{Op: "get", Team: "world", Peer: 1, Src: "buf", SrcOff: 0, Dst: "buf", DstOff: getOff, Bytes: 256 << 10},
					{Op: "flush"}, read(getOff, 256<<10)}, nil)
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(0, 2), 1, 0, "get data after flush") },
		},
		{
			Name: "get-after-flush-async", Kind: Guarantee, Backends: ib, Versions: v230,
			Spec: "2.2 get, flushAsync/wait: the data is visible locally after flushAsync+wait on that peer",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{{Op: "get", Team: "world", Peer: 1, Src: "buf", SrcOff: 0, Dst: "buf", DstOff: getOff, Bytes: 256 << 10},
					{Op: "flush_async", Team: "world", Peer: 1, Req: 0}, {Op: "wait", Req: 0}, read(getOff, 256<<10)}, nil)
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(0, 3), 1, 0, "get data after flushAsync+wait") },
		},
		{
			Name: "barrier-put-fence", Kind: Guarantee, Backends: ib, Versions: v230, Setup: Setup{WorldGinBarrier: true},
			Spec: "2.9 Put fence: when the barrier returns, puts other members issued to me before it are visible",
			Program: func(v gin.Version, _ string) *prog.File {
				bar := prog.Op{Op: "barrier", Kind: "world_gin", Fence: []string{"put"}}
				return file(v, []prog.Op{put(1, 0, dstOff, big, nil), bar},
					[]prog.Op{bar, read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "payload after a Put-fenced barrier") },
		},
		{
			Name: "barrier-default-fence", Kind: Guarantee, Backends: ib, Versions: v230, Setup: Setup{WorldGinBarrier: true},
			Spec: "2.9: the default fence is Put|Get (self signalled, own gets landed, peers' puts visible)",
			Program: func(v gin.Version, _ string) *prog.File {
				bar := prog.Op{Op: "barrier", Kind: "world_gin"}
				return file(v, []prog.Op{put(1, 0, dstOff, big, nil), {Op: "get", Team: "world", Peer: 1, Src: "buf", Dst: "buf", DstOff: getOff, Bytes: 64 << 10}, bar, read(getOff, 64<<10)},
					[]prog.Op{bar, read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error {
				if err := same(o, o.B(1, 1), 0, 0, "payload after the default barrier"); err != nil {
					return err
				}
				return same(o, o.B(0, 3), 1, 0, "get data after the default barrier")
			},
		},
		{
			Name: "barrier-sync", Kind: Guarantee, Backends: ib, Versions: both, Setup: Setup{RailGinBarriers: 1},
			Spec: "4.1: no member leaves a GIN barrier before every member entered it (a signal sent before it is seen after it)",
			Program: func(v gin.Version, _ string) *prog.File {
				bar := prog.Op{Op: "barrier", Kind: "rail_gin", Fence: []string{"none"}}
				return file(v, []prog.Op{bar, {Op: "read_signal", ID: 3}},
					[]prog.Op{sleep(30), {Op: "signal", Team: "world", Peer: 0, Remote: inc(3)}, bar})
			},
			Allowed: func(o *Outcome) error {
				return eq(o.V(0, 1), 1, "signal sent before the peer's barrier, read after mine")
			},
		},
		{
			Name: "wait-signal-least", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.2 waitSignal: returns once signal >= least (not later), with the value seen",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{{Op: "signal", Team: "world", Peer: 1, Remote: &prog.Action{Kind: "add", ID: 4, Value: 3}}},
					[]prog.Op{waitSig(4, 3), {Op: "read_signal", ID: 4}})
			},
			Allowed: func(o *Outcome) error { return eq(o.V(1, 0), 3, "waitSignal(3) after one add of 3") },
		},
		{
			Name: "wait-rolling-wrap", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.2 rollingLessEq: waits compare modulo 2^bits (64 and 32 bits), so a value that wrapped past least satisfies it",
			Program: func(v gin.Version, _ string) *prog.File {
				add := func(id int, x uint64) prog.Op {
					return prog.Op{Op: "signal", Team: "world", Peer: 1, Remote: &prog.Action{Kind: "add", ID: id, Value: x}}
				}
				return file(v, []prog.Op{add(5, 1<<63), add(7, 1<<31), waitSig(6, 1), add(5, 1<<63+2), add(7, 1<<31+2)},
					[]prog.Op{waitSig(5, 1<<63), {Op: "wait_signal", ID: 7, Least: 1 << 31, Bits: 32},
						{Op: "signal", Team: "world", Peer: 0, Remote: inc(6)},
						waitSig(5, 1<<64-1), {Op: "wait_signal", ID: 7, Least: 1<<32 - 1, Bits: 32}})
			},
			Allowed: func(o *Outcome) error {
				if err := eq(o.V(1, 3), 2, "64-bit signal after wrapping"); err != nil {
					return err
				}
				return eq(o.V(1, 4), 2, "32-bit view after wrapping")
			},
		},
		{
			Name: "reset-then-wait", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.2 resetSignal: the signal reads 0 after a reset, and later waits count from 0 (store on GDAKI and 2.28, offset on the 2.30 Proxy)",
			Program: func(v gin.Version, _ string) *prog.File {
				var p1 []prog.Op
				for range 5 {
					p1 = append(p1, prog.Op{Op: "signal", Team: "world", Peer: 0, Remote: inc(0)})
				}
				p1 = append(p1, waitSig(1, 1), prog.Op{Op: "signal", Team: "world", Peer: 0, Remote: inc(0)})
				return file(v, []prog.Op{waitSig(0, 5), {Op: "reset_signal", ID: 0}, {Op: "read_signal", ID: 0},
					{Op: "signal", Team: "world", Peer: 1, Remote: inc(1)}, waitSig(0, 1), sleep(20), {Op: "read_signal", ID: 0}}, p1)
			},
			Allowed: func(o *Outcome) error {
				for _, c := range []struct {
					i    int
					want uint64
				}{{2, 0}, {4, 1}, {6, 1}} {
					if err := eq(o.V(0, c.i), c.want, fmt.Sprintf("op %d after the reset", c.i)); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "loopback-put-signal", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.2 put: peer may be self (loopback through the NIC); the signal covers the payload",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{put(0, 0, dstOff, 64<<10, inc(7)), waitSig(7, 1), read(dstOff, 64<<10), {Op: "flush"}}, nil)
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(0, 2), 0, 0, "loopback payload after its signal") },
		},
		{
			Name: "lsa-barrier-release", Kind: Guarantee, Backends: lsaBk, Versions: both, Setup: Setup{LSABarriers: 1},
			Spec: "4.2: an acq_rel LSA barrier makes the coop's earlier stores to peers visible to them after the barrier",
			Program: func(v gin.Version, _ string) *prog.File {
				bar := prog.Op{Op: "barrier", Kind: "lsa", Order: "acq_rel"}
				p0 := []prog.Op{{Op: "lsa_store", Peer: 1, Dst: "buf", DstOff: dstOff, Src: "buf", SrcOff: 0, Bytes: 64 << 10}}
				for i := range uint64(16) {
					p0 = append(p0, lsaStore(1, dstOff+64<<10+8*i, 0x0123456789abcd00+i))
				}
				return file(v, append(p0, bar), []prog.Op{bar, read(dstOff+64<<10, 128), read(dstOff, 64<<10)})
			},
			Allowed: func(o *Outcome) error {
				if err := same(o, o.B(1, 2), 0, 0, "LSA copy after the barrier"); err != nil {
					return err
				}
				got := o.B(1, 1)
				for i := range uint64(16) {
					w := got[8*i:]
					if x := binary.LittleEndian.Uint64(w); x != 0x0123456789abcd00+i {
						return fmt.Errorf("LSA store %d not visible after the barrier (%x)", i, w[:8])
					}
				}
				return nil
			},
		},
		{
			Name: "put-after-store", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.4.5: with the default scopes a put carries the issuing thread's earlier stores to its source (Proxy: system fence; GDAKI: WQE publication's release)",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{lsaStore(0, 64, 0x5151515151515151), put(1, 0, dstOff, 4096, inc(0))},
					[]prog.Op{waitSig(0, 1), read(dstOff+64, 8)})
			},
			Allowed: func(o *Outcome) error {
				return eq(binary.LittleEndian.Uint64(o.B(1, 1)), 0x5151515151515151, "word stored just before the put")
			},
		},
		{
			Name: "signal-shadow", Kind: Guarantee, Backends: ib, Versions: both,
			Spec: "2.2 increaseSignalShadow/waitSignalMeetShadow: waits until the signal reaches its shadow",
			Program: func(v gin.Version, _ string) *prog.File {
				var p0 []prog.Op
				for range 3 {
					p0 = append(p0, put(1, 0, dstOff, 4096, inc(1)))
				}
				return file(v, p0, []prog.Op{{Op: "increase_shadow", ID: 1, Value: 3}, {Op: "wait_meet_shadow", ID: 1}, read(dstOff, 4096)})
			},
			Allowed: func(o *Outcome) error {
				if err := eq(o.V(1, 1), 3, "signal when it met its shadow of 3"); err != nil {
					return err
				}
				return same(o, o.B(1, 2), 0, 0, "payload after the shadow was met")
			},
		},
		{
			Name: "weak-signal-bundled-put", Kind: Guarantee, Backends: ib, Versions: v230,
			Spec: "2.4.1: a weak signal implies its bundled put is settled",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{put(1, 0, dstOff, 256<<10, &prog.Action{Kind: "inc", ID: 2, Weak: true})},
					[]prog.Op{waitSig(2, 1), read(dstOff, 256<<10)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "bundled payload after a weak signal") },
		},
		{
			Name: "va-signal-payload", Kind: Guarantee, Backends: ib, Versions: v230,
			Spec: "2.3 VA signals: a signal on a STRICT_ORDERING window word covers its put like an indexed one",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{put(1, 0, dstOff, 256<<10, &prog.Action{Kind: "va_add", Win: "flag", Off: 64, Value: 5})},
					[]prog.Op{{Op: "wait_va_signal", Dst: "flag", DstOff: 64, Least: 5}, read(dstOff, 256<<10), {Op: "read_va_signal", Dst: "flag", DstOff: 64}})
			},
			Allowed: func(o *Outcome) error {
				if err := eq(o.V(1, 2), 5, "VA signal"); err != nil {
					return err
				}
				return same(o, o.B(1, 1), 0, 0, "payload after a VA signal")
			},
		},
		{
			Name: "aggregate-doorbell", Kind: Guarantee, Backends: ib, Versions: v230,
			Spec: "6.4.4: AggregateRequests defers the doorbell to the next non-aggregated call; every op still executes once, in order",
			Program: func(v gin.Version, _ string) *prog.File {
				a, b := put(1, 0, dstOff, 64<<10, nil), put(1, 64<<10, dstOff+64<<10, 64<<10, nil)
				a.Flags, b.Flags = []string{"aggregate"}, []string{"aggregate"}
				return file(v, []prog.Op{a, b, put(1, 128<<10, dstOff+128<<10, 64<<10, inc(3))},
					[]prog.Op{waitSig(3, 1), read(dstOff, 192<<10)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "aggregated puts after the closing signal") },
		},
		{
			Name: "barrier-all-contexts", Kind: Guarantee, Backends: ib, Versions: v230, Setup: Setup{Contexts: 2, WorldGinBarrier: true},
			Spec: "6.4.1, 2.9: an ncclGinAllContexts barrier with the Put fence makes puts on every context visible",
			Program: func(v gin.Version, _ string) *prog.File {
				bar := prog.Op{Op: "barrier", Kind: "world_gin", All: true, Fence: []string{"put"}}
				return file(v, []prog.Op{putCtx(1, 1, 0, dstOff, big, nil), bar},
					[]prog.Op{bar, read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "ctx-1 payload after an all-contexts barrier") },
		},
		{
			Name: "barrier-one-context", Kind: NonGuarantee, Backends: ib, Versions: v230, Setup: Setup{Contexts: 2, WorldGinBarrier: true},
			Spec: "2.4.2, 4.1: a barrier's Put fence covers its own context only: another context's put may still be in flight",
			Program: func(v gin.Version, _ string) *prog.File {
				bar := prog.Op{Op: "barrier", Kind: "world_gin", Fence: []string{"put"}}
				return file(v, []prog.Op{putCtx(1, 1, 0, dstOff, big, nil), bar},
					[]prog.Op{bar, read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "ctx-1 payload after a ctx-0 barrier") },
		},
		{
			Name: "hybrid-barrier-put-fence", Kind: Guarantee, Backends: ib, Versions: v230, Setup: Setup{FourRanks: true, Barriers: 1},
			Spec: "4.3, 2.9: the hybrid (LSA + GIN) barrier with the default Put|Get fence makes every member's earlier puts to me visible",
			Program: func(v gin.Version, _ string) *prog.File {
				var ps []prog.Program
				for r := range 4 {
					ps = append(ps, prog.Program{Rank: r, Group: fmt.Sprintf("r%d", r), Ops: []prog.Op{
						put((r+2)%4, 0, dstOff, 256<<10, nil), {Op: "barrier", Kind: "hybrid"}, read(dstOff, 256<<10)}})
				}
				return files(v, ps...)
			},
			Allowed: func(o *Outcome) error {
				for r := range 4 {
					if err := same(o, o.B(r, 2), (r+2)%4, 0, fmt.Sprintf("rank %d: rail peer's put after the hybrid barrier", r)); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "hybrid-barrier-own-sets", Kind: Guarantee, Backends: ib, Versions: both, Setup: Setup{FourRanks: true, Barriers: 1, RailGinBarriers: 1},
			Spec: "4.3, 1.4: nobody leaves a hybrid barrier before every member entered it, even while a user GIN barrier of the same index runs (2.30: separate sets)",
			Program: func(v gin.Version, _ string) *prog.File {
				hyb := prog.Op{Op: "barrier", Kind: "hybrid", Fence: []string{"none"}}
				user := prog.Op{Op: "barrier", Kind: "rail_gin", Fence: []string{"none"}}
				ps := []prog.Program{
					{Rank: 0, Group: "a", Ops: []prog.Op{hyb, {Op: "read_signal", ID: 3}}},
					{Rank: 1, Group: "a", Ops: []prog.Op{hyb}},
					{Rank: 2, Group: "a", Ops: []prog.Op{sleep(100), {Op: "signal", Team: "world", Peer: 0, Remote: inc(3)}, hyb}},
					{Rank: 3, Group: "a", Ops: []prog.Op{hyb}},
				}
				if v == gin.V2_30 { // 2.28 shares the sets: a user barrier there would race by design
					ps = append(ps, prog.Program{Rank: 0, Group: "b", Ops: []prog.Op{user}}, prog.Program{Rank: 2, Group: "b", Ops: []prog.Op{user}})
				}
				return files(v, ps...)
			},
			Allowed: func(o *Outcome) error {
				return eq(o.V(0, 1), 1, "rank 2's signal sent before it entered the hybrid barrier, read by rank 0 after it")
			},
		},
		{
			Name: "no-order-across-peers", Kind: NonGuarantee, Backends: ib, Versions: both, Setup: Setup{FourRanks: true},
			Spec: "2.4.2: no ordering across peers: rank 0's signal to rank 3, relayed to rank 2, can beat rank 0's earlier (2 MiB) put to rank 2",
			Program: func(v gin.Version, _ string) *prog.File {
				return files(v,
					prog.Program{Rank: 0, Group: "a", Ops: []prog.Op{put(2, 0, dstOff, 2*big-4096, nil), {Op: "signal", Team: "world", Peer: 3, Remote: inc(0)}}},
					prog.Program{Rank: 3, Group: "a", Ops: []prog.Op{waitSig(0, 1), {Op: "signal", Team: "world", Peer: 2, Remote: inc(1)}}},
					prog.Program{Rank: 2, Group: "a", Ops: []prog.Op{waitSig(1, 1), read(dstOff, 2*big-4096)}})
			},
			Allowed: func(o *Outcome) error {
				return same(o, o.B(2, 1), 0, 0, "rank 0's put, read after a relayed later signal")
			},
		},
		// Usage rules: the front end reports the violation.
		{
			Name: "rule-inc-add-mix", Kind: Rule, Backends: ib, Versions: both, Expect: gin.ErrMixedSignalOps,
			Spec: "2.3: SignalInc may not be mixed with other operators on one signal between resets",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{{Op: "signal", Team: "world", Peer: 1, Remote: inc(0)},
					{Op: "signal", Team: "world", Peer: 1, Remote: &prog.Action{Kind: "add", ID: 0, Value: 2}}}, nil)
			},
		},
		{
			Name: "rule-reset-race", Kind: Rule, Backends: ib, Versions: both, Expect: gin.ErrResetRace,
			Spec: "2.2 resetSignal: may not race with concurrent modifications",
			Program: func(v gin.Version, _ string) *prog.File {
				var p1 []prog.Op
				for range 8 {
					p1 = append(p1, put(0, 0, dstOff, 64<<10, inc(0)))
				}
				return file(v, []prog.Op{waitSig(0, 1), {Op: "reset_signal", ID: 0}, sleep(100)}, p1)
			},
		},
		// Non-guarantees: some schedule must show the surprise.
		{
			Name: "no-order-across-contexts", Kind: NonGuarantee, Backends: ib, Versions: both, Setup: Setup{Contexts: 2},
			Spec: "2.4.2: no ordering across contexts: a ctx-1 signal can overtake an in-flight ctx-0 put",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{putCtx(0, 1, 0, dstOff, big, nil), {Op: "signal", Ctx: 1, Team: "world", Peer: 1, Remote: inc(0)}},
					[]prog.Op{{Op: "wait_signal", Ctx: 1, ID: 0, Least: 1}, read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "ctx-0 payload after a ctx-1 signal") },
		},
		{
			Name: "flush-is-per-context", Kind: NonGuarantee, Backends: ib, Versions: both, Setup: Setup{Contexts: 2},
			Spec: "2.4.2, 2.4.4: a flush covers its own context only: another context's put may still read its source",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{putCtx(0, 1, 0, dstOff, big, nil), {Op: "flush", Ctx: 1}, lsaStore(0, big-8, 0xdead),
					{Op: "flush"}, {Op: "signal", Team: "world", Peer: 1, Remote: inc(0)}},
					[]prog.Op{waitSig(0, 1), read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error {
				return same(o, o.B(1, 1), 0, 0, "payload when only another context was flushed")
			},
		},
		{
			Name: "counter-is-one-put", Kind: NonGuarantee, Backends: ib, Versions: both, Setup: Setup{Contexts: 2},
			Spec: "2.3: a counter does not imply local completion of any other put (here: an earlier put on another context)",
			Program: func(v gin.Version, _ string) *prog.File {
				c := 0
				p := putCtx(1, 1, big+4096, dstOff+big+4096, 64, nil)
				p.Counter = &c
				return file(v, []prog.Op{putCtx(0, 1, 0, dstOff, big, nil), p, {Op: "wait_counter", Ctx: 1, ID: 0, Least: 1},
					lsaStore(0, big-8, 0xdead), {Op: "flush"}, {Op: "signal", Team: "world", Peer: 1, Remote: inc(0)}},
					[]prog.Op{waitSig(0, 1), read(dstOff, big)})
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(1, 1), 0, 0, "payload of a put not covered by the counter") },
		},
		{
			Name: "get-needs-flush", Kind: NonGuarantee, Backends: ib, Versions: v230,
			Spec: "2.2 get: without flush (or a Get-fenced barrier) the data is not guaranteed visible",
			Program: func(v gin.Version, _ string) *prog.File {
				return file(v, []prog.Op{{Op: "get", Team: "world", Peer: 1, Src: "buf", SrcOff: 0, Dst: "buf", DstOff: getOff, Bytes: 64 << 10},
					read(getOff, 64<<10), {Op: "flush"}}, nil)
			},
			Allowed: func(o *Outcome) error { return same(o, o.B(0, 1), 1, 0, "get data read before flush") },
		},
	}
}
