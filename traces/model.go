package traces

import (
	"fmt"
	"slices"
	"strings"
)

// Model describes the MoE-relevant shape of a model (spec section 4).
// NGroup and TopKGroup are 1 for models without group-limited routing.
type Model struct {
	Name          string   // canonical name, e.g. "DeepSeek-V3"
	Aliases       []string // lower-case alternative names accepted by ModelByName
	Hidden        int      // hidden size H
	Layers        int      // total transformer layers
	MoELayers     int      // number of MoE layers
	FirstMoELayer int      // index of the first MoE layer; MoE layers are contiguous
	NumExperts    int      // routed experts per MoE layer
	SharedExperts int      // shared (always-on) experts, computed locally
	TopK          int      // routed experts per token
	NGroup        int      // expert groups of group-limited routing (1: none)
	TopKGroup     int      // groups a token may use (1 when NGroup is 1)
	FFNDim        int      // MoE expert FFN intermediate size
}

// deepEPHiddens are the hidden sizes DeepEP V1's low-latency kernels are
// compiled for (csrc/kernels/legacy/launch.cuh, SWITCH_HIDDEN).
var deepEPHiddens = []int{2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192}

// DeepEPHidden returns the hidden size DeepEP actually moves for this model:
// the smallest compiled-in size not below Hidden (gpt-oss: 2880 → 3072).
// Beyond 8192 it returns Hidden rounded up to a multiple of 128.
func (m Model) DeepEPHidden() int {
	for _, h := range deepEPHiddens {
		if h >= m.Hidden {
			return h
		}
	}
	return (m.Hidden + 127) / 128 * 128
}

// LastMoELayer returns the index of the last MoE layer.
func (m Model) LastMoELayer() int { return m.FirstMoELayer + m.MoELayers - 1 }

// GroupLimited reports whether the model's gate restricts each token to
// TopKGroup of NGroup expert groups.
func (m Model) GroupLimited() bool { return m.NGroup > 1 && m.TopKGroup < m.NGroup }

// Validate checks the internal consistency of m.
func (m Model) Validate() error {
	switch {
	case m.Name == "":
		return fmt.Errorf("traces: model: empty name")
	case m.Hidden <= 0:
		return fmt.Errorf("traces: model %s: hidden %d must be positive", m.Name, m.Hidden)
	case m.NumExperts <= 0:
		return fmt.Errorf("traces: model %s: num_experts %d must be positive", m.Name, m.NumExperts)
	case m.TopK <= 0 || m.TopK > m.NumExperts:
		return fmt.Errorf("traces: model %s: top_k %d out of range [1,%d]", m.Name, m.TopK, m.NumExperts)
	case m.MoELayers < 0 || m.FirstMoELayer < 0 || m.SharedExperts < 0:
		return fmt.Errorf("traces: model %s: negative layer or shared-expert count", m.Name)
	case m.NGroup < 1 || m.NumExperts%m.NGroup != 0:
		return fmt.Errorf("traces: model %s: n_group %d must divide num_experts %d", m.Name, m.NGroup, m.NumExperts)
	case m.TopKGroup < 1 || m.TopKGroup > m.NGroup:
		return fmt.Errorf("traces: model %s: topk_group %d out of range [1,%d]", m.Name, m.TopKGroup, m.NGroup)
	}
	return nil
}

// models is the preset table of spec section 4, sorted by Name.
var models = []Model{
	{Name: "DeepSeek-V2", Aliases: []string{"deepseek-v2", "dsv2"}, Hidden: 5120, Layers: 60, MoELayers: 59, FirstMoELayer: 1,
		NumExperts: 160, SharedExperts: 2, TopK: 6, NGroup: 8, TopKGroup: 3, FFNDim: 1536},
	{Name: "DeepSeek-V3", Aliases: []string{"deepseek-v3", "deepseek-r1", "dsv3", "deepseek-v3/r1"}, Hidden: 7168, Layers: 61, MoELayers: 58, FirstMoELayer: 3,
		NumExperts: 256, SharedExperts: 1, TopK: 8, NGroup: 8, TopKGroup: 4, FFNDim: 2048},
	{Name: "GLM-4.5", Aliases: []string{"glm-4.5", "glm4.5", "glm45"}, Hidden: 5120, Layers: 92, MoELayers: 89, FirstMoELayer: 3,
		NumExperts: 160, SharedExperts: 1, TopK: 8, NGroup: 1, TopKGroup: 1, FFNDim: 1536},
	{Name: "Kimi-K2", Aliases: []string{"kimi-k2", "kimi_k2", "kimik2"}, Hidden: 7168, Layers: 61, MoELayers: 60, FirstMoELayer: 1,
		NumExperts: 384, SharedExperts: 1, TopK: 8, NGroup: 1, TopKGroup: 1, FFNDim: 2048},
	{Name: "Mixtral-8x22B", Aliases: []string{"mixtral-8x22b", "mixtral8x22b"}, Hidden: 6144, Layers: 56, MoELayers: 56,
		NumExperts: 8, TopK: 2, NGroup: 1, TopKGroup: 1, FFNDim: 16384},
	{Name: "Mixtral-8x7B", Aliases: []string{"mixtral-8x7b", "mixtral8x7b", "mixtral"}, Hidden: 4096, Layers: 32, MoELayers: 32,
		NumExperts: 8, TopK: 2, NGroup: 1, TopKGroup: 1, FFNDim: 14336},
	{Name: "Qwen3-235B-A22B", Aliases: []string{"qwen3-235b-a22b", "qwen3-235b"}, Hidden: 4096, Layers: 94, MoELayers: 94,
		NumExperts: 128, TopK: 8, NGroup: 1, TopKGroup: 1, FFNDim: 1536},
	{Name: "Qwen3-30B-A3B", Aliases: []string{"qwen3-30b-a3b", "qwen3-30b"}, Hidden: 2048, Layers: 48, MoELayers: 48,
		NumExperts: 128, TopK: 8, NGroup: 1, TopKGroup: 1, FFNDim: 768},
	{Name: "Qwen3-Coder-480B-A35B", Aliases: []string{"qwen3-coder-480b-a35b", "qwen3-coder-480b", "qwen3-coder"}, Hidden: 6144, Layers: 62, MoELayers: 62,
		NumExperts: 160, TopK: 8, NGroup: 1, TopKGroup: 1, FFNDim: 2560},
	{Name: "gpt-oss-120b", Aliases: []string{"gpt-oss-120b", "gptoss-120b"}, Hidden: 2880, Layers: 36, MoELayers: 36,
		NumExperts: 128, TopK: 4, NGroup: 1, TopKGroup: 1, FFNDim: 2880},
	{Name: "gpt-oss-20b", Aliases: []string{"gpt-oss-20b", "gptoss-20b"}, Hidden: 2880, Layers: 24, MoELayers: 24,
		NumExperts: 32, TopK: 4, NGroup: 1, TopKGroup: 1, FFNDim: 2880},
}

// Models returns a copy of the preset table, sorted case-insensitively by
// Name.
func Models() []Model {
	out := make([]Model, len(models))
	for i, m := range models {
		m.Aliases = slices.Clone(m.Aliases)
		out[i] = m
	}
	slices.SortFunc(out, func(a, b Model) int {
		return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	return out
}

// ModelByName finds a preset by name or alias, ignoring case and treating
// '_' like '-'.
func ModelByName(name string) (Model, error) {
	key := normName(name)
	for _, m := range models {
		if normName(m.Name) == key || slices.ContainsFunc(m.Aliases, func(a string) bool { return normName(a) == key }) {
			m.Aliases = slices.Clone(m.Aliases)
			return m, nil
		}
	}
	names := make([]string, 0, len(models))
	for _, m := range Models() {
		names = append(names, m.Name)
	}
	return Model{}, fmt.Errorf("traces: unknown model %q (known: %s)", name, strings.Join(names, ", "))
}

func normName(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
}
