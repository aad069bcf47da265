package sim

// runSequential is Run for the sequential kernel (SetSequential): the
// same windows, but within one the partitions' events fire one at a time
// in the order (time, partition), and events sent across partitions join
// the receiver's inbox when sent (the World's Send does that while
// w.sequential is set). No partition can receive an event inside the
// window it is in (Send is at least the lookahead ahead), so the window
// ends, the hooks, Stop, Fail and the event budget are Run's, and so is
// every partition's sequence of events.
func (w *World) runSequential() error {
	for _, s := range w.parts {
		s.stopped, s.stopReq = false, false
	}
	for {
		t := w.order0()
		if t == MaxTime {
			w.align(w.maxNow())
			return nil
		}
		w.end = t.Add(w.la)
		if w.end < t {
			w.end = MaxTime
		}
		w.window++
		limit := w.end - 1
		for h := w.order; h[0].next <= limit; {
			s := h[0]
			s.fireNext(limit) // s.next <= limit: an event is due
			if err := s.stuck(); err != nil && s.failErr == nil {
				s.failErr = err
			}
			s.next = s.nextAt()
			if s.failErr != nil {
				s.next = MaxTime // Fail ends the partition's window
			}
			w.down(0)
		}
		for _, f := range w.hooks {
			f(w.end)
		}
		w.due, w.dueEnd = len(w.overlap) > 0, w.end
		w.drain()                       // no Exec to run them beside the next window
		_, stop, err, fired := w.scan() // no outboxes: only the partitions' state
		if done, err := w.settle(stop, err, fired); done {
			return err
		}
	}
}

// order0 sets every partition's next event and heaps them by (next,
// index) in w.order; it returns the earliest.
func (w *World) order0() Time {
	w.order = append(w.order[:0], w.parts...)
	for _, s := range w.order {
		s.next = s.nextAt()
	}
	for i := len(w.order)/2 - 1; i >= 0; i-- {
		w.down(i)
	}
	return w.order[0].next
}

func earlier(a, b *Sim) bool {
	return a.next < b.next || (a.next == b.next && a.part < b.part)
}

// down restores the heap below position i.
func (w *World) down(i int) {
	h := w.order
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && earlier(h[c+1], h[c]) {
			c++
		}
		if !earlier(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
