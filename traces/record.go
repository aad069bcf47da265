package traces

// Format is the value of the header's "format" field.
const Format = "moe-trace"

// Version is the trace format version this package reads and writes.
const Version = 1

// Record kinds (the "kind" field of every line).
const (
	KindHeader    = "header"
	KindPlacement = "placement"
	KindRoute     = "route"
	KindCounts    = "counts"
	KindMeasure   = "measure"
)

// Placement modes of Parallel.Placement.
const (
	// PlacementContiguous places expert slot e on rank e / (slots/ep_ranks);
	// placement records may still override individual layers.
	PlacementContiguous = "contiguous"
	// PlacementExplicit requires a placement record for every layer that
	// has route or counts records.
	PlacementExplicit = "explicit"
)

// Record is one line of a trace: *Header, *Placement, *Route, *Counts or
// *Measure.
type Record interface {
	// Kind returns the record's "kind" value.
	Kind() string
}

// Header is the first record of every trace.
type Header struct {
	Format           string      `json:"format"`
	Version          int         `json:"version"`
	Model            HeaderModel `json:"model"`
	Parallel         Parallel    `json:"parallel"`
	Dtype            Dtype       `json:"dtype"`
	Phase            string      `json:"phase"`
	MaxTokensPerRank int         `json:"max_tokens_per_rank"`
	Source           Source      `json:"source"`
}

// HeaderModel is the model description carried in a header. NumExperts and
// TopK are the values the trace's routing uses (they may differ from the
// preset, e.g. DeepEP's 288-expert low-latency test).
type HeaderModel struct {
	Name          string `json:"name"`
	Hidden        int    `json:"hidden"`
	NumExperts    int    `json:"num_experts"`
	TopK          int    `json:"top_k"`
	MoELayers     [2]int `json:"moe_layers"` // first and last MoE layer, inclusive
	SharedExperts int    `json:"shared_experts"`
	NGroup        int    `json:"n_group"`
	TopKGroup     int    `json:"topk_group"`
}

// Parallel is the expert-parallel layout of a trace.
type Parallel struct {
	EPRanks          int    `json:"ep_ranks"`
	RanksPerNode     int    `json:"ranks_per_node"`
	Placement        string `json:"placement"` // PlacementContiguous or PlacementExplicit
	RedundantExperts int    `json:"redundant_experts"`
}

// Dtype describes payload formats.
type Dtype struct {
	Dispatch   string `json:"dispatch"`    // "fp8_e4m3" or "bf16"
	ScaleBlock int    `json:"scale_block"` // 128 for fp8, 0 for bf16
	ScaleDtype string `json:"scale_dtype"` // "f32" for fp8, "" for bf16
	Combine    string `json:"combine"`     // "bf16"
}

// Source says where a trace came from.
type Source struct {
	Tool string `json:"tool"`
	Seed uint64 `json:"seed"`
}

// Placement maps every expert slot of one layer to an EP rank, and
// optionally to the logical expert the slot holds (redundant experts: EPLB
// replicas). LogicalExpert is optional, so traces without it (all traces
// written before it existed) read as before.
type Placement struct {
	Layer         int   `json:"layer"`
	ExpertToRank  []int `json:"expert_to_rank"`
	LogicalExpert []int `json:"logical_expert,omitempty"` // nil or len = slots, values in [0, num_experts)
}

// Route is the exact routing of one source rank's tokens in one
// (iteration, layer). TopK has Tokens rows of top_k expert slots; -1 marks
// a masked selection. Weights is nil or shaped like TopK.
type Route struct {
	Iter    int         `json:"iter"`
	Layer   int         `json:"layer"`
	Rank    int         `json:"rank"`
	Tokens  int         `json:"tokens"`
	TopK    [][]int32   `json:"topk"`
	Weights [][]float64 `json:"weights,omitempty"`
}

// Counts is the compact routing of one source rank in one (iteration,
// layer): selections per expert slot and distinct tokens per destination
// rank and node.
type Counts struct {
	Iter         int   `json:"iter"`
	Layer        int   `json:"layer"`
	Rank         int   `json:"rank"`
	Tokens       int   `json:"tokens"`
	ExpertTokens []int `json:"expert_tokens"` // len = slots
	RankTokens   []int `json:"rank_tokens"`   // len = ep_ranks
	NodeTokens   []int `json:"node_tokens"`   // len = nodes
}

// Measure is a published or measured timing, for validation runs. Iter,
// Layer and Rank may be -1 for "all".
type Measure struct {
	Iter    int     `json:"iter"`
	Layer   int     `json:"layer"`
	Rank    int     `json:"rank"`
	Op      string  `json:"op"`      // "dispatch", "combine", ...
	Lib     string  `json:"lib"`     // "deepep-ll", "deepep-ht", "nccl-a2a", ...
	Backend string  `json:"backend"` // "nvshmem", "gin-gdaki", "gin-proxy", ...
	US      float64 `json:"us"`      // microseconds
}

// Kind implements Record.
func (*Header) Kind() string { return KindHeader }

// Kind implements Record.
func (*Placement) Kind() string { return KindPlacement }

// Kind implements Record.
func (*Route) Kind() string { return KindRoute }

// Kind implements Record.
func (*Counts) Kind() string { return KindCounts }

// Kind implements Record.
func (*Measure) Kind() string { return KindMeasure }

// fillDefaults gives the fields a hand-written header may leave out their
// documented defaults: contiguous placement, fp8_e4m3 dispatch with f32
// scales per 128 channels, bf16 combine. Only the reader applies it; a
// header that sets the fields is read as written.
func (h *Header) fillDefaults() {
	if h.Parallel.Placement == "" {
		h.Parallel.Placement = PlacementContiguous
	}
	if h.Dtype.Dispatch == "" {
		h.Dtype.Dispatch, h.Dtype.ScaleBlock, h.Dtype.ScaleDtype = FP8.String(), ScaleBlock, "f32"
	}
	if h.Dtype.Combine == "" {
		h.Dtype.Combine = BF16.String()
	}
}

// Slots returns the number of expert slots: num_experts + redundant_experts.
func (h *Header) Slots() int { return h.Model.NumExperts + h.Parallel.RedundantExperts }

// Nodes returns the number of nodes: ceil(ep_ranks / ranks_per_node).
func (h *Header) Nodes() int {
	if h.Parallel.RanksPerNode <= 0 {
		return 0
	}
	return (h.Parallel.EPRanks + h.Parallel.RanksPerNode - 1) / h.Parallel.RanksPerNode
}

// NodeOf returns the node of an EP rank.
func (h *Header) NodeOf(rank int) int { return rank / h.Parallel.RanksPerNode }

// DispatchPrecision returns the dispatch dtype as a Precision.
func (h *Header) DispatchPrecision() (Precision, error) { return ParsePrecision(h.Dtype.Dispatch) }

// DtypeFor returns the canonical Dtype record for a dispatch precision.
func DtypeFor(p Precision) Dtype {
	if p == FP8 {
		return Dtype{Dispatch: FP8.String(), ScaleBlock: ScaleBlock, ScaleDtype: "f32", Combine: BF16.String()}
	}
	return Dtype{Dispatch: BF16.String(), Combine: BF16.String()}
}

// HeaderModelFor builds the header model block for a preset.
func HeaderModelFor(m Model) HeaderModel {
	return HeaderModel{
		Name: m.Name, Hidden: m.Hidden, NumExperts: m.NumExperts, TopK: m.TopK,
		MoELayers:     [2]int{m.FirstMoELayer, m.LastMoELayer()},
		SharedExperts: m.SharedExperts, NGroup: m.NGroup, TopKGroup: m.TopKGroup,
	}
}
