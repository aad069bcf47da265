package sim

// entry is one pending event. The handler and its argument travel inline so
// that firing an event reads nothing but the entry itself; slot names the
// event's cancellation state in the queue's side table.
type entry struct {
	at   Time
	seq  uint64
	h    Handler
	arg  uint64
	slot uint32
}

func (a *entry) less(b *entry) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// Tuning of the bucket tier. perBucket is the mean number of events a bucket
// holds when the tier is rebuilt from the overflow; minRebuild is the
// overflow size below which the overflow is moved straight into the heap.
const (
	perBucket  = 64
	minRebuild = 64
)

// chunkLen is the number of events in one chunk of bucket storage.
const chunkLen = 16

// chunk is a block of bucket storage; a bucket is a list of chunks.
type chunk struct {
	e    [chunkLen]entry
	n    int32
	next int32 // next chunk of the bucket, -1 at the tail
}

// bucket is a list of chunks, events in arrival order; head is -1 when the
// bucket is empty.
type bucket struct {
	head, tail int32
}

// queue holds pending events in three tiers, a simplified ladder queue:
//
//   - near: a 4-ary min-heap ordered by (at, seq) holding every event
//     earlier than the end of the bucket most recently loaded into it;
//   - buckets: a calendar of equal-width time buckets, unsorted, covering
//     [nearEnd, calEnd) in buckets of 1<<shift ps;
//   - far: an unsorted overflow of events at or after the calendar's end.
//
// An event is only ever fired from the heap, and the heap holds every event
// that is earlier than anything in the buckets or the overflow, so the
// firing order is exactly (at, seq). Inserts are O(1) except into the heap,
// which stays small: it holds one bucket's worth of events plus those
// scheduled into the current bucket's span. When the heap runs dry the next
// non-empty bucket is moved into it; when the buckets run dry the overflow is
// spread into a new calendar (see rebuild). Buckets store events in chunks
// from a pool, so the steady state allocates nothing.
//
// Cancellation is lazy. Every scheduled event holds a slot; gen[slot] counts
// the slot's reuses so a stale EventID is recognised, and a bit in pending
// says whether the event is still to fire. A cancelled entry stays in its
// tier and is dropped when it reaches the top of the heap.
type queue struct {
	heap    []entry
	nearEnd uint64 // the heap holds every event with at < nearEnd

	buckets []bucket // reused across rebuilds
	chunks  []chunk  // storage of the buckets' events
	freeCh  []int32  // unused chunks
	nb      int      // buckets in use
	cur     int      // bucket last moved into the heap
	base    uint64   // start of bucket 0
	shift   uint     // bucket width is 1<<shift ps
	calEnd  uint64   // buckets cover [nearEnd, calEnd); far holds the rest

	far     []entry
	farMin  Time
	farMax  Time
	scratch []entry

	gen     []uint32
	pending []uint64 // one bit per slot: the event is still to fire
	free    []uint32
	live    int // scheduled and not cancelled
}

// alloc takes a slot for a new event and returns it with its generation.
func (q *queue) alloc() (uint32, uint32) {
	var i uint32
	if n := len(q.free); n > 0 {
		i = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		i = uint32(len(q.gen))
		q.gen = append(q.gen, 0)
		if int(i>>6) >= len(q.pending) {
			q.pending = append(q.pending, 0)
		}
	}
	q.gen[i]++
	q.pending[i>>6] |= 1 << (i & 63)
	return i, q.gen[i]
}

// isPending reports whether slot i holds an event still to fire.
func (q *queue) isPending(i uint32) bool {
	return q.pending[i>>6]&(1<<(i&63)) != 0
}

// cancel clears slot i's pending bit; the entry is dropped when it surfaces.
func (q *queue) cancel(i uint32) {
	q.pending[i>>6] &^= 1 << (i & 63)
}

// retire clears slot i's pending bit and returns the slot to the free list.
func (q *queue) retire(i uint32) {
	q.pending[i>>6] &^= 1 << (i & 63)
	q.free = append(q.free, i)
}

// insert adds e to the tier that covers its time.
func (q *queue) insert(e entry) {
	t := uint64(e.at)
	switch {
	case t < q.nearEnd:
		q.push(e)
	case t < q.calEnd:
		q.addToBucket((t-q.base)>>q.shift, &e)
	default:
		q.toFar(&e)
	}
}

// top returns the earliest entry (live or cancelled), refilling the heap from
// the lower tiers if needed, or nil if the queue is empty.
func (q *queue) top() *entry {
	if len(q.heap) == 0 && !q.refill() {
		return nil
	}
	return &q.heap[0]
}

// refill moves the next non-empty bucket, or the overflow, into the empty
// heap. It returns false if every tier is empty.
func (q *queue) refill() bool {
	for {
		for q.cur+1 < q.nb {
			q.cur++
			q.nearEnd = q.base + uint64(q.cur+1)<<q.shift
			if q.cur+1 == q.nb {
				q.nearEnd = q.calEnd // the sum may have wrapped
			}
			b := &q.buckets[q.cur]
			if b.head < 0 {
				continue
			}
			for c := b.head; c >= 0; {
				ch := &q.chunks[c]
				for i := range ch.n {
					q.push(ch.e[i])
				}
				clear(ch.e[:ch.n]) // drop handler references
				ch.n = 0
				q.freeCh = append(q.freeCh, c)
				c = ch.next
			}
			b.head, b.tail = -1, -1
			return true
		}
		q.nb, q.cur = 0, 0
		if len(q.far) == 0 {
			return false
		}
		q.rebuild()
		if len(q.heap) > 0 {
			return true
		}
	}
}

// rebuild spreads the overflow into a fresh calendar, or moves it into the
// heap when it is small.
//
// The bucket width is a power of two chosen from the mean distance of the
// overflow's events to its earliest one, so that the front of the
// calendar, where events are densest under the usual decaying delay
// distributions, holds about perBucket events per bucket. The calendar has at
// most as many buckets as the overflow has events; events beyond its end
// stay in the overflow for the next rebuild.
func (q *queue) rebuild() {
	far := q.far
	q.far, q.scratch = q.scratch[:0], far
	lo, hi := uint64(q.farMin), uint64(q.farMax)
	if len(far) < minRebuild {
		for i := range far {
			q.push(far[i])
		}
		q.nearEnd, q.calEnd = hi+1, hi+1
		clear(far)
		q.scratch = far[:0]
		return
	}
	n := uint64(len(far))
	var sum float64
	for i := range far {
		sum += float64(uint64(far[i].at) - lo)
	}
	gap := sum / float64(n) * perBucket / float64(n)
	shift := uint(0)
	for shift < 62 && float64(uint64(1)<<shift) < gap {
		shift++
	}
	nb := ((hi - lo) >> shift) + 1
	nb = min(nb, n)
	for uint64(len(q.buckets)) < nb {
		q.buckets = append(q.buckets, bucket{-1, -1})
	}
	q.nb, q.cur, q.base, q.shift = int(nb), -1, lo, shift
	q.nearEnd, q.calEnd = lo, lo+nb<<shift
	if q.calEnd < lo { // wrapped: the calendar reaches past MaxTime
		q.calEnd = ^uint64(0)
	}
	for i := range far {
		e := &far[i]
		if t := uint64(e.at); t < q.calEnd {
			q.addToBucket((t-lo)>>shift, e)
		} else {
			q.toFar(e)
		}
	}
	clear(far)
	q.scratch = far[:0]
}

// addToBucket appends e to bucket b.
func (q *queue) addToBucket(b uint64, e *entry) {
	bk := &q.buckets[b]
	if t := bk.tail; t >= 0 {
		if ch := &q.chunks[t]; ch.n < chunkLen {
			ch.e[ch.n] = *e
			ch.n++
			return
		}
	}
	var c int32
	if n := len(q.freeCh); n > 0 {
		c = q.freeCh[n-1]
		q.freeCh = q.freeCh[:n-1]
	} else {
		c = int32(len(q.chunks))
		q.chunks = append(q.chunks, chunk{})
	}
	ch := &q.chunks[c]
	ch.e[0] = *e
	ch.n = 1
	ch.next = -1
	if bk.tail >= 0 {
		q.chunks[bk.tail].next = c
	} else {
		bk.head = c
	}
	bk.tail = c
}

// toFar appends e to the overflow.
func (q *queue) toFar(e *entry) {
	if len(q.far) == 0 || e.at < q.farMin {
		q.farMin = e.at
	}
	if len(q.far) == 0 || e.at > q.farMax {
		q.farMax = e.at
	}
	q.far = append(q.far, *e)
}

// pop removes the heap's minimum. The heap must not be empty.
func (q *queue) pop() entry {
	h := q.heap
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h[n] = entry{}
	q.heap = h[:n]
	if n == 0 {
		return top
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
	return top
}

func (q *queue) push(e entry) {
	q.heap = append(q.heap, e)
	h := q.heap
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
