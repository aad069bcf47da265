package v2

import (
	"math/bits"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces/workload"
)

// The busiest V2 warps as state machines over the groups' Then operations
// (launched with gpu.GPU.LaunchHandler, no process): each is the body of
// its g.Launch closure in hybrid.go or v2.go, with the same steps at the
// same instants, so that a record costs no coroutine switch. Options.noThen
// runs the closures instead (TestV2WarpsWithoutProcess compares the two).
// Hybrid: the dispatch forward and combine scale-up warps (no GIN ops) on
// every backend; the scale-out warps with their lanes and the combine
// forward warps (puts, signals, flush) only over a backend that issues
// for process-free groups (GDAKI, Proxy), as the direct dispatch and combine
// warps. The notify warps and the barrier groups stay on processes (a few
// per rank; they use Red64, put_value and signal waits, which have no
// Then twins).

// useThen reports whether the V2 warps that have a state machine run as
// one.
func (w *Direct) useThen() bool { return !w.e.Cfg.NoThen }

// drive is the driving loop shared by the V2 machines: a machine starts
// an operation with inOp set and then calls yield; an operation whose
// continuation runs at once (it took no time) re-enters Handle, which
// notes it (reentered) and returns, and the loop goes on instead of
// recursing.
type drive struct {
	inOp, resumed bool
	grid          uint64              // the grid syncs' target: every SM's arrival
	gridReached   func(v uint64) bool // the grid sync word has reached grid
}

// setGrid sets the grid syncs' target.
func (d *drive) setGrid(n uint64) {
	d.grid = n
	d.gridReached = func(v uint64) bool { return v >= d.grid }
}

// reentered reports (and notes) a continuation that ran inside the call
// that started its operation.
func (d *drive) reentered() bool {
	if d.inOp {
		d.resumed = true
		return true
	}
	return false
}

// yield ends the start of an operation: true when the group now waits
// (return from Handle), false when the operation is already done.
func (d *drive) yield() bool {
	d.inOp = false
	if d.resumed {
		d.resumed = false
		return false
	}
	return true
}

// lastReduces ends a warp of rank r whose warps count down *live: all but
// the last end now (true: return from Handle); the last one starts the
// rank's reduction, reduce of SM time, and continues at the next step
// (false when it is already done), where reduced marks the rank done.
func (d *drive) lastReduces(t *gpu.Group, live *int, reduce sim.Duration, h sim.Handler) bool {
	if *live--; *live != 0 {
		t.End()
		return true
	}
	d.inOp = true
	t.ComputeThen(reduce, h, 0)
	return d.yield()
}

// reduced ends rank r's last warp after its reduction: the rank's
// receivers are done.
func reduced(e *workload.Env, t *gpu.Group, r int) {
	e.ReceiverDone(r, e.LastOf(r))
	t.End()
}

// arrive starts the machine's arrival at grid sync i (a device atomic on
// the rank's sync word a); true when the machine now waits.
func (d *drive) arrive(t *gpu.Group, a *workload.GPUArray, i int, h sim.Handler) bool {
	d.inOp = true
	t.GridArriveThen(a.R, a.Off(i), h, 0)
	return d.yield()
}

// waitGrid starts the machine's wait at grid sync i for every SM; true
// when the machine now waits.
func (d *drive) waitGrid(t *gpu.Group, a *workload.GPUArray, i int, h sim.Handler) bool {
	d.inOp = true
	t.GridWaitThen(a.R, a.Off(i), d.gridReached, h, 0)
	return d.yield()
}

// hScaleup is a combine scale-up warp (channel c of rank r on SM sm):
// launchCombine's scale-up closure (two grid syncs, scaleup, done) as a
// state machine.
type hScaleup struct {
	drive
	w         *Hybrid
	t         *gpu.Group
	r, sm, c  int
	reduce    sim.Duration
	cursor    []int // per forwarder: next record of its channel list
	sent, old []int
	stored    sim.Time
	dst       int
	round     int
	wip       uint64
	final     bool
	f         int
	pc        uint8
}

const (
	suGS0 = iota
	suGS0W
	suGS1
	suGS1W
	suTop
	suLoaded
	suPick
	suSlept
	suRead
	suCycled
	suUpdate
	suFence
	suStores
	suDone
	suReduced
)

func newHScaleup(w *Hybrid, r, sm, c int, n uint64, reduce sim.Duration) *hScaleup {
	U := w.U
	m := &hScaleup{w: w, r: r, sm: sm, c: c, reduce: reduce, dst: c,
		cursor: make([]int, U), sent: make([]int, U), old: make([]int, U)}
	m.setGrid(n)
	return m
}

// next is scaleup's next: whether forwarder f has a record for this rank
// left, moving its cursor to it.
func (m *hScaleup) next(f int) bool {
	w := m.w
	U, S, me, own := w.U, w.S, m.r/w.U, m.r%w.U
	recs := w.fwd[(me*U+f)*w.nch+m.c]
	for m.cursor[f] < len(recs) {
		rc := recs[m.cursor[f]]
		if w.gpus[rc.src][int(rc.tok)*S+me]&(1<<own) != 0 {
			return true
		}
		m.cursor[f]++
	}
	return false
}

// Handle implements sim.Handler.
func (m *hScaleup) Handle(*sim.Sim, uint64) {
	if m.reentered() {
		return
	}
	w, t, r := m.w, m.t, m.r
	U, me, own := w.U, r/w.U, r%w.U
	for {
		switch m.pc {
		case suGS0, suGS1:
			i := int(m.pc-suGS0) / 2
			m.pc++
			if m.arrive(t, w.sync[r], i, m) {
				return
			}
		case suGS0W, suGS1W:
			i := int(m.pc-suGS0W) / 2
			m.pc++
			if m.waitGrid(t, w.sync[r], i, m) {
				return
			}
		case suTop:
			m.pc = suLoaded
			m.inOp = true
			t.Load64Then(w.topk[r].R, 0, m, 0) // the next linked-list entry of every forwarder
			if m.yield() {
				return
			}
		case suLoaded:
			m.wip = 0
			for f := range U {
				if m.next(f) {
					m.wip |= 1 << f
				}
			}
			if m.wip == 0 {
				m.final = true
				m.pc = suUpdate
				continue
			}
			m.pc = suPick
		case suPick:
			if m.wip == 0 {
				m.final = false
				m.pc = suUpdate
				continue
			}
			st := (m.dst + 1) % U
			if hi := m.wip >> st << st; hi != 0 {
				m.dst = bits.TrailingZeros64(hi)
			} else {
				m.dst = bits.TrailingZeros64(m.wip)
			}
			m.wip &^= 1 << m.dst
			m.pc = suSlept
			if d := m.stored.Sub(t.Now()); d > 0 { // tma_store_wait before reusing the TMA buffer
				t.SleepThen(d, m, 0)
				return
			}
		case suSlept:
			cfg := t.GPU().Config()
			at := w.read(t, r, m.sm, 2*w.e.Hidden, cfg.HBMLatency)
			m.pc = suRead
			if d := at.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case suRead:
			m.pc = suCycled
			m.inOp = true
			t.CyclesThen(w.vp.RouteCycles, m, 0) // source metadata, top-k weights
			if m.yield() {
				return
			}
		case suCycled:
			i := m.cursor[m.dst]
			dst := m.dst
			m.pc = suPick
			w.st.Back[r*U+dst]++
			m.sent[dst]++
			m.cursor[dst]++
			// nvlStore: the SM's store bandwidth, then the NVLink write.
			cfg := t.GPU().Config()
			if dst == w.e.M.Ranks[r].Local {
				m.stored = w.write(t, r, m.sm, w.crec, cfg.StoreLatency)
				continue
			}
			out := w.write(t, r, m.sm, w.crec, t.GPU().NVLink().Config().Latency)
			m.inOp = true
			landed := t.NVLinkWriteThen(dst, w.cw.Region(me*U+dst), w.cSuOff(own, m.c, i), nil, sim.Bytes(w.crec), m, 0)
			m.stored = max(out, landed)
			if m.yield() {
				return
			}
		case suUpdate:
			m.round++
			if !m.final && m.round < w.vp.HybridScaleupInterval {
				m.pc = suTop
				continue
			}
			m.round = 0
			m.pc = suFence
			if d := m.stored.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case suFence:
			m.pc = suStores
			m.f = 0
			m.inOp = true
			t.FenceThen(gpu.ScopeSystem, m, 0) // st.release.sys
			if m.yield() {
				return
			}
		case suStores:
			for m.f < U && m.sent[m.f] == m.old[m.f] {
				m.f++
			}
			if m.f == U {
				m.pc = suTop
				if m.final {
					m.pc = suDone
				}
				continue
			}
			f := m.f
			m.old[f] = m.sent[f]
			m.f++
			m.inOp = true
			t.Store64Then(w.ws.Region(me*U+f), w.suTailOff(m.c, own), uint64(m.sent[f]), m, 0)
			if m.yield() {
				return
			}
		case suDone:
			m.pc = suReduced
			if m.lastReduces(t, &w.live[r], m.reduce, m) {
				return
			}
		case suReduced:
			reduced(w.e, t, r)
			return
		}
	}
}

// hForward is a dispatch forward warp (channel c, warp s of SM sm, of
// rank r): launchDispatch's forward closure (grid sync, forward, grid
// sync) as a state machine.
type hForward struct {
	drive
	w         *Hybrid
	t         *gpu.Group
	r, sm, c  int
	qp        int
	moved     func(v uint64) bool
	o         uint64 // the tail wait's last seen count
	old, tail []int
	fin       []bool
	cursor    []int // per source node: next token of its channel to look at
	slots     []uint64
	recs      []hFwd
	lw        *workload.LandWatch
	cur       int
	stored    sim.Time
	word      uint64 // the tail word waited on
	slot, end int    // the records taken from node cur: slot..end-1
	src, tok  int
	gm, left  uint64 // the token's GPUs on this node; those left to store into
	first     bool
	d         int
	pc        uint8
}

const (
	fwGS0 = iota
	fwGS0W
	fwTop
	fwTailSeen
	fwRecord
	fwSlept
	fwRead
	fwCycled
	fwSlotDone
	fwStores
	fwStored
	fwEnds
	fwCleans
	fwEndSleep
	fwGS1
	fwGS1W
	fwDone
)

func newHForward(w *Hybrid, r, sm, s, c int, n uint64) *hForward {
	S, U := w.S, w.U
	qp, _ := qpFor(w.sms, w.qps, w.C, sm, s, true)
	m := &hForward{w: w, r: r, sm: sm, c: c, qp: qp,
		old: make([]int, S), tail: make([]int, S), fin: make([]bool, S), cursor: make([]int, S),
		slots: make([]uint64, U), lw: &workload.LandWatch{Sim: w.e.Sim}, cur: c % S}
	for k := range S {
		m.cursor[k] = c
	}
	m.setGrid(n)
	const low = 1<<32 - 1
	m.moved = func(v uint64) bool { return v>>32 > m.o || v&low != 0 }
	return m
}

// Handle implements sim.Handler.
func (m *hForward) Handle(*sim.Sim, uint64) {
	if m.reentered() {
		return
	}
	w, t, r := m.w, m.t, m.r
	S, U, me, u, rec := w.S, w.U, r/w.U, r%w.U, w.rec
	ws := w.ws.Region(r)
	const low = 1<<32 - 1
	for {
		switch m.pc {
		case fwGS0, fwGS1:
			i := 0
			if m.pc == fwGS1 {
				i = 1
			}
			m.pc++
			if m.arrive(t, w.sync[r], i, m) {
				return
			}
		case fwGS0W, fwGS1W:
			i := 0
			if m.pc == fwGS1W {
				i = 1
			}
			if m.pc == fwGS0W {
				m.pc = fwTop
				m.recs = w.fwd[r*w.nch+m.c]
			} else {
				m.pc = fwDone
			}
			if m.waitGrid(t, w.sync[r], i, m) {
				return
			}
		case fwTop:
			var wip uint32
			for k := range S {
				if m.tail[k] > m.old[k] || !m.fin[k] {
					wip |= 1 << k
				}
			}
			if wip == 0 {
				w.fwd[r*w.nch+m.c] = m.recs
				m.pc = fwEnds
				m.d = 0
				continue
			}
			off := (m.cur + 1) % S
			if hi := wip >> off << off; hi != 0 {
				m.cur = bits.TrailingZeros32(hi)
			} else {
				m.cur = bits.TrailingZeros32(wip)
			}
			m.pc = fwRecord
			if m.tail[m.cur] <= m.old[m.cur] && !m.fin[m.cur] {
				// Poll every source's tail until this one moved or finished.
				m.word = w.tailOff(m.c, m.cur)
				m.lw.At = 0
				ws.Watch(m.word, m.lw)
				m.o = uint64(m.old[m.cur])
				m.pc = fwTailSeen
				m.inOp = true
				t.WaitWordThen(ws, m.word, "v2 hybrid forward tail", m.moved, m, 0)
				if m.yield() {
					return
				}
				continue
			}
			m.takeChunk()
		case fwTailSeen:
			ws.Unwatch(m.word, m.lw)
			for k := range S {
				v := ws.Load64(w.tailOff(m.c, k))
				m.tail[k], m.fin[k] = int(v>>32), v&low != 0
			}
			if m.cur != me {
				w.seenTail(t, r, m.c, m.cur, m.qp, m.lw.At)
			}
			m.takeChunk()
			m.pc = fwRecord
		case fwRecord:
			if m.slot >= m.end {
				m.pc = fwTop
				continue
			}
			tok := m.cursor[m.cur]
			for w.nodes[m.src][tok]&(1<<me) == 0 {
				tok += w.nch
			}
			m.cursor[m.cur] = tok + w.nch
			m.tok = tok
			m.pc = fwSlept
			if d := m.stored.Sub(t.Now()); d > 0 { // tma_store_wait: the TMA buffer is free
				t.SleepThen(d, m, 0)
				return
			}
		case fwSlept:
			cfg := t.GPU().Config()
			at := w.read(t, r, m.sm, rec, cfg.HBMLatency)
			m.pc = fwRead
			if d := at.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case fwRead:
			m.pc = fwCycled
			m.inOp = true
			t.CyclesThen(w.vp.RouteCycles, m, 0) // top-k to scale-up ranks, index exchange, dedup
			if m.yield() {
				return
			}
		case fwCycled:
			m.gm = w.gpus[m.src][m.tok*S+me]
			m.left = m.gm
			m.pc = fwStores
			if m.gm == 0 {
				continue
			}
			// One slot atomic per GPU, issued by the lanes together: the
			// warp waits for one device atomic.
			m.d = bits.TrailingZeros64(m.gm)
			m.pc = fwSlotDone
			m.inOp = true
			t.AtomicAdd64Then(w.cnt[r].R, w.cnt[r].Off(m.d), 1, gpu.ScopeDevice, m, 0)
			if m.yield() {
				return
			}
		case fwSlotDone:
			m.slots[m.d] = t.Result()
			for k := m.gm & (m.gm - 1); k != 0; k &= k - 1 {
				d := bits.TrailingZeros64(k)
				m.slots[d] = w.cnt[r].R.FetchAdd64(w.cnt[r].Off(d), 1, t.Agent())
			}
			m.pc = fwStores
			m.left = m.gm
		case fwStores:
			if m.left == 0 {
				m.pc = fwStored
				m.inOp = true
				t.ComputeThen(t.GPU().Config().StoreIssue, m, 0) // forward metadata and slot indices
				if m.yield() {
					return
				}
				continue
			}
			d := bits.TrailingZeros64(m.left)
			m.left &= m.left - 1
			w.st.Fwd[r*U+d]++
			// nvlStore: the SM's store bandwidth, then the NVLink write.
			cfg := t.GPU().Config()
			if d == w.e.M.Ranks[r].Local {
				m.stored = max(m.stored, w.write(t, r, m.sm, rec, cfg.StoreLatency))
				continue
			}
			out := w.write(t, r, m.sm, rec, t.GPU().NVLink().Config().Latency)
			m.inOp = true
			landed := t.NVLinkWriteThen(d, w.dWin.Region(me*U+d), w.suOff(u, m.slots[d]), nil, sim.Bytes(rec), m, 0)
			m.stored = max(m.stored, out, landed)
			if m.yield() {
				return
			}
		case fwStored:
			m.recs = append(m.recs, hFwd{src: int32(m.src), tok: int32(m.tok), last: m.slot == m.end-1})
			m.slot++
			m.pc = fwRecord
		case fwEnds:
			// Linked-list ends into every scale-up peer, then clean the
			// tails.
			if m.d == U {
				m.pc = fwCleans
				m.d = 0
				continue
			}
			d := m.d
			m.d++
			m.inOp = true
			t.Store64Then(w.ws.Region(me*U+d), w.suTailOff(m.c, u), uint64(len(m.recs)), m, 0)
			if m.yield() {
				return
			}
		case fwCleans:
			if m.d == S {
				m.pc = fwEndSleep
				continue
			}
			k := m.d
			m.d++
			m.inOp = true
			t.Store64Then(ws, w.tailOff(m.c, k), 0, m, 0)
			if m.yield() {
				return
			}
		case fwEndSleep:
			m.pc = fwGS1
			if d := m.stored.Sub(t.Now()); d > 0 { // the end barrier's tma_store_wait
				t.SleepThen(d, m, 0)
				return
			}
		case fwDone:
			t.End()
			return
		}
	}
}

// takeChunk takes at most HybridUpdateInterval records of node cur.
func (m *hForward) takeChunk() {
	w := m.w
	m.slot = m.old[m.cur]
	m.end = min(m.tail[m.cur], m.slot+w.vp.HybridUpdateInterval)
	m.old[m.cur] = m.end
	m.src = w.rail(m.r, m.cur)
}

// Steps of a scale-out warp's state machine.
const (
	soGS0 = iota
	soGS0W
	soBegin
	soTok
	soLoaded
	soCycled
	soComputed
	soStoresW
	soPuts
	soTails
	soNext
	soFinish
	soClose
	soGS1
	soGS1W
	soDone
	soJob1
)

// Handle implements sim.Handler: launchDispatch's scale-out closure (grid
// sync, scaleout, grid sync) as a state machine, over a backend that
// issues for process-free groups; its lanes are state machines too.
func (m *hScaleout) Handle(*sim.Sim, uint64) {
	if m.reentered() {
		return
	}
	w, t, r, c := m.w, m.t, m.r, m.c
	me, rec := r/w.U, w.rec
	T, stride := w.e.Step.Tokens[r], w.nch
	for {
		switch m.pc {
		case soGS0, soGS1:
			i := 0
			if m.pc == soGS1 {
				i = 1
			}
			m.pc++
			if m.arrive(t, w.sync[r], i, m) {
				return
			}
		case soGS0W, soGS1W:
			i := 0
			if m.pc == soGS1W {
				i = 1
			}
			m.pc++
			if m.waitGrid(t, w.sync[r], i, m) {
				return
			}
		case soBegin:
			m.begin()
			if !m.lanes.Then() {
				panic("v2: hybrid scale-out state machine with lanes on processes")
			}
			m.lanes.ResumeWarp(m)
			if c < T {
				m.loaded = w.read(t, r, m.sm, w.payload, t.GPU().Config().HBMLatency)
			}
			m.tok = c
			m.pc = soTok
		case soTok:
			if m.tok >= T {
				m.pc = soFinish
				continue
			}
			// Top-k load and copy, node dedup, slot exchange; then the
			// token's TMA load must have arrived.
			m.pc = soLoaded
			m.inOp = true
			t.Load64Then(w.topk[r].R, 0, m, 0)
			if m.yield() {
				return
			}
		case soLoaded:
			m.pc = soCycled
			m.inOp = true
			t.CyclesThen(w.vp.RouteCycles, m, 0)
			if m.yield() {
				return
			}
		case soCycled:
			m.pc = soComputed
			m.inOp = true
			t.ComputeThen(t.GPU().Config().StoreIssue, m, 0)
			if m.yield() {
				return
			}
		case soComputed:
			m.mask = w.nodes[r][m.tok]
			m.pc = soStoresW
			if d := m.loaded.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case soStoresW:
			lat := t.GPU().Config().StoreLatency
			done := t.Now()
			if m.mask&^(1<<me) != 0 { // send buffer, only if RDMA follows
				done = max(done, w.write(t, r, m.sm, rec, lat))
			}
			if m.mask&(1<<me) != 0 { // local bypass into the own node's receive buffer
				done = max(done, w.write(t, r, m.sm, rec, lat))
			}
			m.pc = soPuts
			if d := done.Sub(t.Now()); d > 0 { // tma_store_wait
				t.SleepThen(d, m, 0)
				return
			}
		case soPuts:
			if next := m.tok + stride; next < T {
				m.loaded = w.read(t, r, m.sm, w.payload, t.GPU().Config().HBMLatency)
			}
			w.e.Disp.Msgs += int64(bits.OnesCount64(m.mask))
			if m.runLanes(m.putJobs(m.mask), soTails) {
				return
			}
		case soTails:
			if m.runLanes(m.tailJobs(), soNext) {
				return
			}
		case soNext:
			m.tok += stride
			m.pc = soTok
		case soFinish:
			if m.runLanes(m.finishJobs(), soClose) {
				return
			}
		case soClose:
			m.lanes.Close()
			m.pc = soGS1
		case soJob1:
			m.jobDone(t, 0, m.start)
			m.pc = m.ret
		case soDone:
			t.End()
			return
		}
	}
}

// runLanes is gpu.Lanes.Run for the state machine: it starts jobs
// 0..k-1 (one on the warp itself, several on the lanes, which wake the
// warp when the last is done) and reports whether the warp now waits; it
// goes on at next.
func (m *hScaleout) runLanes(k int, next uint8) bool {
	switch k {
	case 0:
		m.pc = next
		return false
	case 1:
		m.pc, m.ret = soJob1, next
		m.start = m.t.Now()
		m.inOp = true
		m.jobThen(m.t, m.gn, 0, m, 0)
		return m.yield()
	}
	m.lanes.RunThen(k)
	m.pc = next
	return true
}

// hCombFwd is a combine forward warp (channel c, warp s of SM sm, of
// rank r): launchCombine's forward closure (two grid syncs,
// combineForward, done) as a state machine, over a backend that issues
// for process-free groups.
type hCombFwd struct {
	drive
	w              *Hybrid
	t              *gpu.Group
	r, sm, s, c    int
	qp             int
	sh             gin.Sharing
	gn             *gin.Gin
	team           gin.Team
	reduce         sim.Duration
	moved          func(v uint64) bool
	o              uint64 // the scale-up tail wait's last seen count
	recs           []hFwd
	recv, cached   []int
	i              int // the record
	gm             uint64
	loaded, stored sim.Time
	pending        int
	k              int // clean, finish waits: the word
	lw             *workload.LandWatch
	word           uint64
	fret, pc       uint8
}

const (
	cfGS0 = iota
	cfGS0W
	cfGS1
	cfGS1W
	cfBegin
	cfRec
	cfLoaded
	cfWaitLoop
	cfWaited
	cfReady
	cfAfterFlush
	cfLoadedRec
	cfCycled
	cfFlush
	cfFlushPut
	cfFlushDone
	cfEndFlush
	cfClear
	cfFinish
	cfWaitFin
	cfFinSeen
	cfDone
	cfReduced
)

func newHCombFwd(w *Hybrid, r, sm, s, c int, n uint64, reduce sim.Duration) *hCombFwd {
	m := &hCombFwd{w: w, r: r, sm: sm, s: s, c: c, reduce: reduce, pending: -1,
		recv: make([]int, w.U), cached: make([]int, w.U), lw: &workload.LandWatch{Sim: w.e.Sim}}
	m.qp, m.sh = qpFor(w.sms, w.qps, w.C, sm, s, false)
	m.team = w.dc.Rail(r)
	m.setGrid(n)
	m.moved = func(v uint64) bool { return v > m.o }
	return m
}

func hFinished(v uint64) bool { return v == 1 }

// ready is combineForward's ready: the first GPU of the record whose
// contribution has not been seen yet.
func (m *hCombFwd) ready() (int, bool) {
	for k := m.gm; k != 0; k &= k - 1 {
		if j := bits.TrailingZeros64(k); m.recv[j] >= m.cached[j] {
			return j, false
		}
	}
	return 0, true
}

// finish is finish-flag item i of the Parallel section (a lane per rail
// peer): its own node's flag is a device atomic, a remote one a
// VASignalAdd.
func (m *hCombFwd) finish(th *gpu.Group, i int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	me := r / w.U
	if i == me {
		th.AtomicAdd64Then(w.ws.Region(r), w.tailOff(m.c, me), 1, gpu.ScopeDevice, h, arg)
		return
	}
	f := &hFinishSig{m: m, th: th, i: i, start: th.Now(), h: h, arg: arg}
	w.dc.GinShared(th, r, m.qp, m.sh).SignalThen(f, 0, m.team, i, gin.VASignalAdd{Win: w.ws, Off: w.tailOff(m.c, me), Value: 1})
}

// hFinishSig notes a finish signal's issue once it is issued.
type hFinishSig struct {
	m     *hCombFwd
	th    *gpu.Group
	i     int
	start sim.Time
	h     sim.Handler
	arg   uint64
}

// Handle implements sim.Handler.
func (f *hFinishSig) Handle(s *sim.Sim, _ uint64) {
	m := f.m
	w := m.w
	w.issue[(w.rail(m.r, f.i)*w.nch+m.c)*w.S+m.r/w.U] = hIssue{f.start, f.th.Now()}
	w.e.Comb.Sigs++
	w.st.CFinish++
	f.h.Handle(s, f.arg)
}

// Handle implements sim.Handler.
func (m *hCombFwd) Handle(*sim.Sim, uint64) {
	if m.reentered() {
		return
	}
	w, t, r, c := m.w, m.t, m.r, m.c
	U, S, me, crec := w.U, w.S, r/w.U, w.crec
	ws := w.ws.Region(r)
	ph := &w.e.Comb
	for {
		switch m.pc {
		case cfGS0, cfGS1:
			i := 0
			if m.pc == cfGS1 {
				i = 1
			}
			m.pc++
			if m.arrive(t, w.sync[r], i, m) {
				return
			}
		case cfGS0W, cfGS1W:
			i := 0
			if m.pc == cfGS1W {
				i = 1
			}
			m.pc++
			if m.waitGrid(t, w.sync[r], i, m) {
				return
			}
		case cfBegin:
			m.gn = w.dc.GinShared(t, r, m.qp, m.sh)
			m.recs = w.fwd[r*w.nch+c]
			m.i = 0
			m.pc = cfRec
		case cfRec:
			if m.i == len(m.recs) {
				m.pc = cfEndFlush
				continue
			}
			rc := m.recs[m.i]
			m.gm = w.gpus[rc.src][int(rc.tok)*S+me]
			if _, ok := m.ready(); ok {
				m.pc = cfReady
				continue
			}
			m.pc = cfLoaded
			m.inOp = true
			t.Load64Then(ws, w.suTailOff(c, 0), m, 0) // reload every tail (one load per lane)
			if m.yield() {
				return
			}
		case cfLoaded, cfWaited:
			for j := range U {
				m.cached[j] = int(ws.Load64(w.suTailOff(c, j)))
			}
			m.pc = cfWaitLoop
		case cfWaitLoop:
			j, ok := m.ready()
			if ok {
				m.pc = cfReady
				continue
			}
			m.o = uint64(m.recv[j])
			m.pc = cfWaited
			m.inOp = true
			t.WaitWordThen(ws, w.suTailOff(c, j), "v2 hybrid combine scale-up tail", m.moved, m, 0)
			if m.yield() {
				return
			}
		case cfReady:
			for k := m.gm; k != 0; k &= k - 1 {
				m.recv[bits.TrailingZeros64(k)]++
			}
			// combine_reduce: load every GPU's contribution; before
			// writing the TMA buffer, release it (the previous record's
			// put).
			m.loaded = w.read(t, r, m.sm, bits.OnesCount64(m.gm)*crec, t.GPU().Config().HBMLatency)
			m.pc, m.fret = cfFlush, cfAfterFlush
		case cfAfterFlush:
			m.pc = cfLoadedRec
			if d := m.loaded.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case cfLoadedRec:
			m.pc = cfCycled
			m.inOp = true
			t.CyclesThen(w.vp.RouteCycles, m, 0) // top-k weight merge
			if m.yield() {
				return
			}
		case cfCycled:
			m.stored = w.write(t, r, m.sm, crec, t.GPU().Config().StoreLatency)
			m.pending = m.i
			ph.Msgs++
			m.i++
			m.pc = cfRec
		case cfFlush:
			// flush_last_tma_and_issue_rdma: wait for the previous
			// record's store, put it to its source's rail peer unless it
			// is on this node.
			if m.pending < 0 {
				m.pc = m.fret
				continue
			}
			m.pc = cfFlushPut
			if d := m.stored.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case cfFlushPut:
			rc := m.recs[m.pending]
			m.pc = cfFlushDone
			src := int(rc.src) / U
			if src == me {
				continue
			}
			ph.RDMABytes += int64(crec)
			w.st.CPuts++
			m.inOp = true
			if rc.last {
				w.st.CLast++
				m.gn.PutThen(m, 0, m.team, src, w.cw, w.cRecvOff(me, int(rc.tok)), w.cw, w.cSendOff(c, m.pending), uint64(crec), nil, nil)
			} else {
				m.gn.PutThen(m, 0, m.team, src, w.cw, w.cRecvOff(me, int(rc.tok)), w.cw, w.cSendOff(c, m.pending), uint64(crec), nil, nil,
					gin.OptAggregateRequests)
			}
			if m.yield() {
				return
			}
		case cfFlushDone:
			m.pending = -1
			m.pc = m.fret
		case cfEndFlush:
			m.pc, m.fret = cfFlush, cfClear
			m.k = 0
		case cfClear:
			if m.k == U {
				m.pc = cfFinish
				m.inOp = true
				m.gn.FlushThen(m, 0)
				if m.yield() {
					return
				}
				continue
			}
			j := m.k
			m.k++
			m.inOp = true
			t.Store64Then(ws, w.suTailOff(c, j), 0, m, 0)
			if m.yield() {
				return
			}
		case cfFinish:
			// Finish flags: red_add_rel pack2(1, 0) into every rail
			// peer's tail word of this channel, then wait for every
			// peer's.
			m.pc = cfWaitFin
			m.k = 0
			m.inOp = true
			t.ParallelThen(S, m.finish, m, 0)
			if m.yield() {
				return
			}
		case cfWaitFin:
			if m.k == S {
				m.pc = cfDone
				continue
			}
			m.word = w.tailOff(c, m.k)
			m.lw.At = 0
			ws.Watch(m.word, m.lw)
			m.pc = cfFinSeen
			m.inOp = true
			t.WaitWordThen(ws, m.word, "v2 hybrid combine finish", hFinished, m, 0)
			if m.yield() {
				return
			}
		case cfFinSeen:
			ws.Unwatch(m.word, m.lw)
			if m.k != me {
				w.seenTail(t, r, c, m.k, m.qp, m.lw.At)
			}
			m.k++
			m.pc = cfWaitFin
			m.inOp = true
			t.Store64Then(ws, m.word, 0, m, 0)
			if m.yield() {
				return
			}
		case cfDone:
			m.pc = cfReduced
			if m.lastReduces(t, &w.live[r], m.reduce, m) {
				return
			}
		case cfReduced:
			reduced(w.e, t, r)
			return
		}
	}
}

// combWarp is a direct-mode combine warp (warp wi of SM sm of rank r):
// launchCombine's warp closure (grid sync, one record per (token, rank)
// back to its source, grid sync) as a state machine, over a backend that
// issues for process-free groups.
type combWarp struct {
	drive
	w       *Direct
	t       *gpu.Group
	r, sm   int
	qp      int
	sharing gin.Sharing
	recs    []combRecord
	i       int
	stored  sim.Time
	pc      uint8
}

const (
	dcGS0 = iota
	dcGS0W
	dcRec
	dcSlept
	dcRead
	dcPut
	dcEnd
	dcGS1
	dcGS1W
	dcDone
)

func newCombWarp(w *Direct, r, sm, qp int, sharing gin.Sharing, n uint64, recs []combRecord) *combWarp {
	m := &combWarp{w: w, r: r, sm: sm, qp: qp, sharing: sharing, recs: recs}
	m.setGrid(n)
	return m
}

// Handle implements sim.Handler.
func (m *combWarp) Handle(*sim.Sim, uint64) {
	if m.reentered() {
		return
	}
	w, t, r := m.w, m.t, m.r
	e := w.e
	R, T, crec := e.Step.EP, e.Step.MaxTokens, w.crec
	for {
		switch m.pc {
		case dcGS0, dcGS1:
			i := 0
			if m.pc == dcGS1 {
				i = 1
			}
			m.pc++
			if m.arrive(t, w.sync[r], i, m) {
				return
			}
		case dcGS0W, dcGS1W:
			i := 0
			if m.pc == dcGS1W {
				i = 1
			}
			m.pc++
			if m.waitGrid(t, w.sync[r], i, m) {
				return
			}
		case dcRec:
			if m.i == len(m.recs) {
				m.pc = dcEnd
				continue
			}
			// Wait for the TMA buffer, load (or locally reduce) the
			// rank's expert outputs of the token.
			m.pc = dcSlept
			if d := m.stored.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case dcSlept:
			rc := m.recs[m.i]
			at := w.read(t, r, m.sm, rc.c*2*e.Hidden, t.GPU().Config().HBMLatency)
			m.pc = dcRead
			if d := at.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case dcRead:
			rc := m.recs[m.i]
			e.Comb.Msgs++
			off := (uint64(r)*uint64(T) + uint64(rc.tok)) * uint64(crec)
			switch {
			case rc.src == r:
				m.stored = w.write(t, r, m.sm, crec, t.GPU().Config().StoreLatency)
				m.i++
				m.pc = dcRec
			case w.nvl(r, rc.src):
				m.i++
				m.pc = dcRec
				m.inOp = true
				m.stored = t.NVLinkWriteThen(e.M.Ranks[rc.src].Local, w.cWin.Region(rc.src), off, nil, sim.Bytes(crec), m, 0)
				if m.yield() {
					return
				}
			default:
				m.stored = w.write(t, r, m.sm, crec, t.GPU().Config().StoreLatency)
				m.pc = dcPut
				if d := m.stored.Sub(t.Now()); d > 0 {
					t.SleepThen(d, m, 0)
					return
				}
			}
		case dcPut:
			rc := m.recs[m.i]
			m.i++
			m.pc = dcRec
			off := (uint64(r)*uint64(T) + uint64(rc.tok)) * uint64(crec)
			send := (uint64(R)*uint64(T) + uint64(rc.src)*uint64(T) + uint64(rc.tok)) * uint64(crec)
			e.Comb.RDMABytes += int64(crec)
			m.inOp = true
			w.dc.GinShared(t, r, m.qp, m.sharing).PutThen(m, 0, w.dc.World(r), rc.src, w.cWin, off, w.cWin, send,
				uint64(crec), nil, nil)
			if m.yield() {
				return
			}
		case dcEnd:
			m.pc = dcGS1
			if d := m.stored.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case dcDone:
			t.End()
			return
		}
	}
}

// dispWarp is a direct-mode dispatch warp (warp wi of SM sm of rank r):
// launchDispatch's warp closure (grid sync, per token: load, slot atomics,
// TMA and NVLink stores, puts; grid sync) as a state machine whose lane
// sections run on gpu.Group.ParallelThen, over a backend that issues for
// process-free groups.
type dispWarp struct {
	drive
	w                    *Direct
	t                    *gpu.Group
	r, sm                int
	qp                   int
	sharing              gin.Sharing
	toks                 []int
	ti, tok              int
	dsts, lsa, remote    []int
	slots                []uint64
	sd                   [32]slotDone // the slot atomics' continuations, one per lane
	stored, loaded, sent sim.Time
	pc                   uint8
}

// slotDone keeps lane i's slot (the atomic's old value), then continues
// the lane.
type slotDone struct {
	m   *dispWarp
	th  *gpu.Group
	i   int
	h   sim.Handler
	arg uint64
}

// Handle implements sim.Handler.
func (sd *slotDone) Handle(s *sim.Sim, _ uint64) {
	sd.m.slots[sd.i] = sd.th.Result()
	sd.h.Handle(s, sd.arg)
}

const (
	ddGS0 = iota
	ddGS0W
	ddTok
	ddSlept
	ddLoaded
	ddCycled
	ddSlots
	ddStores
	ddLsaDone
	ddPuts
	ddNext
	ddEnd
	ddGS1
	ddGS1W
	ddDone
)

func newDispWarp(w *Direct, r, sm, qp int, sharing gin.Sharing, n uint64, toks []int) *dispWarp {
	m := &dispWarp{w: w, r: r, sm: sm, qp: qp, sharing: sharing, toks: toks}
	m.setGrid(n)
	for i := range m.sd {
		m.sd[i] = slotDone{m: m, i: i}
	}
	return m
}

// slot is lane i's slot atomic on its destination rank's counter.
func (m *dispWarp) slot(th *gpu.Group, i int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	sd := &m.sd[i]
	sd.th, sd.h, sd.arg = th, h, arg
	th.AtomicAdd64Then(w.slot[r].R, w.slot[r].Off(m.dsts[i]), 1, gpu.ScopeDevice, sd, 0)
}

// store is lane j's TMA store into the local rank or NVLink store into a
// peer's receive buffer.
func (m *dispWarp) store(th *gpu.Group, j int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	e := w.e
	i := m.lsa[j]
	d := m.dsts[i]
	off := (uint64(r)*uint64(e.Step.MaxTokens) + m.slots[i]) * uint64(w.rec)
	if d == r {
		m.stored = max(m.stored, w.write(th, r, m.sm, w.rec, th.GPU().Config().StoreLatency))
		h.Handle(e.Sim, arg)
		return
	}
	at := th.NVLinkWriteThen(e.M.Ranks[d].Local, w.dWin.Region(d), off, nil, sim.Bytes(w.rec), h, arg)
	m.stored = max(m.stored, at)
}

// put is lane j's put of the record to its remote rank.
func (m *dispWarp) put(th *gpu.Group, j int, h sim.Handler, arg uint64) {
	w, r := m.w, m.r
	e := w.e
	R, T, rec := e.Step.EP, e.Step.MaxTokens, w.rec
	i := m.remote[j]
	d := m.dsts[i]
	off := (uint64(r)*uint64(T) + m.slots[i]) * uint64(rec)
	e.Disp.RDMABytes += int64(rec)
	w.dc.GinShared(th, r, m.qp, m.sharing).PutThen(h, arg, w.dc.World(r), d, w.dWin, off, w.dWin,
		(uint64(R)*uint64(T)+uint64(m.tok))*uint64(rec), uint64(rec), nil, nil)
}

// Handle implements sim.Handler.
func (m *dispWarp) Handle(*sim.Sim, uint64) {
	if m.reentered() {
		return
	}
	w, t, r := m.w, m.t, m.r
	e := w.e
	for {
		switch m.pc {
		case ddGS0, ddGS1:
			i := 0
			if m.pc == ddGS1 {
				i = 1
			}
			m.pc++
			if m.arrive(t, w.sync[r], i, m) {
				return
			}
		case ddGS0W, ddGS1W:
			i := 0
			if m.pc == ddGS1W {
				i = 1
			}
			m.pc++
			if m.waitGrid(t, w.sync[r], i, m) {
				return
			}
		case ddTok:
			if m.ti == len(m.toks) {
				m.pc = ddEnd
				continue
			}
			m.tok = m.toks[m.ti]
			// prepare_token: TMA load of the token, top-k load, dedup,
			// one slot atomic per distinct destination rank.
			m.pc = ddSlept
			if d := m.stored.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case ddSlept:
			m.loaded = w.read(t, r, m.sm, w.rec, t.GPU().Config().HBMLatency)
			m.pc = ddLoaded
			m.inOp = true
			t.Load64Then(w.topk[r].R, 0, m, 0)
			if m.yield() {
				return
			}
		case ddLoaded:
			m.pc = ddCycled
			m.inOp = true
			t.CyclesThen(w.vp.RouteCycles, m, 0)
			if m.yield() {
				return
			}
		case ddCycled:
			m.dsts = w.distinctRanks(r, m.tok, m.dsts)
			m.slots = m.slots[:0]
			for range m.dsts {
				m.slots = append(m.slots, 0)
			}
			m.pc = ddSlots
			m.inOp = true
			t.ParallelThen(len(m.dsts), m.slot, m, 0)
			if m.yield() {
				return
			}
		case ddSlots:
			m.pc = ddStores
			if d := m.loaded.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case ddStores:
			e.Disp.Msgs += int64(len(m.dsts))
			// TMA store into the send buffer (RDMA source).
			m.sent = 0
			if !w.nvlScale {
				m.sent = w.write(t, r, m.sm, w.rec, t.GPU().Config().StoreLatency)
				m.stored = max(m.stored, m.sent)
			}
			// TMA stores for the local rank and NVLink peers.
			m.lsa, m.remote = m.lsa[:0], m.remote[:0]
			for i, d := range m.dsts {
				if d == r || w.nvl(r, d) {
					m.lsa = append(m.lsa, i)
				} else {
					m.remote = append(m.remote, i)
				}
			}
			m.pc = ddLsaDone
			m.inOp = true
			t.ParallelThen(len(m.lsa), m.store, m, 0)
			if m.yield() {
				return
			}
		case ddLsaDone:
			if len(m.remote) == 0 {
				m.pc = ddNext
				continue
			}
			// tma_store_wait<1>: the send buffer copy is complete; then
			// each lane puts the record to its rank.
			m.pc = ddPuts
			if d := m.sent.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case ddPuts:
			m.pc = ddNext
			m.inOp = true
			t.ParallelThen(len(m.remote), m.put, m, 0)
			if m.yield() {
				return
			}
		case ddNext:
			m.ti++
			m.pc = ddTok
		case ddEnd:
			m.pc = ddGS1
			if d := m.stored.Sub(t.Now()); d > 0 {
				t.SleepThen(d, m, 0)
				return
			}
		case ddDone:
			t.End()
			return
		}
	}
}
