package sim

// inbox holds the events a partition of a World received from other
// partitions and has not fired yet, in firing order: by time, then by
// (sending partition, send order). At the same instant they fire before
// the partition's own events.
//
// The order depends on what was sent, never on when it arrived: a World
// hands events over at the start of the next window, the sequential
// kernel (World.RunSequential) at once, and both fire them in the same
// order. The partition's own events keep the order they were scheduled
// in (the queue's), which is its own business alone. So a partition fires
// the same events in the same order whatever the windows and however the
// partitions are interleaved: the sequential kernel's output is the
// World's.
type inbox []letter

// letter is an event sent across partitions.
type letter struct {
	at  Time
	key uint64 // sending partition << 40 | the sender's send count
	h   Handler
	arg uint64
}

func (l *letter) before(m *letter) bool {
	return l.at < m.at || (l.at == m.at && l.key < m.key)
}

// push adds l: a 4-ary min-heap, as the queue's near tier.
func (b *inbox) push(l letter) {
	h := append(*b, l)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*b = h
}

// pop removes and returns the earliest letter; b must not be empty.
func (b *inbox) pop() letter {
	h := *b
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = letter{} // drop the handler reference
	h = h[:n]
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if h[j].before(&h[m]) {
				m = j
			}
		}
		if !h[m].before(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*b = h
	return top
}
