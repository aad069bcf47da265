package v2

import (
	"math/bits"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces/workload"
)

// nvlStoreThen is a TMA store of n bytes from SM sm of rank r into region
// reg of GPU peer (local index) of its node: through the SM's store
// bandwidth and over NVLink, or into local HBM when peer is r itself. It
// returns when the bytes have landed and whether the store is an NVLink
// write whose issue continues the machine at h (true: return from
// Handle); a local store takes no warp time.
func (w *Hybrid) nvlStoreThen(t *gpu.Group, r, sm, peer int, reg *mem.Region, off uint64, n int, h sim.Handler) (sim.Time, bool) {
	if peer == w.e.M.Ranks[r].Local {
		return w.write(t, r, sm, n, t.GPU().Config().StoreLatency), false
	}
	out := w.write(t, r, sm, n, t.GPU().NVLink().Config().Latency)
	// A write of n > 0 bytes takes issue time: h runs in a later event,
	// after the caller has kept the landing instant.
	return max(out, t.NVLinkWriteThen(peer, reg, off, nil, sim.Bytes(n), h, 0)), true
}

// combineEnd ends a combine warp of rank r: all but the rank's last
// running group end; the last one runs the source's reduction
// (combine_reduce_epilogue) and then marks the rank's receivers done.
func (w *Hybrid) combineEnd(t *gpu.Group, r int) {
	if w.live[r]--; w.live[r] != 0 {
		t.End()
		return
	}
	t.ComputeThen(w.reduce[r], &reduced{e: w.e, t: t, r: r}, 0)
}

// reduced ends rank r's last combine warp after the reduction.
type reduced struct {
	e *workload.Env
	t *gpu.Group
	r int
}

// Handle implements sim.Handler.
func (d *reduced) Handle(*sim.Sim, uint64) {
	d.e.ReceiverDone(d.r, d.e.LastOf(d.r))
	d.t.End()
}

// hWarp is what every hybrid warp machine holds: its warp, the channel c
// it serves and the kernels.
type hWarp struct {
	warp
	w *Hybrid
	c int
}

// hWarp is warp s of SM sm of rank r: channel sm·C + s.
func (w *Hybrid) hWarp(r, sm, s int) hWarp {
	return hWarp{warp: warp{r: r, sm: sm}, w: w, c: sm*w.C + s}
}

// railCtx is a hybrid warp's GIN context on the rail team: QP qp with
// sharing sh (comm::get_qp_mode) and the warp's handle gn, taken where
// the warp starts.
type railCtx struct {
	qp   int
	sh   gin.Sharing
	team gin.Team
	gn   *gin.Gin
}

// railCtx is the context of warp s of SM sm of rank r; notify reserves QP
// 0 for the notify warps (dispatch).
func (w *Hybrid) railCtx(r, sm, s int, notify bool) railCtx {
	qp, sh := qpFor(w.sms, w.qps, w.C, sm, s, notify)
	return railCtx{qp: qp, sh: sh, team: w.dc.Rail(r)}
}

// hScaleout is a dispatch scale-out warp (channel c, warp s of SM sm, of
// rank r), which sends the rank's tokens c, c+nch, ... to their nodes with
// a lane per node. Its program, with the step that runs each line:
//
//	grid sync 0                                    // kernel.launch
//	take the warp's GIN handle; launch the lanes   // soBegin
//	loaded = TMA load of token c
//	for tok = c, c+nch, ...:                       // soToken
//	    load the top-k; routing cycles             // warp.route
//	    copy the top-k (a store issue)             // soCopy
//	    sleep until loaded                         // soLoaded
//	    TMA stores into the send buffer (if a remote node needs the
//	        token) and the own node's receive buffer (if it does);
//	        sleep until they are done              // soStore
//	    loaded = TMA load of the next token        // soPuts
//	    lanes: put the record into slot tail[n]++ of each remote node n
//	    lanes: publish the tail of each node 6 records past its last
//	        update (VASignalAdd; the own node: a device atomic)   // soTails
//	lanes: publish every node's tail and finish flag   // soFinish
//	close the lanes; grid sync 1; end              // soClose
//
// A run of one lane job runs on the warp itself (soJob1 notes its issue).
type hScaleout struct {
	hWarp
	railCtx
	lanes           *gpu.Lanes
	tail, old, slot []int
	jobs            []int
	kind            laneJob
	tok             int
	loaded          sim.Time
	mask            uint64
	ret, pc         soStep // pc, and after soJob1, ret
}

// soStep is where an hScaleout resumes.
type soStep uint8

const (
	soBegin  soStep = iota // the handle, the lanes, the first token's load
	soToken                // the next token, or the finish flags
	soCopy                 // routed: the top-k copy
	soLoaded               // copied: wait for the token
	soStore                // the token is in: TMA stores, wait for them
	soPuts                 // stored: the next load, the puts
	soTails                // the puts are issued: the tail updates
	soNext                 // the tails are published
	soFinish               // no token left: the finish flags
	soClose                // the flags are published: close the lanes, grid sync 1, end
	soJob1                 // a single job on the warp is done
)

// laneJob is what a scale-out warp's lanes do in a run.
type laneJob uint8

const (
	jobPut    laneJob = iota // put the token's record to a node
	jobTail                  // publish a node's tail
	jobFinish                // publish a node's tail and the finish flag
)

func newHScaleout(w *Hybrid, r, sm, s int) *hScaleout {
	S := w.S
	return &hScaleout{hWarp: w.hWarp(r, sm, s), railCtx: w.railCtx(r, sm, s, true),
		tail: make([]int, S), old: make([]int, S), slot: make([]int, S), jobs: make([]int, 0, S)}
}

// begin takes the warp's GIN handle and launches its lanes, each taking
// its own handle where it starts.
func (m *hScaleout) begin() {
	w := m.w
	m.gn = w.dc.GinShared(m.t, m.r, m.qp, m.sh)
	gns := make([]*gin.Gin, w.S)
	start := func(th *gpu.Group, i int) { gns[i] = w.dc.GinShared(th, m.r, m.qp, m.sh) }
	job := func(th *gpu.Group, i int, h sim.Handler, arg uint64) { m.job(th, gns[i], i, h, arg) }
	m.lanes = gpu.NewLanes(m.t, w.S, start, nil, job, nil)
	m.lanes.ResumeWarp(m)
}

// setJobs sets the lanes' next run, of kind jobs, and returns its job
// count: a put to each remote node of the token's mask m.mask (taking a
// slot of every node in it), the tail of each node HybridUpdateInterval
// records past its last update, or every node's finish flag.
func (m *hScaleout) setJobs(kind laneJob) int {
	w := m.w
	m.kind, m.jobs = kind, m.jobs[:0]
	for n := range w.S {
		switch kind {
		case jobPut:
			if m.mask&(1<<n) == 0 {
				continue
			}
			m.slot[n] = m.tail[n]
			m.tail[n]++
			if n == m.r/w.U {
				continue
			}
		case jobTail:
			if m.tail[n] < m.old[n]+w.vp.HybridUpdateInterval {
				continue
			}
		}
		m.jobs = append(m.jobs, n)
	}
	return len(m.jobs)
}

// job starts job i on th (a lane, or the warp) with its handle gn and
// continues at h; the counters move when the operation starts, jobDone
// notes a signal's issue instants when it has.
func (m *hScaleout) job(th *gpu.Group, gn *gin.Gin, i int, h sim.Handler, arg uint64) {
	w, r, c := m.w, m.r, m.c
	me, rec := r/w.U, w.rec
	ph, ws := w.e.Disp.Count(r), &w.rst[r]
	n := m.jobs[i]
	if m.kind == jobPut {
		ph.RDMABytes += int64(rec)
		ws.DPuts++
		gn.PutThen(h, arg, m.team, n, w.dWin, w.recvRec(me, c, m.slot[n]), w.dWin, w.sendRec(m.tok), uint64(rec), nil, nil,
			gin.OptAggregateRequests)
		return
	}
	// red_add_rel of pack2(finish, tail) − pack2(0, last).
	v := uint64(m.tail[n]-m.old[n]) << 32
	if m.kind == jobFinish {
		v |= 1
	}
	m.old[n] = m.tail[n]
	if n == me {
		ws.DLocalTails++
		th.AtomicAdd64Then(w.ws.Region(r), w.tailOff(c, me), v, gpu.ScopeDevice, h, arg)
		return
	}
	ph.Sigs++
	ws.DTails++
	gn.SignalThen(h, arg, m.team, n, gin.VASignalAdd{Win: w.ws, Off: w.tailOff(c, me), Value: v})
}

// runLanes is gpu.Lanes.Run for the machine: it starts jobs 0..k-1 (one
// on the warp itself, several on the lanes, which resume the warp when
// the last is done) and reports whether the warp now waits; it goes on at
// next.
func (m *hScaleout) runLanes(k int, next soStep) bool {
	switch k {
	case 0:
		m.pc = next
		return false
	case 1:
		m.pc, m.ret = soJob1, next
		m.job(m.t, m.gn, 0, m, 0)
		return true
	}
	m.pc = next
	m.lanes.RunThen(k)
	return true
}

// Handle implements sim.Handler.
func (m *hScaleout) Handle(*sim.Sim, uint64) {
	w, t, r, c := m.w, m.t, m.r, m.c
	me, rec := r/w.U, w.rec
	T, stride := w.e.Step.Tokens[r], w.nch
	for {
		switch m.pc {
		case soBegin:
			m.begin()
			if c < T {
				m.loaded = w.read(t, r, m.sm, w.payload, t.GPU().Config().HBMLatency)
			}
			m.tok = c
			m.pc = soToken
		case soToken:
			if m.tok >= T {
				m.pc = soFinish
				continue
			}
			// Top-k load and copy, node dedup, slot exchange; then the
			// token's TMA load must have arrived.
			m.pc = soCopy
			m.route(w.topk[r].R, w.vp.RouteCycles, m)
			return
		case soCopy:
			m.pc = soLoaded
			t.ComputeThen(t.GPU().Config().StoreIssue, m, 0)
			return
		case soLoaded:
			m.mask = w.nodes[r][m.tok]
			m.pc = soStore
			if sleepThen(t, m.loaded, m) {
				return
			}
		case soStore:
			lat := t.GPU().Config().StoreLatency
			done := t.Now()
			if m.mask&^(1<<me) != 0 { // send buffer, only if RDMA follows
				done = max(done, w.write(t, r, m.sm, rec, lat))
			}
			if m.mask&(1<<me) != 0 { // local bypass into the own node's receive buffer
				done = max(done, w.write(t, r, m.sm, rec, lat))
			}
			m.pc = soPuts
			if sleepThen(t, done, m) { // tma_store_wait
				return
			}
		case soPuts:
			if next := m.tok + stride; next < T {
				m.loaded = w.read(t, r, m.sm, w.payload, t.GPU().Config().HBMLatency)
			}
			w.e.Disp.Count(r).Msgs += int64(bits.OnesCount64(m.mask))
			if m.runLanes(m.setJobs(jobPut), soTails) {
				return
			}
		case soTails:
			if m.runLanes(m.setJobs(jobTail), soNext) {
				return
			}
		case soNext:
			m.tok += stride
			m.pc = soToken
		case soFinish:
			if m.runLanes(m.setJobs(jobFinish), soClose) {
				return
			}
		case soClose:
			m.lanes.Close()
			m.grid.drainEnd(0, 1)
			return
		case soJob1:
			m.pc = m.ret
		}
	}
}

// hForward is a dispatch forward warp (channel c, warp s of SM sm, of
// rank r), which moves the records its channel received from every node
// into the scale-up buffers of the token's GPUs on this node. Its
// program, with the step that runs each line:
//
//	grid sync 0                                    // kernel.launch
//	cur = c % S
//	while a node has records not taken or no finish flag:   // fwPick
//	    cur = the next such node after cur
//	    if node cur has neither:
//	        wait until its tail word moves or has the flag
//	        read every node's tail and flag        // fwTail
//	    take at most 6 of node cur's records
//	    for each (the next token of cur's rail peer with a GPU here):   // fwRecord
//	        sleep until stored                     // the TMA buffer is free
//	        sleep until the TMA load of the record is done   // fwLoad
//	        routing cycles                         // fwRoute
//	        a slot atomic per GPU of the token here, the warp waiting for
//	            the first                          // fwSlots, fwSlotsDone
//	        stored = store into each GPU's scale-up buffer (NVLink, or
//	            TMA for this GPU)                  // fwStore
//	        a store issue (metadata); note the record for the combine   // fwStored
//	store the record count into every scale-up peer's tail word   // fwEnds
//	clear every node's tail word                   // fwClears
//	sleep until stored; grid sync 1; end           // fwDrain
type hForward struct {
	hWarp
	qp        int
	moved     func(v uint64) bool
	o         uint64 // the tail wait's last seen count
	old, tail []int
	fin       []bool
	cursor    []int // per source node: next token of its channel to look at
	slots     []uint64
	recs      []hFwd
	cur       int
	stored    sim.Time
	word      uint64 // the tail word waited on
	slot, end int    // the records taken from node cur: slot..end-1
	src, tok  int
	gm, left  uint64 // the token's GPUs on this node; those left to store into
	d         int
	pc        fwStep
}

// fwStep is where an hForward resumes.
type fwStep uint8

const (
	fwPick      fwStep = iota // the next node with records, or the end
	fwTail                    // its tail word moved: read every tail
	fwRecord                  // the next record taken, or the next node
	fwLoad                    // the TMA buffer is free: load the record
	fwRoute                   // loaded: routing cycles
	fwSlots                   // routed: the slot atomics
	fwSlotsDone               // the first slot atomic is done
	fwStore                   // the next GPU's store, or the metadata
	fwStored                  // the record is stored
	fwEnds                    // the next peer's tail word
	fwClears                  // the next node's tail word
	fwDrain                   // wait for the stores, grid sync 1, end
)

func newHForward(w *Hybrid, r, sm, s int) *hForward {
	c := sm*w.C + s
	S, U := w.S, w.U
	qp, _ := qpFor(w.sms, w.qps, w.C, sm, s, true)
	m := &hForward{hWarp: w.hWarp(r, sm, s), qp: qp, recs: w.fwd[r*w.nch+c],
		old: make([]int, S), tail: make([]int, S), fin: make([]bool, S), cursor: make([]int, S),
		slots: make([]uint64, U), cur: c % S}
	for k := range S {
		m.cursor[k] = c
	}
	const low = 1<<32 - 1
	m.moved = func(v uint64) bool { return v>>32 > m.o || v&low != 0 }
	return m
}

// takeChunk takes at most HybridUpdateInterval records of node cur.
func (m *hForward) takeChunk() {
	w := m.w
	m.slot = m.old[m.cur]
	m.end = min(m.tail[m.cur], m.slot+w.vp.HybridUpdateInterval)
	m.old[m.cur] = m.end
	m.src = w.rail(m.r, m.cur)
}

// Handle implements sim.Handler.
func (m *hForward) Handle(*sim.Sim, uint64) {
	w, t, r := m.w, m.t, m.r
	S, U, me, u, rec := w.S, w.U, r/w.U, r%w.U, w.rec
	ws := w.ws.Region(r)
	const low = 1<<32 - 1
	for {
		switch m.pc {
		case fwPick:
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
			if m.tail[m.cur] <= m.old[m.cur] && !m.fin[m.cur] {
				// Poll every source's tail until this one moved or finished.
				m.word = w.tailOff(m.c, m.cur)
				m.o = uint64(m.old[m.cur])
				m.pc = fwTail
				t.WaitWordThen(ws, m.word, "v2 hybrid forward tail", m.moved, m, 0)
				return
			}
			m.takeChunk()
			m.pc = fwRecord
		case fwTail:
			for k := range S {
				v := ws.Load64(w.tailOff(m.c, k))
				m.tail[k], m.fin[k] = int(v>>32), v&low != 0
			}
			if m.cur != me {
				w.seenTail(r, m.c, m.cur)
			}
			m.takeChunk()
			m.pc = fwRecord
		case fwRecord:
			if m.slot >= m.end {
				m.pc = fwPick
				continue
			}
			tok := m.cursor[m.cur]
			for w.nodes[m.src][tok]&(1<<me) == 0 {
				tok += w.nch
			}
			m.cursor[m.cur] = tok + w.nch
			m.tok = tok
			m.pc = fwLoad
			if sleepThen(t, m.stored, m) { // tma_store_wait: the TMA buffer is free
				return
			}
		case fwLoad:
			m.pc = fwRoute
			if sleepThen(t, w.read(t, r, m.sm, rec, t.GPU().Config().HBMLatency), m) {
				return
			}
		case fwRoute:
			m.pc = fwSlots
			t.CyclesThen(w.vp.RouteCycles, m, 0) // top-k to scale-up ranks, index exchange, dedup
			return
		case fwSlots:
			m.gm = w.gpus[m.src][m.tok*S+me]
			m.left = m.gm
			m.pc = fwStore
			if m.gm == 0 {
				continue
			}
			// One slot atomic per GPU, issued by the lanes together: the
			// warp waits for one device atomic.
			m.d = bits.TrailingZeros64(m.gm)
			m.pc = fwSlotsDone
			t.AtomicAdd64Then(w.cnt[r].R, w.cnt[r].Off(m.d), 1, gpu.ScopeDevice, m, 0)
			return
		case fwSlotsDone:
			m.slots[m.d] = t.Result()
			for k := m.gm & (m.gm - 1); k != 0; k &= k - 1 {
				d := bits.TrailingZeros64(k)
				m.slots[d] = w.cnt[r].R.FetchAdd64(w.cnt[r].Off(d), 1, t.Agent())
			}
			m.pc = fwStore
		case fwStore:
			if m.left == 0 {
				m.pc = fwStored
				t.ComputeThen(t.GPU().Config().StoreIssue, m, 0) // forward metadata and slot indices
				return
			}
			d := bits.TrailingZeros64(m.left)
			m.left &= m.left - 1
			w.st.Fwd[r*U+d]++
			at, waits := w.nvlStoreThen(t, r, m.sm, d, w.dWin.Region(me*U+d), w.suOff(u, m.slots[d]), rec, m)
			m.stored = max(m.stored, at)
			if waits {
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
				m.pc = fwClears
				m.d = 0
				continue
			}
			d := m.d
			m.d++
			t.Store64Then(w.ws.Region(me*U+d), w.suTailOff(m.c, u), uint64(len(m.recs)), m, 0)
			return
		case fwClears:
			if m.d == S {
				m.pc = fwDrain
				continue
			}
			k := m.d
			m.d++
			t.Store64Then(ws, w.tailOff(m.c, k), 0, m, 0)
			return
		case fwDrain:
			m.grid.drainEnd(m.stored, 1) // the end barrier's tma_store_wait
			return
		}
	}
}

// hScaleup is a combine scale-up warp (channel c, warp s of SM sm, of
// rank r), which returns the expert outputs of the records each forwarder
// of its node moved to this rank in dispatch, one per forwarder per
// round. Its program, with the step that runs each line:
//
//	grid sync 0; grid sync 1                       // kernel.launch
//	dst = c
//	loop:
//	    load (every forwarder's next linked-list entry)   // suRound
//	    wip = the forwarders with a record for this rank left   // suEntries
//	    if none: break
//	    for each forwarder dst in wip, round-robin after dst:   // suPick
//	        sleep until stored                     // the TMA buffer is free
//	        sleep until the TMA load of the expert output is done   // suLoad
//	        routing cycles (source metadata, top-k weights)   // suRoute
//	        stored = store into dst's scale-up buffer (NVLink, or TMA for
//	            this GPU)                          // suStore
//	    every 3 rounds, and after the loop:        // suUpdate
//	        sleep until stored; fence.sys (st.release.sys)
//	        store each forwarder's changed count into its tail word   // suFence, suTails
//	end; the rank's last combine warp reduces      // suEnd
type hScaleup struct {
	hWarp
	cursor    []int // per forwarder: next record of its channel list
	sent, old []int
	stored    sim.Time
	dst       int
	round     int
	wip       uint64
	final     bool
	f         int
	pc        suStep
}

// suStep is where an hScaleup resumes.
type suStep uint8

const (
	suRound   suStep = iota // a round: load the entries
	suEntries               // loaded: the forwarders with records
	suPick                  // the next forwarder of the round, or the update
	suLoad                  // the TMA buffer is free: load the output
	suRoute                 // loaded: routing cycles
	suStore                 // routed: the store
	suUpdate                // the round is done: publish the counts?
	suFence                 // the stores are done: the fence
	suTails                 // fenced: the next changed count
	suEnd
)

func newHScaleup(w *Hybrid, r, sm, s int) *hScaleup {
	U := w.U
	return &hScaleup{hWarp: w.hWarp(r, sm, s), dst: sm*w.C + s,
		cursor: make([]int, U), sent: make([]int, U), old: make([]int, U)}
}

// next reports whether forwarder f has a record for this rank left,
// moving its cursor to it.
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
	w, t, r := m.w, m.t, m.r
	U, me, own := w.U, r/w.U, r%w.U
	for {
		switch m.pc {
		case suRound:
			m.pc = suEntries
			t.Load64Then(w.topk[r].R, 0, m, 0) // the next linked-list entry of every forwarder
			return
		case suEntries:
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
			m.pc = suLoad
			if sleepThen(t, m.stored, m) { // tma_store_wait before reusing the TMA buffer
				return
			}
		case suLoad:
			m.pc = suRoute
			if sleepThen(t, w.read(t, r, m.sm, 2*w.e.Hidden, t.GPU().Config().HBMLatency), m) {
				return
			}
		case suRoute:
			m.pc = suStore
			t.CyclesThen(w.vp.RouteCycles, m, 0) // source metadata, top-k weights
			return
		case suStore:
			dst, i := m.dst, m.cursor[m.dst]
			m.pc = suPick
			w.st.Back[r*U+dst]++
			m.sent[dst]++
			m.cursor[dst]++
			at, waits := w.nvlStoreThen(t, r, m.sm, dst, w.cw.Region(me*U+dst), w.cSuOff(own, m.c, i), w.crec, m)
			m.stored = at
			if waits {
				return
			}
		case suUpdate:
			m.round++
			if !m.final && m.round < w.vp.HybridScaleupInterval {
				m.pc = suRound
				continue
			}
			m.round = 0
			m.pc = suFence
			if sleepThen(t, m.stored, m) {
				return
			}
		case suFence:
			m.pc = suTails
			m.f = 0
			t.FenceThen(gpu.ScopeSystem, m, 0) // st.release.sys
			return
		case suTails:
			for m.f < U && m.sent[m.f] == m.old[m.f] {
				m.f++
			}
			if m.f == U {
				m.pc = suRound
				if m.final {
					m.pc = suEnd
				}
				continue
			}
			f := m.f
			m.old[f] = m.sent[f]
			m.f++
			t.Store64Then(w.ws.Region(me*U+f), w.suTailOff(m.c, own), uint64(m.sent[f]), m, 0)
			return
		case suEnd:
			w.combineEnd(t, r)
			return
		}
	}
}

// hCombFwd is a combine forward warp (channel c, warp s of SM sm, of
// rank r), which reduces the records it forwarded in dispatch, in the
// same order, and returns each to its source's rail peer. Its program,
// with the step that runs each line:
//
//	grid sync 0; grid sync 1                       // kernel.launch
//	take the warp's GIN handle                     // cfBegin
//	for rec in the records this channel forwarded: // cfRecord
//	    if a GPU of rec has not published its output yet:
//	        load every scale-up tail (one load per lane)
//	        read them                              // cfTails
//	        while one has not: wait until its tail moves; read them   // cfWait
//	    count rec from each of its GPUs            // cfReady
//	    loaded = TMA load of every GPU's contribution
//	    flush
//	    sleep until loaded                         // cfReduce
//	    routing cycles (top-k weight merge)        // cfMerge
//	    stored = TMA store of the sum into the send buffer; pending = rec   // cfMerged
//	flush                                          // cfLast
//	clear every scale-up tail word; flush the GIN context   // cfClears
//	lanes: the finish flag into each node's tail word (VASignalAdd; the
//	    own node: a device atomic)                 // cfFinish
//	for each node: wait for its finish flag, clear it   // cfFinWait, cfFinSeen
//	end; the rank's last combine warp reduces      // cfEnd
//
//	flush (flush_last_tma_and_issue_rdma), a subroutine that returns to fret:
//	    if a record is pending:                    // cfFlush
//	        sleep until stored
//	        unless its source is on this node: put it to the source's rail
//	            peer, AggregateRequests except on a forward chunk's last
//	            record                             // cfFlushPut
//	        nothing is pending                     // cfFlushed
type hCombFwd struct {
	hWarp
	railCtx
	moved          func(v uint64) bool
	o              uint64 // the scale-up tail wait's last seen count
	recs           []hFwd
	recv, cached   []int
	i              int // the record
	gm             uint64
	loaded, stored sim.Time
	pending        int
	k              int // clean, finish waits: the word
	word           uint64
	fret, pc       cfStep // pc, and after a flush, fret
}

// cfStep is where an hCombFwd resumes.
type cfStep uint8

const (
	cfBegin    cfStep = iota // the handle and the records
	cfRecord                 // the next record, or the last flush
	cfTails                  // the tails are loaded: read them
	cfWait                   // a GPU of the record has not published it?
	cfReady                  // every GPU has: load the contributions, flush
	cfReduce                 // flushed: wait for the contributions
	cfMerge                  // loaded: the merge cycles
	cfMerged                 // merged: the TMA store
	cfFlush                  // flush: a record pending?
	cfFlushPut               // its store is done: put it
	cfFlushed                // put
	cfLast                   // no record left: the last flush
	cfClears                 // the next scale-up tail word, or the GIN flush
	cfFinish                 // flushed: the finish flags
	cfFinWait                // the next node's finish flag, or the end
	cfFinSeen                // the flag is set: clear it
	cfEnd
)

func newHCombFwd(w *Hybrid, r, sm, s int) *hCombFwd {
	m := &hCombFwd{hWarp: w.hWarp(r, sm, s), railCtx: w.railCtx(r, sm, s, false), pending: -1,
		recv: make([]int, w.U), cached: make([]int, w.U)}
	m.moved = func(v uint64) bool { return v > m.o }
	return m
}

func hFinished(v uint64) bool { return v == 1 }

// ready reports whether every GPU of the record has published it, and if
// not the first one that has not.
func (m *hCombFwd) ready() (int, bool) {
	for k := m.gm; k != 0; k &= k - 1 {
		if j := bits.TrailingZeros64(k); m.recv[j] >= m.cached[j] {
			return j, false
		}
	}
	return 0, true
}

// readTails reads every scale-up tail word of the channel.
func (m *hCombFwd) readTails(ws *mem.Region) {
	for j := range m.w.U {
		m.cached[j] = int(ws.Load64(m.w.suTailOff(m.c, j)))
	}
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
	f := &hFinishSig{m: m, h: h, arg: arg}
	w.dc.GinShared(th, r, m.qp, m.sh).SignalThen(f, 0, m.team, i, gin.VASignalAdd{Win: w.ws, Off: w.tailOff(m.c, me), Value: 1})
}

// hFinishSig counts a finish signal once it is issued.
type hFinishSig struct {
	m   *hCombFwd
	h   sim.Handler
	arg uint64
}

// Handle implements sim.Handler.
func (f *hFinishSig) Handle(s *sim.Sim, _ uint64) {
	w, r := f.m.w, f.m.r
	w.e.Comb.Count(r).Sigs++
	w.rst[r].CFinish++
	f.h.Handle(s, f.arg)
}

// Handle implements sim.Handler.
func (m *hCombFwd) Handle(*sim.Sim, uint64) {
	w, t, r, c := m.w, m.t, m.r, m.c
	U, S, me, crec := w.U, w.S, r/w.U, w.crec
	ws := w.ws.Region(r)
	ph := w.e.Comb.Count(r)
	for {
		switch m.pc {
		case cfBegin:
			m.gn = w.dc.GinShared(t, r, m.qp, m.sh)
			m.recs = w.fwd[r*w.nch+c]
			m.i = 0
			m.pc = cfRecord
		case cfRecord:
			if m.i == len(m.recs) {
				m.pc = cfLast
				continue
			}
			rc := m.recs[m.i]
			m.gm = w.gpus[rc.src][int(rc.tok)*S+me]
			if _, ok := m.ready(); ok {
				m.pc = cfReady
				continue
			}
			m.pc = cfTails
			t.Load64Then(ws, w.suTailOff(c, 0), m, 0) // reload every tail (one load per lane)
			return
		case cfTails:
			m.readTails(ws)
			m.pc = cfWait
		case cfWait:
			j, ok := m.ready()
			if ok {
				m.pc = cfReady
				continue
			}
			m.o = uint64(m.recv[j])
			m.pc = cfTails
			t.WaitWordThen(ws, w.suTailOff(c, j), "v2 hybrid combine scale-up tail", m.moved, m, 0)
			return
		case cfReady:
			for k := m.gm; k != 0; k &= k - 1 {
				m.recv[bits.TrailingZeros64(k)]++
			}
			// combine_reduce: load every GPU's contribution; before
			// writing the TMA buffer, release it (the previous record's
			// put).
			m.loaded = w.read(t, r, m.sm, bits.OnesCount64(m.gm)*crec, t.GPU().Config().HBMLatency)
			m.pc, m.fret = cfFlush, cfReduce
		case cfReduce:
			m.pc = cfMerge
			if sleepThen(t, m.loaded, m) {
				return
			}
		case cfMerge:
			m.pc = cfMerged
			t.CyclesThen(w.vp.RouteCycles, m, 0) // top-k weight merge
			return
		case cfMerged:
			m.stored = w.write(t, r, m.sm, crec, t.GPU().Config().StoreLatency)
			m.pending = m.i
			ph.Msgs++
			m.i++
			m.pc = cfRecord
		case cfFlush:
			// flush_last_tma_and_issue_rdma: wait for the previous
			// record's store, put it to its source's rail peer unless it
			// is on this node.
			if m.pending < 0 {
				m.pc = m.fret
				continue
			}
			m.pc = cfFlushPut
			if sleepThen(t, m.stored, m) {
				return
			}
		case cfFlushPut:
			rc := m.recs[m.pending]
			m.pc = cfFlushed
			src := int(rc.src) / U
			if src == me {
				continue
			}
			ph.RDMABytes += int64(crec)
			w.rst[r].CPuts++
			var opts []gin.OptFlags
			if rc.last {
				w.rst[r].CLast++
			} else {
				opts = aggregate
			}
			m.gn.PutThen(m, 0, m.team, src, w.cw, w.cRecvOff(me, int(rc.tok)), w.cw, w.cSendOff(c, m.pending), uint64(crec), nil, nil,
				opts...)
			return
		case cfFlushed:
			m.pending = -1
			m.pc = m.fret
		case cfLast:
			m.pc, m.fret = cfFlush, cfClears
			m.k = 0
		case cfClears:
			if m.k == U {
				m.pc = cfFinish
				m.gn.FlushThen(m, 0)
				return
			}
			j := m.k
			m.k++
			t.Store64Then(ws, w.suTailOff(c, j), 0, m, 0)
			return
		case cfFinish:
			// Finish flags: red_add_rel pack2(1, 0) into every rail
			// peer's tail word of this channel, then wait for every
			// peer's.
			m.pc = cfFinWait
			m.k = 0
			t.ParallelThen(S, m.finish, m, 0)
			return
		case cfFinWait:
			if m.k == S {
				m.pc = cfEnd
				continue
			}
			m.word = w.tailOff(c, m.k)
			m.pc = cfFinSeen
			t.WaitWordThen(ws, m.word, "v2 hybrid combine finish", hFinished, m, 0)
			return
		case cfFinSeen:
			if m.k != me {
				w.seenTail(r, c, m.k)
			}
			m.k++
			m.pc = cfFinWait
			t.Store64Then(ws, m.word, 0, m, 0)
			return
		case cfEnd:
			w.combineEnd(t, r)
			return
		}
	}
}

// aggregate is the options of a put with AggregateRequests.
var aggregate = []gin.OptFlags{gin.OptAggregateRequests}
