package gin

import (
	"fmt"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Per-signal and per-counter bookkeeping for the two rules NCCL states but
// does not check:
//
//   - SignalInc may not be mixed with SignalAdd on one signal between
//     resets: the front end remembers, per (target rank, context, signal),
//     which operator updated it since the last reset (by simulated issue
//     time) and reports the first call using the other one.
//   - A reset may not race with updates. An update is issued when the
//     front end passes it to the backend and lands when the signal (or
//     counter) word grows by it; while a word has updates in flight the
//     front end watches it and sums what landed (sums, not counts, so a
//     proxy that stores a counter once for several completions is fine). A reset races when (a) updates
//     issued before it have not all landed (they would land after the reset
//     and count against the new epoch), or (b) an update lands after the
//     reset was issued but before the reset's own store of 0 landed (it
//     would be overwritten). Resets by offset (proxy v2) change no word, so
//     only (a) applies to them.
type trackKey struct {
	rank, ctx, id int32
	counter       bool
}

type tracker struct {
	dc       *DevComm
	key      trackKey
	r        *mem.Region
	off      uint64
	mode     uint8 // 0 none, 1 inc, 2 add (since the last reset)
	watch    bool
	pending  bool   // a reset store issued, not landed
	hasReset bool   // (reset, below)
	issued   uint64 // sum of the addends issued (mod 2^64)
	landed   uint64 // sum of the increases seen
	last     uint64
	resetAt  sim.Time
	// reset is when the last reset was issued (remote notes on a World).
	reset sim.Time
}

func (dc *DevComm) tracker(counter bool, rank, ctx, id int) *tracker {
	k := trackKey{int32(rank), int32(ctx), int32(id), counter}
	track := dc.part(rank).track
	tr := track[k]
	if tr == nil {
		tr = &tracker{dc: dc, key: k}
		if counter {
			tr.r, tr.off = dc.backend.CounterWord(dc, rank, ctx, id)
		} else {
			tr.r, tr.off = dc.backend.SignalWord(dc, rank, ctx, id)
		}
		track[k] = tr
	}
	return tr
}

func (tr *tracker) what() string {
	if tr.key.counter {
		return fmt.Sprintf("counter %d of rank %d ctx %d", tr.key.id, tr.key.rank, tr.key.ctx)
	}
	return fmt.Sprintf("signal %d of rank %d ctx %d", tr.key.id, tr.key.rank, tr.key.ctx)
}

func (tr *tracker) startWatch() {
	if !tr.watch {
		tr.watch = true
		tr.last = tr.r.Load64(tr.off)
		tr.r.Watch(tr.off, tr)
	}
}

func (tr *tracker) stopWatch() {
	if tr.watch && !tr.pending && tr.landed == tr.issued {
		tr.watch = false
		tr.r.Unwatch(tr.off, tr)
	}
}

// noteUpdate records an update of (rank, ctx, id) issued now by g. On a
// sim.World an update of a word in another partition is told to the
// word's partition a lookahead later (remoteNote).
func (dc *DevComm) noteUpdate(g *Gin, op string, counter bool, rank, id int, inc bool, add uint64) bool {
	if dc.c.parts > 1 && dc.c.ranks[rank].Part() != dc.c.ranks[g.rank].Part() {
		dc.sendNote(g, op, trackKey{int32(rank), int32(g.ctx), int32(id), counter}, inc, add)
		return true
	}
	tr := dc.tracker(counter, rank, g.ctx, id)
	if !counter {
		m := uint8(2)
		if inc {
			m = 1
		}
		if tr.mode != 0 && tr.mode != m {
			prev, now := "SignalInc", "SignalAdd"
			if m == 1 {
				prev, now = now, prev
			}
			g.failf(op, ErrMixedSignalOps, "%s on %s, which had %s since its last reset", now, tr.what(), prev)
			return false
		}
		tr.mode = m
	}
	if add == 0 {
		return true // changes nothing, cannot be seen landing
	}
	tr.startWatch()
	tr.issued += add
	return true
}

// WordChanged implements mem.Watcher: an update or the reset store landed.
func (tr *tracker) WordChanged(r *mem.Region, off uint64) {
	v := r.Load64(off)
	if tr.pending && v == 0 {
		tr.pending = false
		tr.last = 0
		tr.stopWatch()
		return
	}
	if v == tr.last {
		return
	}
	tr.landed += v - tr.last
	tr.last = v
	if tr.pending {
		s := r.Sim()
		s.Fail(&Error{At: s.Now(), Rank: int(tr.key.rank), Ctx: int(tr.key.ctx), Op: "update", Kind: ErrResetRace,
			Detail: fmt.Sprintf("an update of %s landed at t=%v, after the reset issued at t=%v and before the reset's store landed", tr.what(), s.Now(), tr.resetAt)})
		return
	}
	tr.stopWatch()
}

// beginReset checks a reset of (g.rank, g.ctx, id) against updates in flight.
func (dc *DevComm) beginReset(g *Gin, op string, counter bool, id int) *tracker {
	k := trackKey{int32(g.rank), int32(g.ctx), int32(id), counter}
	tr := dc.part(g.rank).track[k]
	if tr == nil && dc.c.parts > 1 {
		// A note of an update issued before the reset may still come.
		tr = dc.tracker(counter, g.rank, g.ctx, id)
	}
	if tr == nil {
		return nil
	}
	tr.reset, tr.hasReset = g.t.Now(), true
	if tr.issued != tr.landed {
		g.failf(op, ErrResetRace, "reset of %s while updates adding %d, issued before it, had not landed", tr.what(), tr.issued-tr.landed)
		return nil
	}
	tr.mode = 0
	return tr
}

// remoteNote is an update of a signal or counter word issued from
// another partition of a sim.World: the issuer's partition Sends it to
// the word's, a lookahead after the issue, which is before the update can
// land (its packets take at least a cable and a switch more). There the
// rules are checked as noteUpdate checks them at the issue on a lone Sim,
// with two differences: an update issued from another partition counts
// against a reset only from the note's arrival, and one issued before a
// reset whose note arrives after it fails the run then (the same
// verdict, found up to a lookahead later).
type remoteNote struct {
	dc     *DevComm
	op     string
	key    trackKey
	issuer int
	inc    bool
	add    uint64
	at     sim.Time // the issue
}

// sendNote tells the partition of k's word about an update g issues now.
func (dc *DevComm) sendNote(g *Gin, op string, k trackKey, inc bool, add uint64) {
	s := g.t.GPU().Sim()
	n := &remoteNote{dc: dc, op: op, key: k, issuer: g.rank, inc: inc, add: add, at: g.t.Now()}
	s.Send(dc.c.ranks[k.rank].Sim(), max(n.at, s.Now()).Add(s.World().Lookahead()), n, 0)
}

// Handle implements sim.Handler: the note reaches the word's partition.
func (n *remoteNote) Handle(s *sim.Sim, _ uint64) {
	tr := n.dc.tracker(n.key.counter, int(n.key.rank), int(n.key.ctx), int(n.key.id))
	fail := func(kind error, detail string) {
		s.Fail(&Error{At: s.Now(), Rank: n.issuer, Ctx: int(n.key.ctx), Op: n.op, Kind: kind,
			Detail: fmt.Sprintf("%s (the update was issued by rank %d at t=%v)", detail, n.issuer, n.at)})
	}
	if tr.hasReset && tr.reset > n.at {
		if n.add != 0 {
			fail(ErrResetRace, fmt.Sprintf("reset of %s at t=%v while updates adding %d, issued before it, had not landed",
				tr.what(), tr.reset, n.add))
		}
		return
	}
	if !n.key.counter {
		m := uint8(2)
		if n.inc {
			m = 1
		}
		if tr.mode != 0 && tr.mode != m {
			prev, now := "SignalInc", "SignalAdd"
			if m == 1 {
				prev, now = now, prev
			}
			fail(ErrMixedSignalOps, fmt.Sprintf("%s on %s, which had %s since its last reset", now, tr.what(), prev))
			return
		}
		tr.mode = m
	}
	if n.add == 0 {
		return
	}
	tr.startWatch()
	tr.issued += n.add
}

// endReset arms the landing check of the reset's store, if it has one.
func (dc *DevComm) endReset(tr *tracker, r *mem.Region, off, offset uint64) {
	if tr == nil {
		return
	}
	raw := r.Load64(off)
	if raw == 0 || (offset != 0 && offset == raw) {
		return // nothing to land (already 0, or reset by offset)
	}
	tr.startWatch()
	tr.pending = true
	tr.resetAt = r.Sim().Now()
}

// waitDesc is what a coop waits for, for deadlock reports.
type waitDesc struct {
	rank, ctx int
	what      string
	id        int
	least     uint64
	bits      int
	offset    uint64
	r         *mem.Region
	off       uint64
	active    bool
}

func (dc *DevComm) wait(g *Gin, what string, id int, least uint64, bits int, offset uint64, r *mem.Region, off uint64) *waitDesc {
	waits := dc.part(g.rank).waits
	d := waits[g.t]
	if d == nil {
		d = &waitDesc{}
		waits[g.t] = d
	}
	*d = waitDesc{rank: g.rank, ctx: g.ctx, what: what, id: id, least: least, bits: bits, offset: offset, r: r, off: off, active: true}
	return d
}

// endWait ends g's wait d: it is no longer reported, nor kept (a group
// that waited once, as a receiving warp does, would stay in memory).
func (dc *DevComm) endWait(g *Gin, d *waitDesc) {
	d.active = false
	delete(dc.part(g.rank).waits, g.t)
}

func (d *waitDesc) String(coop string) string {
	v := (d.r.Load64(d.off) - d.offset) & mask(d.bits)
	return fmt.Sprintf("rank %d ctx %d coop %q waits %s %d >= %d (value %d)", d.rank, d.ctx, coop, d.what, d.id, d.least&mask(d.bits), v)
}

// peers returns the connected peers of rank (cached).
func (dc *DevComm) peers(rank int) []int {
	if dc.peerCache[rank] == nil {
		dc.peerCache[rank] = dc.Peers(rank)
	}
	return dc.peerCache[rank]
}

// CheckDeadlock reports, once the run is quiescent (no event pending), every
// coop of the communicator's GPUs still waiting: on a GIN signal or counter
// (with the value it waits for and the value it sees), on another word, or
// parked for another reason (credits, a barrier). It returns nil when the
// run is not quiescent or nobody waits.
func (c *Comm) CheckDeadlock() error {
	pending, now := c.s.Pending(), c.s.Now()
	if w := c.s.World(); w != nil {
		pending, now = w.Pending(), w.Now()
	}
	if pending != 0 {
		return nil
	}
	out := c.Waiters()
	if len(out) == 0 {
		return nil
	}
	return &DeadlockError{At: now, Waits: out}
}

// Waiters describes every coop of the communicator's GPUs that is waiting
// now, in rank and launch order, whether or not events are pending (for a
// run that never goes quiescent, e.g. a busy-polling proxy thread: stop it
// with RunUntil and ask).
func (c *Comm) Waiters() []string {
	var out []string
	seen := make(map[*gpu.GPU]bool)
	for i, r := range c.ranks {
		if seen[r.GPU] {
			continue
		}
		seen[r.GPU] = true
		for _, t := range r.GPU.Groups() {
			if t.Done() {
				continue
			}
			if s := c.describe(i, t); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func (c *Comm) describe(rank int, t *gpu.Group) string {
	for _, dc := range c.devs {
		if d := dc.part(rank).waits[t]; d != nil && d.active {
			return d.String(t.Name())
		}
	}
	if w, ok := t.Waiting(); ok {
		return fmt.Sprintf("rank %d coop %q waits %s at %s+%d (value %d)", rank, t.Name(), w.Reason, w.Region.Name(), w.Off, w.Region.Load64(w.Off))
	}
	if parked, why := t.Proc().Parked(); parked {
		if why == "coop threads" {
			return "" // its threads are listed
		}
		return fmt.Sprintf("rank %d coop %q parked: %s", rank, t.Name(), why)
	}
	return ""
}

// CheckDeadlock runs Comm.CheckDeadlock on every communicator and returns
// the first report.
func CheckDeadlock(comms ...*Comm) error {
	for _, c := range comms {
		if err := c.CheckDeadlock(); err != nil {
			return err
		}
	}
	return nil
}
