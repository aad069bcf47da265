package perftest

import (
	"fmt"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Options configures a run.
type Options struct {
	Sizes []int64 // message sizes in bytes
	// Topo is the cluster; Nodes is forced to 2 and the first NIC of each
	// node is used. The zero value is a single switch.
	Topo topo.Spec
	NIC  nic.Config
	MTU  int // path MTU; 0 means 4096
	// GPUMem places the buffers in GPU memory (perftest --use_cuda); else
	// host memory.
	GPUMem bool
	// TxDepth is the number of outstanding WRITEs of the bandwidth test
	// (perftest --tx-depth, default 128).
	TxDepth int
	// MaxVolume caps the bytes one size moves (iterations = MaxVolume/size,
	// clamped to [MinIters, MaxIters]); 0 means 256 MiB.
	MaxVolume          int64
	MinIters, MaxIters int
	// PollCost is the CPU's time to notice a changed word it spins on and
	// PostCost its time to build WQEs before the doorbell store.
	PollCost, PostCost sim.Duration
	Seed               uint64
	// Tap, if set, sees every packet sent by either NIC (node 0 or 1).
	Tap func(node int, c *topo.Cluster, p *fabric.Packet)
}

// Row is one measured size.
type Row struct {
	Bytes         int64   `json:"bytes"`
	Iters         int     `json:"iters"`
	LatencyUs     float64 `json:"latency_us"`     // write_lat: half round trip; write_bw: time per message
	BandwidthGBps float64 `json:"bandwidth_GBps"` // payload bytes per second / 1e9
}

func (o *Options) defaults() {
	if o.MTU == 0 {
		o.MTU = 4096
	}
	if o.TxDepth == 0 {
		o.TxDepth = 128
	}
	if o.MaxVolume == 0 {
		o.MaxVolume = 256 << 20
	}
	if o.MinIters == 0 {
		o.MinIters = 4
	}
	if o.MaxIters == 0 {
		o.MaxIters = 1000
	}
	if o.PollCost == 0 {
		o.PollCost = 60 * sim.Nanosecond // a spin-loop iteration on a cached line after invalidation
	}
	if o.PostCost == 0 {
		o.PostCost = 100 * sim.Nanosecond // ibv_post_send building a WQE and the write-combining flush
	}
	if o.NIC == (nic.Config{}) {
		o.NIC = nic.DefaultConfig()
	}
	if o.Topo.Kind == "" {
		o.Topo.Kind = topo.KindSingle
	}
	o.Topo.Nodes = 2
	if o.Topo.GPUsPerNode == 0 {
		o.Topo.GPUsPerNode = 1
	}
}

func (o *Options) iters(size int64) int {
	return int(max(int64(o.MinIters), min(int64(o.MaxIters), o.MaxVolume/max(size, 1))))
}

// side is one node: NIC, QP, CQ and buffers.
type side struct {
	s      *sim.Sim
	n      *nic.NIC
	qp     *nic.QP
	cq     *nic.CQ
	buf    *mem.Region
	mr     *nic.MR
	remote *nic.MR // the peer's buffer
}

type pair struct {
	s   *sim.Sim
	c   *topo.Cluster
	sd  [2]*side
	opt *Options
}

func build(o *Options, size int64) (*pair, error) {
	s := sim.New(sim.Config{Seed: o.Seed, StallLimit: -1})
	c, err := topo.Build(s, o.Topo)
	if err != nil {
		return nil, fmt.Errorf("perftest: %w", err)
	}
	ms := mem.NewSystem(s)
	p := &pair{s: s, c: c, opt: o}
	for i := range 2 {
		bus := c.PCIe(i)
		ep := c.Endpoint(i, 0)
		n := nic.New(s, o.NIC, fmt.Sprintf("n%d/nic0", i), c.Net, ep, bus, c.NICDev(i, 0))
		if o.Tap != nil {
			node := i
			n.SetTap(func(pk *fabric.Packet) { o.Tap(node, c, pk) })
		}
		host := bus.Host()
		where, loc := host, mem.Loc{Node: i, Kind: mem.Host}
		if o.GPUMem {
			where, loc = c.GPUDev(i, 0), mem.Loc{Node: i, Kind: mem.HBM}
		}
		depth := o.TxDepth + 1
		cqRing := ms.Alloc(fmt.Sprintf("n%d/cq", i), mem.Loc{Node: i, Kind: mem.Host}, sim.Bytes(4*depth)*o.NIC.CQEBytes, false)
		cq, err := n.CreateCQ(4*depth, cqRing, host)
		if err != nil {
			return nil, err
		}
		sq := ms.Alloc(fmt.Sprintf("n%d/sq", i), mem.Loc{Node: i, Kind: mem.Host}, sim.Bytes(depth)*o.NIC.WQEBytes, false)
		qp, err := n.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: depth, RQDepth: 16, SQRing: sq, SQWhere: host, MaxInline: 8})
		if err != nil {
			return nil, err
		}
		blen := uint64(max(size, 8))
		buf := ms.Alloc(fmt.Sprintf("n%d/buf", i), loc, sim.Bytes(blen), false)
		mr, err := n.RegMR(buf, 0, blen, 0x7f0000000000+uint64(i)<<32, nic.AccessLocalWrite|nic.AccessRemoteWrite|nic.AccessRemoteAtomic, where, true)
		if err != nil {
			return nil, err
		}
		p.sd[i] = &side{s: s, n: n, qp: qp, cq: cq, buf: buf, mr: mr}
	}
	for i := range 2 {
		a, b := p.sd[i], p.sd[1-i]
		a.remote = b.mr
		if err := a.qp.Connect(c.Endpoint(1-i, 0), b.qp.QPN(), RC(o.MTU, 14)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// post models the CPU: PostCost to build the WQEs, then the doorbell store
// (nic.HostDoorbell) crosses PCIe to the NIC, which sees it on arrival.
func (sd *side) post(wrs []nic.WR, onErr func(error)) {
	at := sd.n.HostDoorbell(sd.s.Now(), len(wrs))
	sd.s.At(at, func() {
		if err := sd.qp.PostSend(wrs); err != nil {
			onErr(err)
		}
	})
}

// wordWatcher calls f when a watched word changes.
type wordWatcher struct{ f func() }

func (w *wordWatcher) WordChanged(*mem.Region, uint64) { w.f() }

// run is one size's simulation; the first failure stops it.
type run struct {
	s   *sim.Sim
	err error
}

func (r *run) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.s.Stop()
}

// wait runs the simulation to its end and returns the kernel's error or
// the first failure.
func (r *run) wait() error {
	if err := r.s.Run(); err != nil {
		return err
	}
	return r.err
}

// watchCQ calls f whenever the NIC writes a CQE into sd's CQ.
func (sd *side) watchCQ(f func()) {
	w := &wordWatcher{f}
	for i := range sd.cq.Depth() {
		r, off := sd.cq.WordFor(uint64(i))
		r.Watch(off, w)
	}
}

// reap polls sd's CQ until it is empty and returns how many completions
// it took, or the first that did not succeed.
func (sd *side) reap(buf []nic.CQE, what string) (int, error) {
	n := 0
	for {
		k := sd.cq.Poll(buf)
		if k == 0 {
			return n, nil
		}
		for _, c := range buf[:k] {
			if c.Status != nic.StatusSuccess {
				return n, fmt.Errorf("perftest: %s WR %d: %v", what, c.WRID, c.Status)
			}
		}
		n += k
	}
}

// WriteLat runs the ib_write_lat ping-pong for each size: node 0 writes
// size bytes into node 1's buffer; node 1 spins on the last byte and, on
// seeing it, writes back; latency is half the round trip, averaged.
func WriteLat(o Options) ([]Row, error) {
	o.defaults()
	var rows []Row
	for _, size := range o.Sizes {
		if size < 1 {
			return nil, fmt.Errorf("perftest: size %d must be positive", size)
		}
		p, err := build(&o, size)
		if err != nil {
			return nil, err
		}
		iters := o.iters(size)
		rn := &run{s: p.s}
		word := (uint64(size) - 1) &^ 7
		count := [2]int{}
		var start, end sim.Time
		var send func(i int)
		send = func(i int) {
			sd := p.sd[i]
			wr := nic.WR{ID: uint64(count[i]), Op: nic.WRWrite, Signaled: false,
				Local: nic.SGE{MR: sd.mr, Len: uint64(size)}, RemoteVA: sd.remote.VA, RKey: sd.remote.RKey}
			if size <= 8 {
				wr.Inline, wr.Local.MR = true, nil
			}
			// Every 64th WR is signaled so the SQ drains (perftest uses cq_mod).
			if count[i]%64 == 63 {
				wr.Signaled = true
			}
			count[i]++
			p.s.At(p.s.Now().Add(o.PostCost), func() { sd.post([]nic.WR{wr}, rn.fail) })
		}
		for i := range 2 {
			i := i
			sd := p.sd[i]
			sd.buf.Watch(word, &wordWatcher{func() {
				p.s.At(p.s.Now().Add(o.PollCost), func() {
					var drain [64]nic.CQE
					sd.cq.Poll(drain[:])
					if i == 0 && count[0] >= iters {
						end = p.s.Now()
						p.s.Stop()
						return
					}
					send(i)
				})
			}})
		}
		start = p.s.Now()
		send(0)
		if err := rn.wait(); err != nil {
			return nil, err
		}
		if end == 0 {
			return nil, fmt.Errorf("perftest: write_lat size %d did not finish (QP %v)", size, p.sd[0].qp.State())
		}
		lat := end.Sub(start) / sim.Duration(2*iters)
		rows = append(rows, Row{Bytes: size, Iters: iters, LatencyUs: lat.Us(),
			BandwidthGBps: float64(size) / lat.Seconds() / 1e9})
	}
	return rows, nil
}

// WriteBW runs the ib_write_bw stream for each size: node 0 keeps TxDepth
// signaled WRITEs outstanding, reposting as completions arrive, until
// iterations are done; bandwidth is payload bytes over the time from the
// first post to the last completion.
func WriteBW(o Options) ([]Row, error) {
	o.defaults()
	var rows []Row
	for _, size := range o.Sizes {
		if size < 1 {
			return nil, fmt.Errorf("perftest: size %d must be positive", size)
		}
		p, err := build(&o, size)
		if err != nil {
			return nil, err
		}
		iters := o.iters(size)
		sd := p.sd[0]
		rn := &run{s: p.s}
		posted, done := 0, 0
		inflight := 0 // posted by the CPU, doorbell not yet at the NIC, or not completed
		var end sim.Time
		postMore := func() {
			k := min(o.TxDepth-inflight, iters-posted)
			if k <= 0 {
				return
			}
			wrs := make([]nic.WR, k)
			for j := range wrs {
				wrs[j] = nic.WR{ID: uint64(posted + j), Op: nic.WRWrite, Signaled: true,
					Local: nic.SGE{MR: sd.mr, Len: uint64(size)}, RemoteVA: sd.remote.VA, RKey: sd.remote.RKey}
			}
			posted += k
			inflight += k
			p.s.At(p.s.Now().Add(o.PostCost), func() { sd.post(wrs, rn.fail) })
		}
		var cqes [256]nic.CQE
		pollPending := false
		sd.watchCQ(func() {
			if pollPending {
				return
			}
			pollPending = true
			p.s.At(p.s.Now().Add(o.PollCost), func() {
				pollPending = false
				k, err := sd.reap(cqes[:], "write_bw")
				if err != nil {
					rn.fail(err)
					return
				}
				done += k
				inflight -= k
				if done >= iters {
					end = p.s.Now()
					p.s.Stop()
					return
				}
				postMore()
			})
		})
		postMore()
		if err := rn.wait(); err != nil {
			return nil, err
		}
		if end == 0 {
			return nil, fmt.Errorf("perftest: write_bw size %d did not finish (QP %v, %d/%d done)", size, sd.qp.State(), done, iters)
		}
		d := end.Sub(0)
		rows = append(rows, Row{Bytes: size, Iters: iters, LatencyUs: (d / sim.Duration(iters)).Us(),
			BandwidthGBps: float64(size) * float64(iters) / d.Seconds() / 1e9})
	}
	return rows, nil
}

// AtomicLat runs the ib_atomic_lat loop (fetch-and-add): node 0 posts one
// signaled 8-byte FETCH_AND_ADD to node 1's buffer, spins on its CQ until
// the completion (which carries the old value back) arrives, and posts the
// next; latency is the full round trip per operation, averaged. Sizes are
// ignored: an atomic moves 8 bytes; the one row has Bytes 8.
func AtomicLat(o Options) ([]Row, error) {
	o.defaults()
	p, err := build(&o, 8)
	if err != nil {
		return nil, err
	}
	iters := o.iters(8)
	sd := p.sd[0]
	rn := &run{s: p.s}
	posted, done := 0, 0
	var end sim.Time
	post := func() {
		wr := nic.WR{ID: uint64(posted), Op: nic.WRFetchAdd, Signaled: true, Local: nic.SGE{MR: sd.mr, Len: 8},
			RemoteVA: sd.remote.VA, RKey: sd.remote.RKey, CompareAdd: 1}
		posted++
		p.s.At(p.s.Now().Add(o.PostCost), func() { sd.post([]nic.WR{wr}, rn.fail) })
	}
	var cqes [4]nic.CQE
	sd.watchCQ(func() {
		p.s.At(p.s.Now().Add(o.PollCost), func() {
			k, err := sd.reap(cqes[:], "atomic_lat")
			if err != nil {
				rn.fail(err)
				return
			}
			done += k
			if k == 0 || done < posted {
				return
			}
			if done >= iters {
				end = p.s.Now()
				p.s.Stop()
				return
			}
			post()
		})
	})
	post()
	if err := rn.wait(); err != nil {
		return nil, err
	}
	if end == 0 {
		return nil, fmt.Errorf("perftest: atomic_lat did not finish (QP %v, %d/%d done)", sd.qp.State(), done, iters)
	}
	if got, want := sd.remote.Region.Load64(sd.remote.Off), uint64(iters); got != want {
		return nil, fmt.Errorf("perftest: atomic_lat: target word is %d after %d fetch-adds of 1", got, want)
	}
	lat := end.Sub(0) / sim.Duration(iters)
	return []Row{{Bytes: 8, Iters: iters, LatencyUs: lat.Us(), BandwidthGBps: 8 / lat.Seconds() / 1e9}}, nil
}

// RC is the connection perftest's hosts make: path MTU mtu, ACK timeout
// code timeout, 7 transport retries, unlimited RNR retries, RNR NAK timer
// code 12.
func RC(mtu int, timeout uint8) nic.ConnParams {
	return nic.ConnParams{MTU: mtu, MinRNRTimer: 12, Timeout: timeout, RetryCnt: 7, RNRRetry: 7}
}
