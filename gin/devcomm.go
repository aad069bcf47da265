package gin

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Type is a GIN type (ncclGinType_t; values are NCCL's).
type Type int

// GIN types.
const (
	TypeNone  Type = 0
	TypeProxy Type = 2
	TypeGDAKI Type = 3
)

func (t Type) String() string {
	switch t {
	case TypeNone:
		return "none"
	case TypeProxy:
		return "proxy"
	case TypeGDAKI:
		return "gdaki"
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// ConnType is ginConnectionType (2.29.7+).
type ConnType int

// Connection types.
const (
	ConnNone ConnType = iota // no GIN
	ConnFull                 // every rank connects to every rank
	ConnRail                 // connect only within the rail team
)

func (c ConnType) String() string {
	return [...]string{"none", "full", "rail"}[c]
}

// Requirements are ncclDevCommRequirements.
type Requirements struct {
	// GinContextCount is the context hint (2.30; 0 means the initializer's
	// 4). Ignored by 2.28, which uses min(4, NCCL_GIN_NCONTEXTS).
	GinContextCount int
	// GinSignalCount and GinCounterCount are the user's indexed signals
	// and counters per context (ids from 0).
	GinSignalCount, GinCounterCount int
	// BarrierCount hybrid barriers: LSA + rail GIN + world GIN (world
	// skipped for RAIL), each ×BarrierCount.
	BarrierCount int
	// LSABarrierCount, RailGinBarrierCount, WorldGinBarrierCount: barrier
	// sessions of each kind.
	LSABarrierCount, RailGinBarrierCount, WorldGinBarrierCount int
	// GinQueueDepth is the GDAKI SQ depth (0: backend default).
	GinQueueDepth int
	// ConnectionType is ginConnectionType (2.30); ignored by 2.28.
	ConnectionType ConnType
	// StrongSignalsRequired and VASignalsRequired (2.30.5): legacy
	// SignalInc/Add are strong when StrongSignalsRequired.
	StrongSignalsRequired, VASignalsRequired bool
	// Type pins the GIN type (TypeNone: automatic).
	Type Type
}

// DevComm is a device communicator (ncclDevComm): the resources every
// rank's kernels use, created collectively.
//
// On a sim.World its run-time bookkeeping (the trackers of the signal
// rules, the waits of a deadlock report, the resets in flight) is kept
// per partition, by the partition of the rank it is about, and touched
// only from there. An update of a word on another node reaches the
// word's partition as a note a lookahead after its issue (remoteNote), so
// the two signal rules (track.go) give the verdicts of a lone Sim, found
// up to a lookahead later. The observer domain is drawn when the
// device communicator is created (or the observer installed), not on
// first use. The hook (SetHook) is called from the partition of the
// calling rank.
type DevComm struct {
	c       *Comm
	index   int    // see Index
	dom     uint64 // observer domain (obs.Bus.NewDomain), drawn on first use
	hasDom  bool
	req     Requirements
	typ     Type
	backend Backend
	gin     bool

	nConn, perConn, nCtx   int
	nReq                   int // ginContextCount as NCCL reports it (the request in 2.30)
	userSignals, signals   int
	userCounters, counters int

	railGin, worldGin barrierSet
	lsaBarriers       int
	lsaInbox          []*mem.Region // per rank: [barrier][lsa peer] 8-byte words
	lsaEpoch          []uint64      // per rank × barrier

	shadows  [][]uint64 // per rank: ctx × signals
	epochs28 [][]uint64 // 2.28 GIN barrier epochs per rank: ctx × (rail..., world...)

	parts     []devPart // by partition
	peerCache [][]int   // per rank, built on first use
	hook      Hook
}

// devPart is a device communicator's bookkeeping of the ranks of one
// partition.
type devPart struct {
	track map[trackKey]*tracker
	waits map[*gpu.Group]*waitDesc // the waits in progress
	own   map[ownKey]ResetStore    // resets whose store a group issued and has not seen land
	// ownKept is len(own) after the last sweep of the landed ones.
	ownKept int
}

// part returns the bookkeeping of world rank r's partition.
func (dc *DevComm) part(r int) *devPart {
	if len(dc.parts) == 1 {
		return &dc.parts[0]
	}
	return &dc.parts[dc.c.ranks[r].Part()]
}

// barrierSet is a block of GIN barriers on one team.
type barrierSet struct {
	base  int // first signal id
	count int // barriers
	width int // signals per barrier (team size for 2.30, 1 for 2.28)
	rail  bool
}

// Index numbers the device communicators created over the same ranks, in
// creation order from 0, whatever communicator they belong to: a backend
// names the regions of the second and later ones with it
// ("gdaki/d1/r10/c3/signals"), so that the signal tables of two
// communicators on one GPU have different names (gin/check and
// obs.Bus.LastOp tell words apart by region name and offset).
func (dc *DevComm) Index() int { return dc.index }

// RegionTag is "" for the first device communicator over its ranks and
// "d<Index>/" for the others: what a backend puts after its own prefix
// in the names of its per-communicator regions.
func (dc *DevComm) RegionTag() string {
	if dc.index == 0 {
		return ""
	}
	return "d" + strconv.Itoa(dc.index) + "/"
}

// DevCommCreate is ncclDevCommCreate: it sizes contexts and resources,
// selects the GIN type and connects the backend.
func (c *Comm) DevCommCreate(req Requirements) (*DevComm, error) {
	p := c.prof
	dc := &DevComm{c: c, req: req, parts: make([]devPart, c.parts), peerCache: make([][]int, len(c.ranks))}
	for i := range dc.parts {
		dc.parts[i] = devPart{track: make(map[trackKey]*tracker), waits: make(map[*gpu.Group]*waitDesc)}
	}
	if req.GinSignalCount < 0 || req.GinCounterCount < 0 || req.BarrierCount < 0 || req.LSABarrierCount < 0 ||
		req.RailGinBarrierCount < 0 || req.WorldGinBarrierCount < 0 || req.GinQueueDepth < 0 || req.GinContextCount < 0 {
		return nil, errors.New("gin: ncclDevCommCreate: negative requirement")
	}
	// barrierCount alone does not ask for GIN: hybrid barriers get their
	// GIN parts only when GIN is connected.
	ginRes := req.GinSignalCount > 0 || req.GinCounterCount > 0 ||
		req.RailGinBarrierCount > 0 || req.WorldGinBarrierCount > 0
	conn := req.ConnectionType
	if p.HasConnectionType {
		if ginRes && conn == ConnNone {
			return nil, errors.New("gin: ncclDevCommCreate: GIN resources requested with ginConnectionType NONE (ncclInvalidArgument)")
		}
		if conn == ConnRail && req.WorldGinBarrierCount > 0 {
			return nil, errors.New("gin: ncclDevCommCreate: worldGinBarrierCount with RAIL connections (ncclInvalidArgument)")
		}
		dc.gin = conn != ConnNone
	} else {
		if req.WorldGinBarrierCount > 0 {
			return nil, errors.New("gin: ncclDevCommCreate: worldGinBarrierCount does not exist in 2.28")
		}
		if req.GinQueueDepth > 0 {
			return nil, errors.New("gin: ncclDevCommCreate: ginQueueDepth does not exist in 2.28")
		}
		nodes := c.ranks[len(c.ranks)-1].Node != c.ranks[0].Node
		dc.gin = nodes || ginRes
		conn = ConnFull
		if !dc.gin {
			conn = ConnNone
		}
	}
	dc.req.ConnectionType = conn
	for _, r := range c.ranks {
		dc.index = max(dc.index, r.devComms)
	}
	for _, r := range c.ranks {
		r.devComms = dc.index + 1
	}
	if dc.gin {
		if err := dc.selectBackend(); err != nil {
			return nil, err
		}
		dc.sizeContexts()
	}
	// Signals: user ids first, then barrier blocks (spec 1.4).
	n := len(c.ranks)
	rail := n / c.lsaSize
	dc.userSignals, dc.signals = req.GinSignalCount, req.GinSignalCount
	dc.userCounters, dc.counters = req.GinCounterCount, req.GinCounterCount
	width := func(team int) int {
		if p.BarrierPerPeerSlots {
			return team
		}
		return 1
	}
	// 2.30: the hybrid barrier's sets come first ([0, barrierCount)), the
	// user's after them; 2.28: one shared set of max(barrierCount, x), and
	// no world GIN barriers.
	nRail := req.BarrierCount + req.RailGinBarrierCount
	nWorld := req.WorldGinBarrierCount
	if conn != ConnRail {
		nWorld += req.BarrierCount
	}
	dc.lsaBarriers = req.BarrierCount + req.LSABarrierCount
	if !p.HybridBarrierSets {
		nRail = max(req.BarrierCount, req.RailGinBarrierCount)
		nWorld = 0
		dc.lsaBarriers = max(req.BarrierCount, req.LSABarrierCount)
	}
	if !dc.gin {
		nRail, nWorld = 0, 0
	}
	dc.railGin = barrierSet{base: dc.signals, count: nRail, width: width(rail), rail: true}
	dc.signals += nRail * dc.railGin.width
	dc.worldGin = barrierSet{base: dc.signals, count: nWorld, width: width(n)}
	dc.signals += nWorld * dc.worldGin.width
	if !dc.gin {
		dc.signals, dc.counters = 0, 0
	}
	// LSA barriers: unicast inboxes in each rank's resource buffer.
	if dc.lsaBarriers > 0 {
		dc.lsaInbox = make([]*mem.Region, n)
		dc.lsaEpoch = make([]uint64, n*dc.lsaBarriers)
		for i, r := range c.ranks {
			dc.lsaInbox[i] = r.GPU.Alloc(fmt.Sprintf("devcomm%d/lsabar/r%d", len(c.devs), i), sim.Bytes(dc.lsaBarriers*c.lsaSize*8), false)
		}
	}
	dc.shadows = make([][]uint64, n)
	dc.epochs28 = make([][]uint64, n)
	for i := range dc.shadows {
		dc.shadows[i] = make([]uint64, dc.nCtx*dc.signals)
		dc.epochs28[i] = make([]uint64, dc.nCtx*(nRail+nWorld))
	}
	c.devs = append(c.devs, dc)
	if c.obs != nil && c.parts > 1 {
		dc.domain()
	}
	if dc.backend != nil {
		if err := dc.backend.Connect(dc); err != nil {
			c.devs = c.devs[:len(c.devs)-1]
			return nil, fmt.Errorf("gin: ncclDevCommCreate: %s connect: %w", dc.backend.Name(), err)
		}
		for _, w := range c.windows {
			if !w.dead {
				if err := dc.backend.RegisterWindow(dc, w); err != nil {
					return nil, fmt.Errorf("gin: ncclDevCommCreate: register %v: %w", w, err)
				}
			}
		}
	}
	return dc, nil
}

// selectBackend picks the GIN type: the requirement's, else NCCL_GIN_TYPE,
// else GDAKI, else the proxy (spec 1.7).
func (dc *DevComm) selectBackend() error {
	cfg := dc.c.cfg
	want := dc.req.Type
	if want == TypeNone {
		want = cfg.ForceType
	}
	if want != TypeNone {
		b := cfg.Backends[want]
		if b == nil {
			return fmt.Errorf("gin: ncclDevCommCreate: GIN type %v is not available (ncclInvalidArgument)", want)
		}
		dc.typ, dc.backend = want, b
		return nil
	}
	for _, t := range [...]Type{TypeGDAKI, TypeProxy} {
		if b := cfg.Backends[t]; b != nil {
			dc.typ, dc.backend = t, b
			return nil
		}
	}
	return errors.New("gin: ncclDevCommCreate: GIN requested but no GIN device is available (ncclInternalError)")
}

// sizeContexts applies spec 1.5.
func (dc *DevComm) sizeContexts() {
	c := dc.c
	if !c.prof.HasConnectionType { // 2.28: contexts = connections = min(4, NCCL_GIN_NCONTEXTS)
		n := c.cfg.NContexts
		if n <= 0 {
			n = 4
		}
		dc.nCtx = min(4, n)
		dc.nConn, dc.perConn, dc.nReq = dc.nCtx, 1, dc.nCtx
		return
	}
	conn := c.cfg.NConnections
	if conn <= 0 {
		conn = 4
		for _, r := range c.ranks {
			conn = min(conn, len(r.NICs))
		}
		conn = max(conn, 1)
	}
	conn = min(conn, 4)
	hint := dc.req.GinContextCount
	if hint == 0 {
		hint = 4
	}
	dc.nConn = conn
	dc.perConn = (hint + conn - 1) / conn
	dc.nCtx = dc.perConn * conn
	dc.nReq = hint
}

// Comm returns the communicator.
func (dc *DevComm) Comm() *Comm { return dc.c }

// Requirements returns the requirements, with ConnectionType resolved.
func (dc *DevComm) Requirements() Requirements { return dc.req }

// Profile returns the version profile.
func (dc *DevComm) Profile() Profile { return dc.c.prof }

// Type returns the selected GIN type (TypeNone without GIN).
func (dc *DevComm) Type() Type { return dc.typ }

// Backend returns the GIN backend (nil without GIN).
func (dc *DevComm) Backend() Backend { return dc.backend }

// HasGin reports whether GIN is connected.
func (dc *DevComm) HasGin() bool { return dc.gin }

// ContextCount returns devComm.ginContextCount: in 2.30 the requested
// count (gin_host.cc@230 L210-222), which CreatedContexts rounds up.
func (dc *DevComm) ContextCount() int { return dc.nReq }

// CreatedContexts returns the contexts the backend creates: 2.30 rounds
// the request up to a multiple of the connections.
func (dc *DevComm) CreatedContexts() int { return dc.nCtx }

// Connections returns the GIN connections per rank.
func (dc *DevComm) Connections() int { return dc.nConn }

// ContextsPerConnection returns nContextsPerComm.
func (dc *DevComm) ContextsPerConnection() int { return dc.perConn }

// ContextOf maps a context index to (connection, context within it):
// ctx % nConnections, ctx / nConnections (spec 1.5).
func (dc *DevComm) ContextOf(ctx int) (conn, sub int) { return ctx % dc.nConn, ctx / dc.nConn }

// SignalCount returns the signals per context, barrier blocks included.
func (dc *DevComm) SignalCount() int { return dc.signals }

// UserSignalCount returns the user's signals per context.
func (dc *DevComm) UserSignalCount() int { return dc.userSignals }

// CounterCount returns the counters per context.
func (dc *DevComm) CounterCount() int { return dc.counters }

// QueueDepth returns the requested GDAKI queue depth (0: backend default).
func (dc *DevComm) QueueDepth() int { return dc.req.GinQueueDepth }

// ConnectionType returns the resolved connection type.
func (dc *DevComm) ConnectionType() ConnType { return dc.req.ConnectionType }

// Connected reports whether rank has a GIN connection to world rank peer
// (every rank under FULL; the rail team under RAIL).
func (dc *DevComm) Connected(rank, peer int) bool {
	if !dc.gin || peer < 0 || peer >= len(dc.c.ranks) {
		return false
	}
	if dc.req.ConnectionType == ConnRail {
		return rank%dc.c.lsaSize == peer%dc.c.lsaSize
	}
	return true
}

// Peers returns the world ranks rank is connected to, in order.
func (dc *DevComm) Peers(rank int) []int {
	var out []int
	for p := range dc.c.ranks {
		if dc.Connected(rank, p) {
			out = append(out, p)
		}
	}
	return out
}

// RailGinBarrierSignals returns the first signal id and the number of
// signals per barrier of the rail GIN barriers, and how many exist.
func (dc *DevComm) RailGinBarrierSignals() (base, width, count int) {
	return dc.railGin.base, dc.railGin.width, dc.railGin.count
}

// WorldGinBarrierSignals is RailGinBarrierSignals for world GIN barriers.
func (dc *DevComm) WorldGinBarrierSignals() (base, width, count int) {
	return dc.worldGin.base, dc.worldGin.width, dc.worldGin.count
}

// LSABarrierCount returns the LSA barriers (hybrid ones first).
func (dc *DevComm) LSABarrierCount() int { return dc.lsaBarriers }

// UserBarrierBase returns where the user's barriers start in the LSA and
// GIN barrier sets: after the hybrid barrier's barrierCount in 2.30, at 0
// in 2.28 (shared).
func (dc *DevComm) UserBarrierBase() int {
	if dc.c.prof.HybridBarrierSets {
		return dc.req.BarrierCount
	}
	return 0
}

// LSAInbox returns rank's LSA barrier inbox region and the offset of the
// word of barrier b written by LSA peer from.
func (dc *DevComm) LSAInbox(rank, b, from int) (*mem.Region, uint64) {
	return dc.lsaInbox[rank], uint64((b*dc.c.lsaSize + from) * 8)
}

// LSAEpoch returns a pointer to rank's epoch of LSA barrier b (kept in the
// resource buffer between sessions).
func (dc *DevComm) LSAEpoch(rank, b int) *uint64 { return &dc.lsaEpoch[rank*dc.lsaBarriers+b] }

// Team is ncclTeam: NRanks members, this rank's index Rank, and the world
// rank distance Stride between consecutive members.
type Team struct {
	NRanks, Rank, Stride int
}

// World returns ncclTeamWorld for world rank r.
func (dc *DevComm) World(r int) Team { return Team{len(dc.c.ranks), r, 1} }

// LSA returns ncclTeamLsa for world rank r.
func (dc *DevComm) LSA(r int) Team { return Team{dc.c.lsaSize, r % dc.c.lsaSize, 1} }

// Rail returns ncclTeamRail for world rank r: the ranks with the same LSA
// index on every LSA team.
func (dc *DevComm) Rail(r int) Team {
	return Team{len(dc.c.ranks) / dc.c.lsaSize, r / dc.c.lsaSize, dc.c.lsaSize}
}

// TeamRankToWorld is ncclTeamRankToWorld: the world rank of team member
// peer, seen from world rank me (a member of team).
func TeamRankToWorld(me int, team Team, peer int) int {
	return me + (peer-team.Rank)*team.Stride
}

// TeamRankIsMember is ncclTeamRankIsMember: whether world rank w belongs to
// team as seen from world rank me.
func TeamRankIsMember(me int, team Team, w int) bool {
	d := w - me
	if team.Stride == 0 || d%team.Stride != 0 {
		return false
	}
	r := team.Rank + d/team.Stride
	return r >= 0 && r < team.NRanks
}

// TeamRankToTeam is ncclTeamRankToTeam: the index in team of world rank w
// (-1 if not a member).
func TeamRankToTeam(me int, team Team, w int) int {
	if !TeamRankIsMember(me, team, w) {
		return -1
	}
	return team.Rank + (w-me)/team.Stride
}

// TeamRankToLsa returns the LSA rank of team member peer.
func (dc *DevComm) TeamRankToLsa(me int, team Team, peer int) int {
	return TeamRankToWorld(me, team, peer) % dc.c.lsaSize
}
