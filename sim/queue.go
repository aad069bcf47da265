package sim

// entry is one pending event in the heap. The heap holds only the ordering key
// and the index of the event's slot, so sifting moves 24 bytes.
type entry struct {
	at   Time
	seq  uint64
	slot int32
}

func (a *entry) less(b *entry) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// slot holds what an event does. Slots are recycled through a free list; gen
// counts reuses so that a stale EventID cannot cancel a newer event.
type slot struct {
	h   Handler
	arg uint64
	gen uint32
}

// queue is a 4-ary min-heap of entries ordered by (at, seq), with slot
// storage and lazy cancellation. A 4-ary heap halves the depth of a binary
// heap and keeps the four children of a node in one or two cache lines.
type queue struct {
	heap  []entry
	slots []slot
	free  []int32
	live  int // scheduled and not cancelled
}

func (q *queue) alloc(h Handler, arg uint64) int32 {
	if n := len(q.free); n > 0 {
		i := q.free[n-1]
		q.free = q.free[:n-1]
		s := &q.slots[i]
		s.h, s.arg = h, arg
		return i
	}
	q.slots = append(q.slots, slot{h: h, arg: arg})
	return int32(len(q.slots) - 1)
}

func (q *queue) release(i int32) {
	s := &q.slots[i]
	s.h = nil
	s.gen++
	q.free = append(q.free, i)
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

// pop removes and returns the minimum entry. The heap must not be empty.
func (q *queue) pop() entry {
	h := q.heap
	top := h[0]
	n := len(h) - 1
	last := h[n]
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
		end := c + 4
		if end > n {
			end = n
		}
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
