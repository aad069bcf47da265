package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// Handler is a state machine that receives events. arg is the value given to
// Schedule; state machines use it to tell events apart without allocating
// (an index, an opcode, a packed pair).
type Handler interface {
	Handle(s *Sim, arg uint64)
}

// HandlerFunc adapts a function to Handler. Converting a func to a Handler
// does not allocate, but a closure that captures variables does when it is
// created: keep closures off hot paths.
type HandlerFunc func(s *Sim, arg uint64)

// Handle calls f(s, arg).
func (f HandlerFunc) Handle(s *Sim, arg uint64) { f(s, arg) }

// EventID names a scheduled event so that it can be cancelled.
type EventID uint64

// Errors returned by the kernel.
var (
	// ErrNotPending is returned by Cancel for an event that has already
	// fired or been cancelled.
	ErrNotPending = errors.New("sim: event not pending (already fired or cancelled)")
)

// Config configures a Sim. The zero value is valid: seed 0, no budget, a
// stall limit of DefaultStallLimit.
type Config struct {
	// Seed is the root of every random stream in the run.
	Seed uint64
	// EventBudget stops the run with a *WatchdogError after this many
	// events; 0 means no limit.
	EventBudget uint64
	// StallLimit stops the run with a *WatchdogError when this many events
	// in a row fire without simulated time advancing (a livelock: for
	// example a poller rescheduling itself at the same instant). 0 means
	// DefaultStallLimit; negative disables the check.
	StallLimit int64
}

// DefaultStallLimit is the number of consecutive same-time events after
// which the watchdog reports a stall.
const DefaultStallLimit = 50_000_000

// historyLen is how many recent events the watchdog remembers for its report.
const historyLen = 16

// Record describes one fired event, for tracers and watchdog reports.
type Record struct {
	At      Time
	Seq     uint64
	Handler Handler
	Arg     uint64
}

// Who names the receiver of the event: the handler's EventName if it
// implements Namer, else its Go type.
func (r Record) Who() string {
	if n, ok := r.Handler.(Namer); ok {
		return n.EventName(r.Arg)
	}
	return fmt.Sprintf("%T", r.Handler)
}

// String formats the record as "t=… seq=… who arg=…".
func (r Record) String() string {
	return fmt.Sprintf("t=%v seq=%d %s arg=%#x", r.At, r.Seq, r.Who(), r.Arg)
}

// Namer is implemented by handlers that can name an event for traces.
type Namer interface {
	EventName(arg uint64) string
}

// Tracer is called for every event just before its handler runs.
type Tracer func(Record)

// Sim is one simulation: a clock, a queue of pending events, a seed and the
// processes running on it. It is not safe for concurrent use.
type Sim struct {
	now     Time
	seq     uint64
	q       queue
	cfg     Config
	fired   uint64
	stalled int64 // consecutive events at the same time
	tracer  Tracer
	hist    [historyLen]Record
	failErr error
	stopped bool

	procs   []*Proc
	running *Proc

	ties *ties // nil unless SetTies perturbs same-instant order

	// Set when s is a partition of a World.
	w       *World
	part    int
	out     [2][][]letter // by window parity, then destination partition
	dsts    []int32       // destinations whose box of this window's parity is not empty, in first-send order
	srcs    []int32       // senders with a box for this partition, in partition order (set between windows)
	sentMin Time          // earliest event sent across partitions this window
	next    Time          // earliest pending event, as of the end of the last window
	stopReq bool          // Stop was called: the World stops after the window
	sent    uint64        // events sent across partitions so far (the send order)
	in      inbox         // events received from other partitions, not yet fired
}

// New returns a simulation at time 0.
func New(cfg Config) *Sim {
	if cfg.StallLimit == 0 {
		cfg.StallLimit = DefaultStallLimit
	}
	return &Sim{cfg: cfg}
}

// Now returns the current simulated time.
func (s *Sim) Now() Time { return s.now }

// Seed returns the run's root seed.
func (s *Sim) Seed() uint64 { return s.cfg.Seed }

// Fired returns the number of events dispatched so far.
func (s *Sim) Fired() uint64 { return s.fired }

// Pending returns the number of scheduled, not cancelled events (on a
// partition of a World, with those received from other partitions).
func (s *Sim) Pending() int { return s.q.live + len(s.in) }

// SetTracer installs a tracer (nil removes it). Tracing costs one indirect
// call per event while set and nothing otherwise.
func (s *Sim) SetTracer(t Tracer) { s.tracer = t }

// Schedule arranges for h.Handle(s, arg) to run at time at. Events at the
// same time run in the order they were scheduled (unless SetTies perturbs
// that order). Scheduling in the past
// panics: it is always a bug in a model.
func (s *Sim) Schedule(at Time, h Handler, arg uint64) EventID {
	// The common case, a free slot and room at the tail of a coarse
	// bucket, calls nothing, so that nothing is spilled around calls.
	q := &s.q
	t, n := uint64(at), len(q.free)
	if at < s.now || h == nil || n == 0 || t-q.midEnd >= q.calEnd-q.midEnd {
		return s.scheduleSlow(at, h, arg)
	}
	bk := &q.coarse.buckets[(t-q.coarse.base)>>(q.coarse.shift&63)]
	pos := bk.n & (chunkLen - 1)
	if pos == 0 {
		return s.scheduleSlow(at, h, arg)
	}
	f := q.free[n-1]
	q.free = q.free[:n-1]
	slot, gen := uint32(f), uint32(f>>32)+1
	q.gens[slot] = gen
	q.pend[slot>>6] |= 1 << (slot & 63)
	s.seq++
	q.live++
	bk.n++
	e := &q.ev[int(bk.tail)<<chunkBits|int(pos)]
	e.at, e.seq, e.h, e.arg, e.slot, e.gen = at, s.seq, h, arg, slot, gen
	return EventID(uint64(gen)<<32 | uint64(slot))
}

// scheduleSlow is Schedule in every case.
//
//go:noinline
func (s *Sim) scheduleSlow(at Time, h Handler, arg uint64) EventID {
	if at < s.now || h == nil {
		s.badSchedule(at, h, arg)
	}
	q := &s.q
	var slot, gen uint32
	if n := len(q.free); n > 0 {
		f := q.free[n-1]
		q.free = q.free[:n-1]
		slot, gen = uint32(f), uint32(f>>32)+1
	} else {
		slot, gen = q.newSlot(), 1
	}
	q.gens[slot] = gen
	q.pend[slot>>6] |= 1 << (slot & 63)
	s.push(at, h, arg, slot, gen)
	return EventID(uint64(gen)<<32 | uint64(slot))
}

// Post is Schedule for an event that will never be cancelled: it returns
// no EventID and skips the cancellation bookkeeping (it shares the
// reserved slot 0 with process wake-ups), so firing it reads no per-event
// state. Ordering is Schedule's: events at the same time run in the order
// they were scheduled or posted.
func (s *Sim) Post(at Time, h Handler, arg uint64) {
	q := &s.q
	t := uint64(at)
	if at < s.now || h == nil || len(q.pend) == 0 || t-q.midEnd >= q.calEnd-q.midEnd {
		s.postSlow(at, h, arg)
		return
	}
	bk := &q.coarse.buckets[(t-q.coarse.base)>>(q.coarse.shift&63)]
	pos := bk.n & (chunkLen - 1)
	if pos == 0 {
		s.postSlow(at, h, arg)
		return
	}
	s.seq++
	q.live++
	bk.n++
	e := &q.ev[int(bk.tail)<<chunkBits|int(pos)]
	e.at, e.seq, e.h, e.arg, e.slot, e.gen = at, s.seq, h, arg, 0, 0
}

// postSlow is Post in every case.
//
//go:noinline
func (s *Sim) postSlow(at Time, h Handler, arg uint64) {
	if at < s.now || h == nil {
		s.badSchedule(at, h, arg)
	}
	if len(s.q.pend) == 0 {
		s.q.newSlot()
	}
	s.push(at, h, arg, 0, 0)
}

// wakeAt schedules process p to resume at t. Wake-ups are never cancelled,
// so they skip the slot bookkeeping: they all share the reserved slot 0,
// which stays pending.
func (s *Sim) wakeAt(t Time, p *Proc) { s.postSlow(t, p, 0) }

// push queues an event that holds slot, of generation gen, on whichever
// tier its time belongs to.
func (s *Sim) push(at Time, h Handler, arg uint64, slot, gen uint32) {
	q := &s.q
	s.seq++
	q.live++
	var e *entry
	if t := uint64(at); t-q.midEnd < q.calEnd-q.midEnd {
		e = q.toBucket(&q.coarse, t)
	} else if e = q.place(s.now, at); e == nil {
		q.pushNear(entry{at: at, seq: s.seq, h: h, arg: arg, slot: slot, gen: gen})
		return
	}
	e.at, e.seq, e.h, e.arg, e.slot, e.gen = at, s.seq, h, arg, slot, gen
}

func (s *Sim) badSchedule(at Time, h Handler, arg uint64) {
	if h == nil {
		panic("sim: schedule with nil handler")
	}
	panic(fmt.Sprintf("sim: schedule in the past: at=%v now=%v handler=%T arg=%#x", at, s.now, h, arg))
}

// After schedules h.Handle(s, arg) at Now()+d; d must not be negative.
func (s *Sim) After(d Duration, h Handler, arg uint64) EventID {
	return s.Schedule(s.now.Add(d), h, arg)
}

// At schedules f at time at. It is a convenience for set-up code and tests:
// the closure allocates, so hot paths use Schedule with a Handler.
func (s *Sim) At(at Time, f func()) EventID {
	return s.Schedule(at, funcHandler{f}, 0)
}

type funcHandler struct{ f func() }

func (f funcHandler) Handle(*Sim, uint64) { f.f() }

// Cancel removes a pending event. It returns ErrNotPending if the event has
// already fired or was cancelled before.
func (s *Sim) Cancel(id EventID) error {
	i, gen := uint32(id), uint32(id>>32)
	q := &s.q
	if i == 0 || int(i) >= len(q.gens) || q.gens[i] != gen || !q.pending(i) {
		return ErrNotPending
	}
	// Lazy cancellation: the entry stays queued and is dropped when it
	// reaches the front.
	q.pend[i>>6] &^= 1 << (i & 63)
	q.live--
	return nil
}

// Fail stops the run after the current event; Run returns err. Models use it
// for errors a user caused (a bad work request in a device program, a
// deadlock) rather than panicking. The first failure wins.
func (s *Sim) Fail(err error) {
	if s.failErr == nil {
		s.failErr = err
	}
	s.stopped = true
}

// Stop ends the run after the current event without an error. In a World
// it ends the World's run at the end of the current window instead.
func (s *Sim) Stop() {
	if s.w != nil {
		s.stopReq = true
		return
	}
	s.stopped = true
}

// Step fires the next event. It returns false if no event is pending.
func (s *Sim) Step() bool {
	if s.ties != nil {
		return s.stepTies(MaxTime)
	}
	e := s.q.front(s.now)
	if e == nil {
		return false
	}
	s.fire(e)
	return true
}

// fire removes e, the queue's front, and runs it.
func (s *Sim) fire(e *entry) {
	at, seq, h, arg := e.at, e.seq, e.h, e.arg
	s.q.release(e)
	if s.q.src == srcCur {
		s.q.ki++
	} else {
		s.q.removeSlow()
	}
	s.q.live--
	s.dispatch(at, seq, h, arg)
}

// dispatch advances the clock to at and runs h.Handle(s, arg).
func (s *Sim) dispatch(at Time, seq uint64, h Handler, arg uint64) {
	if at == s.now {
		s.stalled++
	} else {
		s.stalled = 0
	}
	s.now = at
	s.fired++
	r := &s.hist[s.fired%historyLen]
	r.At, r.Seq, r.Handler, r.Arg = at, seq, h, arg
	if s.tracer != nil {
		s.tracer(*r)
	}
	h.Handle(s, arg)
}

// Run fires events until none is pending (quiescence), the model calls Stop
// or Fail, or the watchdog trips. It returns the model's failure, a
// *WatchdogError, or nil.
func (s *Sim) Run() error { return s.RunUntil(MaxTime) }

// RunUntil is Run, but it also stops before the first event later than
// limit and then advances the clock to limit (unless limit is MaxTime).
func (s *Sim) RunUntil(limit Time) error {
	if s.w != nil {
		panic("sim: Run on a partition of a World: run the World")
	}
	s.stopped = false
	if s.ties != nil {
		return s.runTies(limit)
	}
	for !s.stopped {
		e := s.q.front(s.now)
		if e == nil || e.at > limit {
			if limit != MaxTime && limit > s.now {
				s.now = limit
			}
			break
		}
		s.fire(e)
		if s.cfg.EventBudget > 0 && s.fired >= s.cfg.EventBudget && !s.stopped {
			if s.q.front(s.now) != nil {
				return s.watchdog("event budget of %d events spent", s.cfg.EventBudget)
			}
		}
		if err := s.stuck(); err != nil {
			return err
		}
	}
	return s.failErr
}

// stuck returns the watchdog's error once StallLimit events in a row have
// fired at one instant, else nil.
func (s *Sim) stuck() error {
	if s.cfg.StallLimit > 0 && s.stalled >= s.cfg.StallLimit {
		return s.watchdog("time stopped advancing: %d events in a row at the same instant", s.stalled)
	}
	return nil
}

// WatchdogError reports a run stopped by the watchdog: the event budget was
// spent or time stopped advancing. It carries the last events for diagnosis.
type WatchdogError struct {
	Reason string
	At     Time
	Fired  uint64
	Last   []Record
}

func (e *WatchdogError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sim: watchdog: %s (t=%v, %d events fired); last events:", e.Reason, e.At, e.Fired)
	for _, r := range e.Last {
		b.WriteString("\n  ")
		b.WriteString(r.String())
	}
	return b.String()
}

func (s *Sim) watchdog(format string, args ...any) error {
	e := &WatchdogError{Reason: fmt.Sprintf(format, args...), At: s.now, Fired: s.fired}
	n := uint64(historyLen)
	if s.fired < n {
		n = s.fired
	}
	for i := s.fired - n + 1; i <= s.fired; i++ {
		e.Last = append(e.Last, s.hist[i%historyLen])
	}
	return e
}

// Rand returns a random stream for the named component, derived from the
// run's seed and the name alone: the same (seed, name) always yields the
// same stream, whatever else the model creates, and different names yield
// independent streams. Give every component a unique, stable name
// (e.g. "fabric/link/leaf3-spine1/loss").
func (s *Sim) Rand(component string) *rand.Rand {
	return NewRand(s.cfg.Seed, component)
}

// NewRand is Rand without a Sim, for code that derives streams from a seed
// before a simulation exists (trace generators, seed sweeps).
func NewRand(seed uint64, component string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(component))
	return rand.New(rand.NewPCG(seed, h.Sum64()^0x9e3779b97f4a7c15))
}
