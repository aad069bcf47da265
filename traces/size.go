package traces

import "fmt"

// Precision is the element format of token payloads on the wire.
type Precision uint8

// Payload precisions.
const (
	FP8  Precision = iota // E4M3 with one float32 scale per 128 channels
	BF16                  // 2 bytes per channel, no scales
)

// String returns the name used in trace headers ("fp8_e4m3", "bf16").
func (p Precision) String() string {
	switch p {
	case FP8:
		return "fp8_e4m3"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// ParsePrecision parses a header dtype name: "fp8_e4m3" (or "fp8") and
// "bf16".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "fp8_e4m3", "fp8":
		return FP8, nil
	case "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("traces: unknown precision %q (want fp8_e4m3 or bf16)", s)
}

// ScaleBlock is the number of channels that share one float32 FP8 scale.
const ScaleBlock = 128

// LLHeaderBytes is the per-message header of DeepEP V1 low-latency dispatch
// (source token index plus three reserved ints).
const LLHeaderBytes = 16

// SourceMetaBytes is the per-record SourceMeta of DeepEP V1 normal kernels.
const SourceMetaBytes = 8

func align(n, a int) int { return (n + a - 1) / a * a }

// scaleBytes is the size of the FP8 scales of one token: ceil(H/128) floats.
func scaleBytes(hidden int) int { return (hidden + ScaleBlock - 1) / ScaleBlock * 4 }

func payloadBytes(hidden int, p Precision) int {
	if p == FP8 {
		return hidden + scaleBytes(hidden)
	}
	return 2 * hidden
}

// LLDispatchBytes is the size of one DeepEP V1 low-latency dispatch message
// (one per token and selected expert): 16 + H + H/32 for FP8, 16 + 2H for
// BF16. Pass the DeepEP-padded hidden (Model.DeepEPHidden).
func LLDispatchBytes(hidden int, p Precision) int { return LLHeaderBytes + payloadBytes(hidden, p) }

// LLCombineBytes is the size of one DeepEP V1 low-latency combine message:
// 2H bytes of BF16.
func LLCombineBytes(hidden int) int { return 2 * hidden }

// LLCombineLogFMTBytes approximates a LogFMT-10 combine message: 10/16 of
// BF16 plus H/128 × 4 bytes of min/max metadata, assuming every block
// compresses.
func LLCombineLogFMTBytes(hidden int) int { return 2*hidden*10/16 + scaleBytes(hidden) }

// HTDispatchBytes is the size of one DeepEP V1 normal (high-throughput)
// dispatch token record, sent once per (token, destination node):
// align16(payload + 8 SourceMeta + FP8 scales + k·4 topk_idx + k·4 weights).
func HTDispatchBytes(hidden, topK int, p Precision) int {
	n := SourceMetaBytes + 8*topK
	if p == FP8 {
		n += hidden + scaleBytes(hidden)
	} else {
		n += 2 * hidden
	}
	return align(n, 16)
}

// HTCombineBytes is the size of one DeepEP V1 normal combine record: BF16
// hidden + k·4 weights + 8 SourceMeta, aligned to 16.
func HTCombineBytes(hidden, topK int) int {
	return align(2*hidden+4*topK+SourceMetaBytes, 16)
}

// V2TokenBytes is the size of one DeepEP V2 (ElasticBuffer) token: hidden,
// scales and metadata (k·(4+4) + (1+k)·4 source-index bytes), each aligned
// to 32.
func V2TokenBytes(hidden, topK int, p Precision) int {
	n := align(8*topK+4*(1+topK), 32)
	if p == FP8 {
		return n + align(hidden, 32) + align(scaleBytes(hidden), 32)
	}
	return n + align(2*hidden, 32)
}

// LLBandwidthBytes is DeepEP's low-latency "RDMA bandwidth" numerator
// (spec 1.9): all valid selections, local ones included, times the message
// size: H + H/32 + 16 for FP8 dispatch, 2H + 16 for BF16 dispatch.
func LLBandwidthBytes(selections int64, hidden int, p Precision) int64 {
	return selections * int64(LLDispatchBytes(hidden, p))
}

// LLCombineBandwidthBytes is the low-latency combine numerator: selections
// × 2H.
func LLCombineBandwidthBytes(selections int64, hidden int) int64 {
	return selections * int64(LLCombineBytes(hidden))
}

// HTBandwidthBytes is DeepEP's high-throughput "RDMA bandwidth" numerator
// (spec 1.9): unique (token, node) pairs including the local node × 2H ×
// fp8_factor, with fp8_factor = (1 + 4/128)/2 for FP8 (so H + H/32 per
// pair) and 1 for BF16 (2H per pair, also used for combine).
func HTBandwidthBytes(tokenNodes int64, hidden int, p Precision) int64 {
	return tokenNodes * int64(payloadBytes(hidden, p))
}
