package nic

import (
	"fmt"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// DCQCNConfig holds the DCQCN parameters (Zhu et al., "Congestion Control
// for Large-Scale RDMA Deployments", SIGCOMM 2015, section 3 and table 1;
// the names in brackets are the mlx5 congestion-control knobs of the same
// role). The notification point (NP) is the receiving NIC, the reaction
// point (RP) the sending QP's rate limiter; the congestion point (CP) is
// the switch's RED-style ECN marking (fabric.ECNConfig).
type DCQCNConfig struct {
	// CNPInterval is the least time between two CNPs the NP sends for one
	// QP: CE marks arriving sooner are absorbed (paper: N = 50 us).
	CNPInterval sim.Duration
	// AlphaShift sets the EWMA gain g = 2^-AlphaShift of the RP's
	// congestion estimate alpha (paper: g = 1/256, so 8).
	AlphaShift uint8
	// AlphaTimer is the period after which, without a CNP, alpha decays
	// by (1-g) (paper: K = 55 us) [dce_tcp_rtt].
	AlphaTimer sim.Duration
	// RateTimer is the period of the RP's rate-increase timer, restarted
	// by every CNP (paper: T = 55 us) [rpg_time_reset]. mlx5's default
	// rpg_time_reset is 300 us, but it pairs it with a 32 KB byte counter
	// and 4 us CNP spacing; with the paper's 10 MB byte counter a 300 us
	// timer leaves an 8-to-1 incast at 100 Gb/s at 67% utilisation and a
	// Jain index of 0.3-0.8 after 6 ms (TestDCQCNIncast's setting).
	RateTimer sim.Duration
	// ByteCounter is the bytes sent between byte-counter rate-increase
	// events, restarted by every CNP (paper: B = 10 MB) [rpg_byte_reset].
	ByteCounter sim.Bytes
	// FastRecovery is the number of timer or byte-counter events after a
	// cut that only halve the distance to the target rate before additive
	// increase starts (paper: F = 5) [rpg_threshold].
	FastRecovery int
	// AI is the additive-increase step of the target rate (paper: R_AI =
	// 40 Mb/s) [rpg_ai_rate].
	AI sim.BitRate
	// HAI is the hyper-increase step, taken once both the timer and the
	// byte counter have passed FastRecovery events (10x AI, the ratio of
	// the mlx5 defaults rpg_hai_rate/rpg_ai_rate) [rpg_hai_rate].
	HAI sim.BitRate
	// MinRate is the floor of the RP's rate (mlx5 rpg_min_rate is of the
	// order of Mb/s; 100 Mb/s keeps a cut flow's probes flowing).
	MinRate sim.BitRate
}

// DefaultDCQCNConfig returns the DCQCN paper's parameters.
func DefaultDCQCNConfig() DCQCNConfig {
	return DCQCNConfig{
		CNPInterval:  50 * sim.Microsecond,
		AlphaShift:   8,
		AlphaTimer:   55 * sim.Microsecond,
		RateTimer:    55 * sim.Microsecond,
		ByteCounter:  10_000_000,
		FastRecovery: 5,
		AI:           40 * sim.Mbps,
		HAI:          400 * sim.Mbps,
		MinRate:      100 * sim.Mbps,
	}
}

func (c *DCQCNConfig) validate() error {
	if c.CNPInterval < 0 || c.AlphaTimer <= 0 || c.RateTimer <= 0 || c.ByteCounter <= 0 ||
		c.AlphaShift < 1 || c.AlphaShift > 16 || c.FastRecovery < 0 || c.AI < 0 || c.HAI < 0 || c.MinRate <= 0 {
		return fmt.Errorf("nic: DCQCN parameters %+v: timers, byte counter and min rate must be positive, AlphaShift in 1..16", *c)
	}
	return nil
}

// RateEvent is a change of a QP's DCQCN rate limiter, reported to the
// NIC's observer as an obs.Rate event (Code).
type RateEvent uint8

// Rate limiter events.
const (
	RateCut          RateEvent = iota // a CNP cut the current rate
	RateFastRecovery                  // current rate moved halfway to the target
	RateAdditive                      // target raised by AI, current halfway to it
	RateHyper                         // target raised by a multiple of HAI, current halfway to it
	RateReleased                      // back at line rate: the limiter is off
)

var rateEventNames = [...]string{"cut", "fast-recovery", "additive", "hyper", "released"}

// String names the event.
func (e RateEvent) String() string {
	if int(e) < len(rateEventNames) {
		return rateEventNames[e]
	}
	return fmt.Sprintf("RateEvent(%d)", uint8(e))
}

// alphaOne is 1.0 in the fixed-point format of alpha.
const alphaOne = 1 << 20

// rpState is a QP's DCQCN reaction point: a rate limiter engaged by the
// first CNP and released when the rate is back at line rate. While it is
// off the QP sends at the port's pace and no timer runs.
//
// The alpha and rate-increase timers are lazy unless a rate tap is
// installed (NIC.ccEager): alphaAt and rateAt hold their next due
// instants, and the periods that elapsed are applied, in the order the
// timer events would have fired, when the QP next reads its limiter (it
// tries to send, or a CNP arrives; see QP.ccCatchUp). A QP cut once and
// then idle thus costs no event per period while its rate climbs back.
type rpState struct {
	on         bool
	rc, rt     sim.BitRate // current and target rate
	alpha      uint32      // congestion estimate, alphaOne = 1
	next       sim.Time    // pacing: earliest start of the QP's next paced packet
	bytes      sim.Bytes   // sent since the last byte-counter event
	tcnt, bcnt int         // timer and byte-counter events since the last cut
	alphaAt    sim.Time    // due time of the alpha timer
	rateAt     sim.Time    // due time of the rate-increase timer
	alphaEv    sim.EventID // eager timers only
	rateEv     sim.EventID

	// Notification point (this QP as a receiver).
	cnpSent bool
	cnpLast sim.Time
}

// rateLimited reports whether qp's DCQCN rate limiter is engaged.
func (qp *QP) rateLimited() bool { return qp.cc != nil && qp.cc.on }

// ccState returns qp's DCQCN state, allocating it: most QPs never see a
// CE mark or a CNP (none on lossless fabrics).
func (qp *QP) ccState() *rpState {
	if qp.cc == nil {
		qp.cc = &rpState{}
	}
	return qp.cc
}

// Rate returns the QP's DCQCN current and target rates and whether the
// limiter is engaged; when it is not, the QP sends at line rate.
//
// With lazy timers it counts every timer due by now, on a copy: reading
// the rate changes nothing.
func (qp *QP) Rate() (current, target sim.BitRate, limited bool) {
	var rp rpState
	if qp.cc != nil {
		rp = *qp.cc
	}
	n := qp.n
	if rp.on && !n.ccEager {
		now := n.s.Now()
		rp.catchUp(&n.cfg.CC, n.net.LinkRate(n.ep), now, true, true)
	}
	if !rp.on {
		r := n.net.LinkRate(n.ep)
		return r, r, false
	}
	return rp.rc, rp.rt, true
}

// rateChanged reports a change of qp's rate limiter to the observer.
func (qp *QP) rateChanged(ev RateEvent) {
	n := qp.n
	rc, rt, _ := qp.Rate()
	n.obs.Emit(obs.Event{Kind: obs.Rate, At: n.s.Now(), Who: qp.name, QP: qp.qpn, Code: uint32(ev), Value: uint64(rc),
		Old: uint64(rt)})
}

// setEagerCC switches the DCQCN timers between events (eager) and lazy
// catch-up. Limiters that are engaged carry over: their elapsed periods
// are applied and their next timers scheduled, or their pending timer
// events cancelled.
func (n *NIC) setEagerCC(eager bool) {
	if eager == n.ccEager {
		return
	}
	n.ccEager = eager
	now := n.s.Now()
	for _, qp := range n.qps {
		if qp == nil || !qp.rateLimited() {
			continue
		}
		rp := qp.cc
		if !eager {
			_ = n.s.Cancel(rp.alphaEv)
			_ = n.s.Cancel(rp.rateEv)
			continue
		}
		n.stats.RateIncreases += rp.catchUp(&n.cfg.CC, n.net.LinkRate(n.ep), now, true, true)
		if rp.on {
			rp.alphaEv = n.s.Schedule(rp.alphaAt, n, evAlpha<<evShift|uint64(qp.idx))
			rp.rateEv = n.s.Schedule(rp.rateAt, n, evRateInc<<evShift|uint64(qp.idx))
		}
	}
}

// congested is the NP's reaction to a CE-marked packet for qp: it queues
// a CNP towards the sending QP unless one was sent less than CNPInterval
// ago.
func (qp *QP) congested(p *fabric.Packet) {
	n := qp.n
	n.stats.CEReceived++
	now := n.s.Now()
	cc := qp.ccState()
	if cc.cnpSent && now.Sub(cc.cnpLast) < n.cfg.CC.CNPInterval {
		return
	}
	cc.cnpSent, cc.cnpLast = true, now
	n.cnpq = append(n.cnpq, cnpReq{dst: p.Src, qpn: qp.rqpn, sport: qp.srcPort})
	n.kick(now)
}

// cnpReq is a CNP waiting for the transmitter.
type cnpReq struct {
	dst   fabric.EndpointID
	qpn   uint32
	sport uint16
}

// sendCNP sends the oldest queued CNP. CNPs go ahead of all QP traffic (the
// NP sends them on a strict-priority queue, as mlx5 does with DSCP 48) and
// are not ECN-capable.
func (n *NIC) sendCNP() {
	c := n.cnpq[0]
	copy(n.cnpq, n.cnpq[1:])
	n.cnpq = n.cnpq[:len(n.cnpq)-1]
	p := n.net.NewPacketAt(n.ep, 0, false)
	p.Src, p.Dst, p.SrcPort = n.ep, c.dst, c.sport
	p.Hdr.Opcode = roce.OpCNP
	p.Hdr.PKey = roce.DefaultPKey
	p.Hdr.DestQP = c.qpn
	p.Hdr.BECN = true
	n.stats.CNPsSent++
	n.send(p, 0)
}

// cnpReceived is the RP's reaction to a CNP: Rt = Rc, Rc *= 1 - alpha/2,
// alpha = (1-g) alpha + g, and both increase counters and timers restart.
func (qp *QP) cnpReceived() {
	n := qp.n
	n.stats.CNPsReceived++
	if !n.cfg.DCQCN {
		return
	}
	c := &n.cfg.CC
	rp := qp.ccState()
	now := n.s.Now()
	if rp.on && !n.ccEager {
		qp.ccCatchUp(now)
	}
	if !rp.on {
		rp.on = true
		rp.rc = n.net.LinkRate(n.ep)
		rp.alpha = alphaOne // paper: alpha starts at 1, so the first cut halves the rate
		rp.next = now
	}
	rp.rt = rp.rc
	cut := sim.BitRate(uint64(rp.rc) * uint64(rp.alpha) >> 21) // Rc * alpha/2
	rp.rc = max(rp.rc-cut, c.MinRate)
	rp.alpha = rp.alpha - rp.alpha>>c.AlphaShift + alphaOne>>c.AlphaShift
	rp.tcnt, rp.bcnt, rp.bytes = 0, 0, 0
	n.stats.RateCuts++
	if n.ccEager {
		qp.armAlpha(now)
		qp.armRate(now)
	} else {
		rp.alphaAt, rp.rateAt = now.Add(c.AlphaTimer), now.Add(c.RateTimer)
	}
	if n.obs != nil {
		qp.rateChanged(RateCut)
	}
}

func (qp *QP) armAlpha(now sim.Time) {
	n := qp.n
	if qp.cc.alphaAt > now {
		_ = n.s.Cancel(qp.cc.alphaEv)
	}
	qp.cc.alphaAt = now.Add(n.cfg.CC.AlphaTimer)
	qp.cc.alphaEv = n.s.Schedule(qp.cc.alphaAt, n, evAlpha<<evShift|uint64(qp.idx))
}

func (qp *QP) armRate(now sim.Time) {
	n := qp.n
	if qp.cc.rateAt > now {
		_ = n.s.Cancel(qp.cc.rateEv)
	}
	qp.cc.rateAt = now.Add(n.cfg.CC.RateTimer)
	qp.cc.rateEv = n.s.Schedule(qp.cc.rateAt, n, evRateInc<<evShift|uint64(qp.idx))
}

// alphaFired decays alpha after AlphaTimer without a CNP.
func (qp *QP) alphaFired() {
	rp := qp.cc
	now := qp.n.s.Now()
	if rp == nil || !rp.on || now != rp.alphaAt {
		return
	}
	rp.alpha -= rp.alpha >> qp.n.cfg.CC.AlphaShift
	qp.armAlpha(now)
}

// rateFired is a rate-increase timer event.
func (qp *QP) rateFired() {
	rp := qp.cc
	now := qp.n.s.Now()
	if rp == nil || !rp.on || now != rp.rateAt {
		return
	}
	rp.tcnt++
	qp.increase()
	if rp.on {
		qp.armRate(now)
	}
}

// paced accounts a paced packet of wire bytes just sent: it spaces the
// QP's next one at the current rate and runs the byte counter.
func (qp *QP) paced(now sim.Time, wire sim.Bytes) {
	rp := qp.cc
	if !rp.on {
		return
	}
	rp.next = now.Add(rp.rc.TxTime(wire))
	rp.bytes += wire
	if rp.bytes >= qp.n.cfg.CC.ByteCounter {
		rp.bytes -= qp.n.cfg.CC.ByteCounter
		rp.bcnt++
		qp.increase()
	}
}

// increase is one rate-increase event (timer or byte counter), see
// rpState.increase, with its count, the release of eager timers and the
// tap.
func (qp *QP) increase() {
	n := qp.n
	rp := qp.cc
	ev := rp.increase(&n.cfg.CC, n.net.LinkRate(n.ep))
	n.stats.RateIncreases++
	if ev == RateReleased && n.ccEager {
		if now := n.s.Now(); rp.alphaAt > now {
			_ = n.s.Cancel(rp.alphaEv)
		}
		if now := n.s.Now(); rp.rateAt > now {
			_ = n.s.Cancel(rp.rateEv)
		}
	}
	if ev == RateReleased {
		rp.alphaAt, rp.rateAt = 0, 0
	}
	if n.obs != nil {
		qp.rateChanged(ev)
	}
}

// increase is one rate-increase event: fast recovery while both counts
// are below F, hyper increase once both exceed it, additive increase
// otherwise; then Rc moves halfway to Rt. Within AI of line rate the
// limiter is released.
func (rp *rpState) increase(c *DCQCNConfig, line sim.BitRate) RateEvent {
	F := c.FastRecovery
	ev := RateFastRecovery
	switch {
	case max(rp.tcnt, rp.bcnt) < F:
	case min(rp.tcnt, rp.bcnt) > F:
		ev = RateHyper
		rp.rt += sim.BitRate(min(rp.tcnt, rp.bcnt)-F) * c.HAI
	default:
		ev = RateAdditive
		rp.rt += c.AI
	}
	rp.rt = min(rp.rt, line)
	rp.rc = (rp.rt + rp.rc + 1) / 2
	// Within one additive step of line rate counts as line rate (the
	// rate limiter's granularity): the limiter is released rather than
	// creeping up by ever smaller halvings.
	if rp.rc >= line-c.AI {
		rp.on = false
		rp.rc, rp.rt = line, line
		ev = RateReleased
	}
	return ev
}

// ccCatchUp applies qp's lazy timer events due by now, for the event that
// is being handled (posted at n.posted, see NIC.Handle), and counts the
// increases. A timer due at an earlier instant has fired before it. One
// due at now was armed one period earlier, so it fires before this event
// if this event was posted after that (the kernel fires same-instant
// events in the order they were scheduled) and after it if it was posted
// before. Posted at the very instant the timer was armed, the order
// depended on which of the two events at that earlier instant ran first,
// which nothing recorded: the timer is taken to go first and the case is
// counted in n.ccTies (it needs an event posted exactly one timer period
// ahead at the instant a timer fired, and none of the tests meets it).
func (qp *QP) ccCatchUp(now sim.Time) {
	n := qp.n
	c := &n.cfg.CC
	posted := n.posted
	rp := qp.cc
	if rp.alphaAt == now && posted.Add(c.AlphaTimer) == now || rp.rateAt == now && posted.Add(c.RateTimer) == now {
		n.ccTies++
	}
	n.stats.RateIncreases += rp.catchUp(c, n.net.LinkRate(n.ep), now,
		posted.Add(c.AlphaTimer) >= now, posted.Add(c.RateTimer) >= now)
}

// catchUp applies the timer events of an engaged limiter due before now,
// and those due at now if alphaNow (alpha timer) and rateNow
// (rate-increase timer) say so, in the order their events fire; it
// returns the number of rate increases. The rate timer first: an alpha
// decay changes only the next cut, and a release stops both timers.
func (rp *rpState) catchUp(c *DCQCNConfig, line sim.BitRate, now sim.Time, alphaNow, rateNow bool) uint64 {
	var incs uint64
	for rp.on && (rp.rateAt < now || rateNow && rp.rateAt == now) {
		rp.tcnt++
		incs++
		if rp.increase(c, line) == RateReleased {
			rp.alphaAt, rp.rateAt = 0, 0
			return incs
		}
		rp.rateAt = rp.rateAt.Add(c.RateTimer)
	}
	if !rp.on {
		return incs
	}
	for rp.alphaAt < now || alphaNow && rp.alphaAt == now {
		if rp.alpha>>c.AlphaShift == 0 {
			// alpha no longer decays: skip the remaining periods.
			k := now.Sub(rp.alphaAt) / c.AlphaTimer
			rp.alphaAt = rp.alphaAt.Add(k * c.AlphaTimer)
			if rp.alphaAt < now || alphaNow && rp.alphaAt == now {
				rp.alphaAt = rp.alphaAt.Add(c.AlphaTimer)
			}
			break
		}
		rp.alpha -= rp.alpha >> c.AlphaShift
		rp.alphaAt = rp.alphaAt.Add(c.AlphaTimer)
	}
	return incs
}
