package importer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// maxSafetensorsHeader bounds the JSON header (100 MB, the format's own
// limit).
const maxSafetensorsHeader = 100 << 20

// stDtypes maps safetensors dtype names to element types (always little
// endian).
var stDtypes = map[string]elemType{
	"I8": {kind: 'i', size: 1}, "I16": {kind: 'i', size: 2}, "I32": {kind: 'i', size: 4}, "I64": {kind: 'i', size: 8},
	"U8": {kind: 'u', size: 1}, "U16": {kind: 'u', size: 2}, "U32": {kind: 'u', size: 4}, "U64": {kind: 'u', size: 8},
	"F16": {kind: 'f', size: 2}, "BF16": {kind: 'b', size: 2}, "F32": {kind: 'f', size: 4}, "F64": {kind: 'f', size: 8},
}

type stEntry struct {
	Dtype   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets []int  `json:"data_offsets"`
}

// decodeSafetensors decodes every tensor of a safetensors file, sorted by
// name: an 8-byte little-endian header length N, N bytes of JSON mapping
// names to {dtype, shape, data_offsets} (plus an optional "__metadata__"),
// then the data; offsets are relative to the end of the header.
func decodeSafetensors(b []byte) ([]*Tensor, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("not a safetensors file: %d bytes", len(b))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > maxSafetensorsHeader || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("not a safetensors file: header length %d exceeds the file", n)
	}
	hdr := b[8 : 8+n]
	data := b[8+n:]
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("safetensors header: %v", err)
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		if k != "__metadata__" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []*Tensor
	for _, name := range names {
		var e stEntry
		d := json.NewDecoder(bytes.NewReader(raw[name]))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("tensor %q: header entry: %v", name, err)
		}
		et, ok := stDtypes[e.Dtype]
		if !ok {
			return nil, fmt.Errorf("tensor %q: dtype %q unsupported (want I8..I64, U8..U64, F16, BF16, F32 or F64)", name, e.Dtype)
		}
		et.order = binary.LittleEndian
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > len(data) {
			return nil, fmt.Errorf("tensor %q: data_offsets %v outside the %d data bytes", name, e.Offsets, len(data))
		}
		t, err := decodeData(name, e.Shape, et, false, data[e.Offsets[0]:e.Offsets[1]])
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}
