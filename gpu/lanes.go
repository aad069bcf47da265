package gpu

import (
	"strconv"

	"github.com/ginsim/ginsim/sim"
)

// Lanes runs jobs on a warp's lanes concurrently, on one-thread groups
// launched with the warp and parked between jobs: Parallel without
// spawning a group per job. A run of one job runs it on the warp itself.
// With a Then job (NewLanes' jobThen) the lanes are state machines with
// the same events as the parked processes: an event where the lane starts,
// one per job where it is woken, one at Close.
type Lanes struct {
	warp  *Group
	lanes []*Group
	todo  []bool
	live  int
	quit  bool
	start func(th *Group, i int)
	job   func(th *Group, i int)
	// The lanes' state machines (nil: the lanes are processes) and their
	// job: jobThen starts job i and continues at h; jobDone, when set,
	// runs when it has, with the instant it started.
	ms      []*laneMachine
	jobThen func(th *Group, i int, h sim.Handler, arg uint64)
	jobDone func(th *Group, i int, start sim.Time)
	// warpH, when set, is the warp as a state machine: the last lane done
	// posts it instead of waking the warp's process.
	warpH sim.Handler
}

// NewLanes launches n lanes for warp, named after it. start, when set,
// runs where lane i first runs (before any job); job runs job i on a lane
// (or on the warp). With jobThen set, the lanes have no process: jobThen
// starts job i and continues at h, and jobDone (optional) runs when it
// has, with the instant it started.
func NewLanes(warp *Group, n int, start, job func(th *Group, i int),
	jobThen func(th *Group, i int, h sim.Handler, arg uint64), jobDone func(th *Group, i int, start sim.Time)) *Lanes {
	l := &Lanes{warp: warp, todo: make([]bool, n), start: start, job: job}
	g := warp.GPU()
	if jobThen != nil {
		l.jobThen, l.jobDone = jobThen, jobDone
		l.ms = make([]*laneMachine, n)
		for i := range n {
			m := &laneMachine{l: l, i: i}
			l.ms[i] = m
			m.pc = laneStart
			m.t = g.LaunchHandler(warp.Name()+"/lane"+strconv.Itoa(i), 1, m, 0)
			l.lanes = append(l.lanes, m.t)
		}
		return l
	}
	for i := range n {
		l.lanes = append(l.lanes, g.Launch(warp.Name()+"/lane"+strconv.Itoa(i), 1, func(t *Group) {
			if l.start != nil {
				l.start(t, i)
			}
			for {
				for !l.todo[i] && !l.quit {
					t.Proc().Park("idle lane")
				}
				if !l.todo[i] {
					return
				}
				l.job(t, i)
				l.todo[i] = false
				if l.live--; l.live == 0 {
					l.warp.Proc().Wake()
				}
			}
		}))
	}
	return l
}

// Then reports whether the lanes are state machines.
func (l *Lanes) Then() bool { return l.ms != nil }

// ResumeWarp makes the last lane done of a RunThen post h (the warp as a
// state machine) instead of waking the warp's process.
func (l *Lanes) ResumeWarp(h sim.Handler) { l.warpH = h }

// Run runs jobs 0..k-1 and returns when the last is done; a single job
// runs on the warp.
func (l *Lanes) Run(k int) {
	switch k {
	case 0:
		return
	case 1:
		l.job(l.warp, 0)
		return
	}
	l.live = k
	for i := range k {
		l.todo[i] = true
		if l.ms != nil {
			l.ms[i].wake()
			continue
		}
		l.lanes[i].Proc().Wake()
	}
	for l.live > 0 {
		l.warp.Proc().Park("lanes")
	}
}

// RunThen starts jobs 0..k-1 (k >= 2) on the lanes' state machines; the
// last one done posts the handler given to ResumeWarp.
func (l *Lanes) RunThen(k int) {
	l.live = k
	for i := range k {
		l.todo[i] = true
		l.ms[i].wake()
	}
}

// Close ends the lanes.
func (l *Lanes) Close() {
	l.quit = true
	for i, t := range l.lanes {
		if l.ms != nil {
			l.ms[i].wake()
			continue
		}
		t.Proc().Wake()
	}
}

// laneMachine is lane i of a Lanes as a state machine: the lane process's
// loop (run a job when there is one, end at close, park otherwise) with
// the same events: laneStart where the process would first run, laneWake
// where a parked lane is woken (waking one that is not parked does
// nothing, as Proc.Wake), laneDone where a job that took time completes.
type laneMachine struct {
	l      *Lanes
	t      *Group
	i      int
	parked bool
	start  sim.Time
	pc     uint8 // the event due: laneStart, laneWake or laneDone
}

const (
	laneStart uint8 = iota
	laneWake
	laneDone
)

// wake is Proc.Wake of the lane.
func (m *laneMachine) wake() {
	if !m.parked {
		return
	}
	m.parked = false
	s := m.t.GPU().Sim()
	m.pc = laneWake
	s.Post(s.Now(), m, 0)
}

// Handle implements sim.Handler.
func (m *laneMachine) Handle(s *sim.Sim, _ uint64) {
	l := m.l
	switch m.pc {
	case laneStart:
		if l.start != nil {
			l.start(m.t, m.i)
		}
	case laneDone:
		if l.jobDone != nil {
			l.jobDone(m.t, m.i, m.start)
		}
		l.todo[m.i] = false
		if l.live--; l.live == 0 {
			if l.warpH != nil {
				s.Post(s.Now(), l.warpH, 0)
			} else {
				l.warp.Proc().Wake()
			}
		}
	}
	switch {
	case l.todo[m.i]:
		m.start = s.Now()
		m.pc = laneDone
		l.jobThen(m.t, m.i, m, 0)
	case l.quit:
		m.t.End()
	default:
		m.parked = true
	}
}
