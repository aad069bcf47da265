package sim

import (
	"math/bits"
	"slices"
)

// entry is one pending event. The handler and its argument travel inline so
// that firing an event reads nothing but the entry itself (and one bit of
// the queue's pend); slot and gen name the EventID Schedule returned.
type entry struct {
	at   Time
	seq  uint64
	h    Handler
	arg  uint64
	slot uint32
	gen  uint32 // the slot's generation when the event was scheduled
}

// perBucket is the mean number of events a bucket of the fine rung holds
// when a coarse bucket is spread into it. A bucket is sorted once when it
// becomes current, so its cost per event grows with its size, while the
// cost of moving to the next bucket is shared by perBucket events.
const perBucket = 16

// perCoarse is the number of events a coarse bucket at the front of a
// rebuilt calendar holds on average. Coarse buckets are few, so that the
// tails inserts write to stay in cache: 100 000 pending events spread over
// 12 mean delays make about 1 200 coarse buckets, of which the first few
// hundred take nearly every insert.
const perCoarse = 1024

// coarseMin is the fewest events a calendar is rebuilt from for its
// buckets to be coarse: below it the buckets are sized for perBucket
// events and rarely spread, since the tails of a small queue stay in cache
// and the spread's copy is the larger cost there.
const coarseMin = 16384

// spreadMin is the fewest events a coarse bucket must hold to be spread
// into the fine rung rather than sorted at once.
const spreadMin = 2 * perBucket

const insertionMax = 48

// minBuckets is the fewest buckets a rebuilt calendar may have.
const minBuckets = 64

// chunkLen is the number of events in one chunk of bucket storage. A
// coarse bucket's events are written long before it is spread, so the
// spread reads them from memory: chunks of 32 events (1.5 KiB) are long
// enough runs for the hardware prefetcher, where chunks of 8 made the
// hold benchmark a fifth slower.
const (
	chunkBits = 5
	chunkLen  = 1 << chunkBits
)

// bucket is a list of chunks (blocks of chunkLen entries of the queue's
// event storage, all full but the last) holding n events in scheduling order; head and
// tail are -1 when the bucket is empty.
type bucket struct {
	head, tail int32
	n          int32
	_          int32
}

// rung is a calendar: nb buckets of 1<<shift ps from base, of which those
// after cur are still to be made current (or spread).
type rung struct {
	buckets []bucket // reused across rebuilds
	nb      int      // buckets in use
	cur     int      // bucket last made current
	base    uint64   // start of bucket 0
	shift   uint     // bucket width is 1<<shift ps
}

// start returns the start of bucket b.
func (r *rung) start(b int) uint64 { return r.base + uint64(b)<<r.shift }

// use sets r up as nb empty buckets of 1<<shift ps from base.
func (r *rung) use(nb int, base uint64, shift uint) {
	for len(r.buckets) < nb {
		r.buckets = append(r.buckets, bucket{head: -1, tail: -1})
	}
	r.nb, r.cur, r.base, r.shift = nb, -1, base, shift
}

// Sources of the front event, see queue.front.
const (
	srcCur = iota
	srcNear
	srcNow
)

// queue holds pending events in six tiers, after the ladder queue of Tang,
// Goh and Thng:
//
//   - cur: the current bucket, sorted once when it became current (keys
//     holds the sort order, the events stay in their chunks);
//   - near: a 4-ary min-heap ordered by (at, seq) of the events scheduled
//     after cur was sorted into cur's span, before nearEnd;
//   - now: a FIFO of events scheduled for the current instant;
//   - fine: a calendar of equal-width time buckets, unsorted, covering
//     [nearEnd, midEnd): the current coarse bucket, spread;
//   - coarse: a calendar of wider buckets covering [midEnd, calEnd);
//   - far: an unsorted overflow of events at or after the calendar's end.
//
// Two rungs keep inserts in cache: nearly every event goes to one of the
// few hundred coarse buckets of the next mean delays, whose tails stay in
// cache, and is copied once more, in a sequential pass, when its coarse
// bucket is spread into fine buckets small enough to sort cheaply. With a
// single calendar of 32-event buckets (tens of thousands of tails), the
// hold model at 100 000 pending had 1.4 load misses of a 1 MiB cache per
// event, at random places: the bucket's header, the slot's state, the
// bucket's events when sorted. With two rungs it has 0.9, nearly all in
// the spread's sequential pass, which the prefetcher covers (cachegrind),
// and takes 28 % less CPU per event (a third less at 300 000 and 1 M
// pending; ginsim bench kernel).
//
// An event is only ever fired from cur, near or now, and these hold every
// event earlier than nearEnd, so the firing order is exactly (at, seq):
// events reach a bucket in scheduling order, so sorting a bucket by (time,
// position) is sorting it by (time, seq); every event in near was
// scheduled after every event in cur; every event in now was scheduled at
// the current instant, after every other pending event for that instant.
// Spreading a bucket keeps the scheduling order of its events in each fine
// bucket, and inserts after it go to the tails.
// Inserts are O(1) except into near, which is usually empty. When cur and
// near run dry the next non-empty fine bucket becomes cur; when the fine
// rung runs dry the next non-empty coarse bucket is spread into it, or
// becomes cur if it is small; when the coarse buckets run dry the overflow
// is spread into a new calendar (see rebuild). Buckets
// store events in chunks from a pool, so the steady state allocates nothing.
//
// Cancellation is lazy. Every event scheduled with Schedule holds a slot:
// a bit of pend, set while the event is still to fire, and a generation in
// gens that counts the slot's uses, so that a stale EventID is recognised.
// The entry carries its generation, and the free list the last generation
// of each free slot, so gens is written by Schedule and read by Cancel
// alone: firing touches one bit of pend (1 bit per slot stays in cache)
// instead of loading a 4-byte state per slot, which missed the cache on
// most events at 100 000 pending. A cancelled entry stays in its tier and
// its slot is freed when it reaches the front. Slot 0 is shared by process
// wake-ups and posted events, which have no EventID: its bit stays set.
type queue struct {
	// cur: keys[ki:] are the current bucket's events still to fire, each
	// key holding the event's position in the bucket in its low bits
	// (idxMask); chain lists the bucket's chunks in order.
	keys    []uint64
	ki      int
	idxMask uint64
	chain   []int32

	near    []entry
	nearEnd uint64 // cur, near and now hold every event with at < nearEnd

	nowBuf  []entry // ring, len a power of two
	nowHead int
	nowN    int

	src int // tier of the entry last returned by front

	fine   rung
	midEnd uint64 // fine covers [nearEnd, midEnd)
	coarse rung
	calEnd uint64 // coarse covers [midEnd, calEnd); far holds the rest

	ev     []entry // storage of the buckets' events: chunk c is ev[c*chunkLen:][:chunkLen]
	next   []int32 // next[c] is the chunk after c in its bucket, -1 at the tail
	freeCh []int32 // unused chunks

	sink Time // spread's touches of the next chunk go here

	far     []entry
	dist    []uint64 // rebuild's scratch: the overflow's distances
	farMin  Time
	farMax  Time
	scratch []entry

	pend []uint64 // bit per slot: its event is pending
	gens []uint32 // per slot: the generation of its last event
	free []uint64 // free slots, each slot | last generation<<32
	live int      // scheduled and not cancelled
}

// newSlot adds a slot to the side table.
//
//go:noinline
func (q *queue) newSlot() uint32 {
	if len(q.gens) == 0 {
		q.gens = append(q.gens, 0)
		q.pend = append(q.pend, 1) // slot 0: wake-ups and posts, never cancelled
	}
	q.gens = append(q.gens, 0)
	i := uint32(len(q.gens) - 1)
	if int(i>>6) == len(q.pend) {
		q.pend = append(q.pend, 0)
	}
	return i
}

// pending reports whether the event of slot i is still to fire.
func (q *queue) pending(i uint32) bool { return q.pend[i>>6]&(1<<(i&63)) != 0 }

// release frees the slot of e, which fired or was dropped after its
// cancellation. Slot 0 stays pending.
func (q *queue) release(e *entry) {
	if e.slot != 0 {
		q.pend[e.slot>>6] &^= 1 << (e.slot & 63)
		q.free = append(q.free, uint64(e.gen)<<32|uint64(e.slot))
	}
}

// place returns where to store a new event at time at, or nil if the event
// belongs in near, for the caller to push there. It is the slow path of
// Sim.Schedule, which handles the coarse buckets, [midEnd, calEnd), itself.
func (q *queue) place(now, at Time) *entry {
	t := uint64(at)
	switch {
	case t >= q.calEnd:
		return q.toFar(at)
	case t >= q.nearEnd:
		return q.toBucket(&q.fine, t)
	case at == now:
		return q.toNow()
	}
	return nil
}

// toNow returns a free entry at the tail of the now FIFO.
func (q *queue) toNow() *entry {
	if q.nowN == len(q.nowBuf) {
		q.growNow()
	}
	e := &q.nowBuf[(q.nowHead+q.nowN)&(len(q.nowBuf)-1)]
	q.nowN++
	return e
}

func (q *queue) growNow() {
	n := max(2*len(q.nowBuf), 16)
	buf := make([]entry, n)
	for i := range q.nowN {
		buf[i] = q.nowBuf[(q.nowHead+i)&(len(q.nowBuf)-1)]
	}
	q.nowBuf, q.nowHead = buf, 0
}

// toBucket returns a free entry at the tail of the bucket of r that covers
// time t, which must be in r's span.
func (q *queue) toBucket(r *rung, t uint64) *entry {
	bk := &r.buckets[(t-r.base)>>r.shift]
	pos := bk.n & (chunkLen - 1)
	if pos == 0 {
		q.newChunk(bk)
	}
	bk.n++
	return &q.ev[int(bk.tail)<<chunkBits|int(pos)]
}

// newChunk appends an empty chunk to bk.
//
//go:noinline
func (q *queue) newChunk(bk *bucket) {
	var c int32
	if n := len(q.freeCh); n > 0 {
		c = q.freeCh[n-1]
		q.freeCh = q.freeCh[:n-1]
	} else {
		c = int32(len(q.next))
		q.ev = append(q.ev, make([]entry, chunkLen)...)
		q.next = append(q.next, -1)
	}
	q.next[c] = -1
	if bk.tail >= 0 {
		q.next[bk.tail] = c
	} else {
		bk.head = c
	}
	bk.tail = c
}

// toFar returns a free entry at the tail of the overflow, for an event at
// time at.
func (q *queue) toFar(at Time) *entry {
	if len(q.far) == 0 || at < q.farMin {
		q.farMin = at
	}
	if len(q.far) == 0 || at > q.farMax {
		q.farMax = at
	}
	q.far = append(q.far, entry{})
	return &q.far[len(q.far)-1]
}

// front returns the earliest pending entry and records its tier in q.src,
// or returns nil if no event is pending. Cancelled entries met on the way
// are dropped. now is the current time: no pending event is earlier.
func (q *queue) front(now Time) *entry {
	if q.ki < len(q.keys) && len(q.near) == 0 && q.nowN == 0 {
		k := q.keys[q.ki] & q.idxMask
		e := &q.ev[int(q.chain[k>>chunkBits])<<chunkBits|int(k&(chunkLen-1))]
		if q.pending(e.slot) {
			q.src = srcCur
			return e
		}
	}
	return q.frontSlow(now)
}

// frontSlow is front when the front may be in near or now, or cancelled.
func (q *queue) frontSlow(now Time) *entry {
	for {
		var e *entry
		src := srcCur
		if q.ki < len(q.keys) {
			k := q.keys[q.ki] & q.idxMask
			e = &q.ev[int(q.chain[k>>chunkBits])<<chunkBits|int(k&(chunkLen-1))]
			if len(q.near) > 0 && q.near[0].at < e.at {
				e, src = &q.near[0], srcNear
			}
		} else if len(q.near) > 0 {
			e, src = &q.near[0], srcNear
		}
		if q.nowN > 0 && (e == nil || e.at != now) {
			e, src = &q.nowBuf[q.nowHead], srcNow
		}
		if e == nil {
			if !q.refill(now) {
				return nil
			}
			continue
		}
		if q.pending(e.slot) {
			q.src = src
			return e
		}
		// Cancelled: free the slot and drop the entry.
		q.free = append(q.free, uint64(e.gen)<<32|uint64(e.slot))
		q.src = src
		q.remove()
	}
}

// remove drops the entry last returned by front.
func (q *queue) remove() {
	if q.src == srcCur {
		q.ki++
		return
	}
	q.removeSlow()
}

// removeSlow is remove for an entry of near or now.
func (q *queue) removeSlow() {
	switch q.src {
	case srcNear:
		q.popNear()
	default:
		q.nowBuf[q.nowHead] = entry{}
		q.nowHead = (q.nowHead + 1) & (len(q.nowBuf) - 1)
		q.nowN--
	}
}

// refill makes the next non-empty fine bucket current, spreading the next
// non-empty coarse bucket into the fine rung when it runs dry, and
// rebuilding the calendar from the overflow when the coarse buckets run
// dry. cur and near must be empty. It returns false if every tier is
// empty.
func (q *queue) refill(now Time) bool {
	q.releaseCur()
	for {
		f := &q.fine
		for f.cur+1 < f.nb {
			f.cur++
			q.nearEnd = f.start(f.cur + 1)
			if bk := &f.buckets[f.cur]; bk.n > 0 {
				q.load(bk, f.start(f.cur))
				return true
			}
		}
		f.nb, f.cur = 0, 0
		q.nearEnd = q.midEnd
		if q.nextCoarse() {
			return true
		}
		if q.coarse.nb > 0 {
			continue // spread into the fine rung
		}
		if len(q.far) == 0 {
			return false
		}
		q.rebuild(now)
	}
}

// nextCoarse moves to the next non-empty coarse bucket and either makes it
// cur (it returns true) or spreads it into the fine rung. It leaves
// coarse.nb at 0 when the coarse buckets ran dry.
func (q *queue) nextCoarse() bool {
	c := &q.coarse
	for c.cur+1 < c.nb {
		c.cur++
		start := c.start(c.cur)
		q.midEnd = c.start(c.cur + 1)
		if c.cur+1 == c.nb {
			q.midEnd = q.calEnd // the sum may have wrapped
		}
		q.nearEnd = q.midEnd
		bk := &c.buckets[c.cur]
		switch {
		case bk.n == 0:
			continue
		case bk.n < spreadMin || c.shift == 0 || q.midEnd-start != 1<<c.shift:
			q.load(bk, start)
			return true
		}
		q.spread(bk, start, c.shift)
		return false
	}
	c.nb, c.cur = 0, 0
	return false
}

// spread moves the events of coarse bucket bk, which covers [start,
// start+1<<shift), into a fresh fine rung of about perBucket events a
// bucket over the same span, keeping their order.
func (q *queue) spread(bk *bucket, start uint64, shift uint) {
	k := min(uint(bits.Len(uint(bk.n-1)/perBucket)), shift)
	f := &q.fine
	f.use(1<<k, start, shift-k)
	q.nearEnd = start
	fb, fs := f.buckets[:f.nb], f.shift
	n := int(bk.n)
	c := bk.head
	for i := 0; i < n; i += chunkLen {
		// toBucket, inlined. A chunk goes back to the pool once copied,
		// so the fine buckets take over the lines just read.
		src := int(c) << chunkBits
		next := q.next[c]
		if next >= 0 {
			// Touch the next chunk, written long ago, so that its lines
			// are on their way while this one is copied.
			var sum Time
			for _, e := range q.ev[int(next)<<chunkBits:][:chunkLen] {
				sum += e.at
			}
			q.sink += sum
		}
		for j := range min(chunkLen, n-i) {
			e := q.ev[src+j] // a copy: newChunk may grow ev
			d := &fb[(uint64(e.at)-start)>>fs]
			pos := d.n & (chunkLen - 1)
			if pos == 0 {
				q.newChunk(d)
			}
			d.n++
			q.ev[int(d.tail)<<chunkBits|int(pos)] = e
		}
		q.freeCh = append(q.freeCh, c)
		c = next
	}
	bk.head, bk.tail, bk.n = -1, -1, 0
}

// releaseCur returns the exhausted current bucket's chunks to the pool.
func (q *queue) releaseCur() {
	// The chunks keep their stale handler references until reused: the
	// pool is bounded by the peak of pending events, and clearing them
	// costs more than the rest of the bucket's bookkeeping.
	q.freeCh = append(q.freeCh, q.chain...)
	q.chain = q.chain[:0]
	q.keys, q.ki = q.keys[:0], 0
}

// load makes bk, which starts at start, cur: it sorts its events by
// (time, position).
func (q *queue) load(bk *bucket, start uint64) {
	n := int(bk.n)
	for c := bk.head; c >= 0; c = q.next[c] {
		q.chain = append(q.chain, c)
	}
	bk.head, bk.tail, bk.n = -1, -1, 0
	ib := uint(bits.Len(uint(n)))
	keys := slices.Grow(q.keys[:0], n)[:n]
	if span := q.nearEnd - start; span>>(64-ib) == 0 {
		// The offset in the bucket is below span: pack it above the
		// position and sort plain integers.
		q.idxMask = 1<<ib - 1
		k := 0
		for _, c := range q.chain {
			ch := q.ev[int(c)<<chunkBits:][:chunkLen]
			for i := range min(chunkLen, n-k) {
				keys[k] = (uint64(ch[i].at)-start)<<ib | uint64(k)
				k++
			}
		}
		if n <= insertionMax {
			insertionSort(keys)
		} else {
			slices.Sort(keys)
		}
	} else {
		// A very wide bucket: compare times in full.
		q.idxMask = ^uint64(0)
		for k := range keys {
			keys[k] = uint64(k)
		}
		at := func(k uint64) Time { return q.ev[int(q.chain[k>>chunkBits])<<chunkBits|int(k&(chunkLen-1))].at }
		slices.SortFunc(keys, func(a, b uint64) int {
			ta, tb := at(a), at(b)
			switch {
			case ta < tb || (ta == tb && a < b):
				return -1
			case ta == tb && a == b:
				return 0
			}
			return 1
		})
	}
	q.keys, q.ki = keys, 0
}

// insertionSort sorts a short slice of keys.
func insertionSort(k []uint64) {
	for i := 1; i < len(k); i++ {
		v := k[i]
		j := i
		for ; j > 0 && k[j-1] > v; j-- {
			k[j] = k[j-1]
		}
		k[j] = v
	}
}

// rebuild spreads the overflow into a fresh calendar.
//
// The coarse bucket width is a power of two chosen from the distance to
// the current time of the overflow's frontEvents-th nearest event, so that
// the front of the calendar, where the events that will fire next are,
// holds about perCoarse events per bucket. (The mean distance of all of them,
// used before, is dominated by far-future timers in network models: a
// retransmission timer milliseconds out made buckets microseconds wide,
// and then nearly every event a model scheduled fell into the current
// bucket's span and went through the near heap. Below coarseMin events
// the nearest quarter, at most frontEvents, sizes the buckets: a World's
// partition holds a few hundred to a few thousand events, RC timers
// milliseconds out among them, and the frontEvents-th nearest (the
// farthest, in a queue of fewer than 1 024) made buckets milliseconds
// wide.) The calendar has at most
// as many buckets as the overflow has events, and at least minBuckets so
// that a handful of events with short delays does not rebuild it every few
// events; events beyond its end stay in the overflow for the next rebuild.
func (q *queue) rebuild(now Time) {
	far := q.far
	q.far, q.scratch = q.scratch[:0], far
	lo, hi := uint64(q.farMin), uint64(q.farMax)
	n := uint64(len(far))
	k := min(n, frontEvents)
	per := float64(perCoarse)
	if n < coarseMin {
		per = perBucket // small enough to stay in cache as one rung
		// Sized by the nearest quarter: in a small queue (a World's
		// partition) the frontEvents nearest include far timers.
		k = max(min(n/4, frontEvents), 1)
	}
	gap := float64(q.kthDistance(far, now, int(k))) * per / float64(k)
	shift := uint(0)
	for shift < 62 && float64(uint64(1)<<shift) < gap {
		shift++
	}
	// Cover the overflow, with at most max(n, minBuckets) buckets and at
	// least minBuckets, but end by 1<<63 so that calEnd cannot wrap.
	nb := ((hi - lo) >> shift) + 1
	nb = max(min(nb, max(n, minBuckets)), minBuckets)
	nb = max(min(nb, (1<<63-lo)>>shift), 1)
	q.coarse.use(int(nb), lo, shift)
	q.nearEnd, q.midEnd, q.calEnd = lo, lo, lo+nb<<shift
	if q.calEnd < lo { // wrapped: the calendar reaches past MaxTime
		q.calEnd = ^uint64(0)
	}
	for i := range far {
		e := &far[i]
		var d *entry
		if t := uint64(e.at); t < q.calEnd {
			d = q.toBucket(&q.coarse, t)
		} else {
			d = q.toFar(e.at)
		}
		*d = *e
	}
	clear(far)
	q.scratch = far[:0]
}

// frontEvents is how many of the overflow's nearest events size the
// buckets of a rebuilt calendar.
const frontEvents = 1024

// kthDistance returns the distance from now of the k-th nearest event of
// far (k >= 1), by selection over a scratch copy of the distances.
func (q *queue) kthDistance(far []entry, now Time, k int) uint64 {
	ds := slices.Grow(q.dist[:0], len(far))[:len(far)]
	for i := range far {
		ds[i] = uint64(far[i].at - now)
	}
	q.dist = ds
	return selectKth(ds, k-1)
}

// selectKth returns the element that would be at index i of sorted a,
// reordering a (Hoare's selection with median-of-three pivots).
func selectKth(a []uint64, i int) uint64 {
	lo, hi := 0, len(a)-1
	for hi > lo {
		if hi-lo < 16 {
			insertionSort(a[lo : hi+1])
			break
		}
		m := lo + (hi-lo)/2
		if a[m] < a[lo] {
			a[m], a[lo] = a[lo], a[m]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[m] {
			a[hi], a[m] = a[m], a[hi]
		}
		p := a[m]
		l, r := lo, hi
		for l <= r {
			for a[l] < p {
				l++
			}
			for a[r] > p {
				r--
			}
			if l <= r {
				a[l], a[r] = a[r], a[l]
				l++
				r--
			}
		}
		switch {
		case i <= r:
			hi = r
		case i >= l:
			lo = l
		default:
			return a[i]
		}
	}
	return a[i]
}

func (a *entry) less(b *entry) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// popNear removes near's minimum. near must not be empty.
func (q *queue) popNear() {
	h := q.near
	n := len(h) - 1
	last := h[n]
	h[n] = entry{}
	q.near = h[:n]
	if n == 0 {
		return
	}
	h = h[:n]
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].less(&h[m]) {
				m = j
			}
		}
		if !h[m].less(&last) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
}

// pushNear adds e to near.
func (q *queue) pushNear(e entry) {
	q.near = append(q.near, e)
	h := q.near
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) >> 2
		if !e.less(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}
