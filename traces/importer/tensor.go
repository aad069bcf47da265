package importer

import (
	"encoding/binary"
	"fmt"
	"math"
)

// maxElems bounds the number of elements of one tensor (1 Gi), so that a
// corrupt header cannot ask for an absurd allocation before the data size
// is checked.
const maxElems = 1 << 30

// Tensor is one decoded array, in C (row-major) order. Integer tensors fill
// Ints, floating-point tensors Floats.
type Tensor struct {
	Name   string
	Shape  []int
	Dtype  string // "int64", "uint8", "float32", ...
	Ints   []int64
	Floats []float64
}

// Float reports whether t holds floating-point values.
func (t *Tensor) Float() bool { return t.Floats != nil }

// Len returns the number of elements.
func (t *Tensor) Len() int {
	if t.Floats != nil {
		return len(t.Floats)
	}
	return len(t.Ints)
}

// elemType is a decoded element type.
type elemType struct {
	kind  byte // 'i', 'u', 'f', 'b' (bfloat16)
	size  int
	order binary.ByteOrder
}

func (e elemType) String() string {
	switch e.kind {
	case 'i':
		return fmt.Sprintf("int%d", e.size*8)
	case 'u':
		return fmt.Sprintf("uint%d", e.size*8)
	case 'b':
		return "bfloat16"
	}
	return fmt.Sprintf("float%d", e.size*8)
}

// numElems returns the product of shape, or an error if a dimension is
// negative or the product exceeds maxElems.
func numElems(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > maxElems/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, maxElems)
		}
		n *= d
	}
	return n, nil
}

// decodeData converts raw element bytes into a Tensor in C order. data must
// hold exactly numElems(shape) elements. fortran says the bytes are in
// column-major order.
func decodeData(name string, shape []int, et elemType, fortran bool, data []byte) (*Tensor, error) {
	n, err := numElems(shape)
	if err != nil {
		return nil, err
	}
	if len(data) != n*et.size {
		return nil, fmt.Errorf("data has %d bytes, shape %v of %s needs %d", len(data), shape, et, n*et.size)
	}
	t := &Tensor{Name: name, Shape: append([]int(nil), shape...), Dtype: et.String()}
	if et.kind == 'f' || et.kind == 'b' {
		t.Floats = make([]float64, n)
	} else {
		t.Ints = make([]int64, n)
	}
	idx := cOrderIndex(shape, fortran)
	for i := range n {
		b := data[i*et.size : (i+1)*et.size]
		j := i
		if idx != nil {
			j = idx(i)
		}
		switch et.kind {
		case 'i':
			t.Ints[j] = signed(b, et.order)
		case 'u':
			u := unsigned(b, et.order)
			if u > math.MaxInt64 {
				u = math.MaxInt64
			}
			t.Ints[j] = int64(u)
		case 'b':
			t.Floats[j] = float64(math.Float32frombits(uint32(et.order.Uint16(b)) << 16))
		default:
			t.Floats[j] = float(b, et.order)
		}
	}
	return t, nil
}

// cOrderIndex returns a map from the i-th element in Fortran order to its
// C-order position, or nil when the data is already in C order.
func cOrderIndex(shape []int, fortran bool) func(int) int {
	if !fortran || len(shape) < 2 {
		return nil
	}
	cstride := make([]int, len(shape))
	s := 1
	for d := len(shape) - 1; d >= 0; d-- {
		cstride[d] = s
		s *= shape[d]
	}
	return func(i int) int {
		j := 0
		for d := range shape { // Fortran: first index varies fastest
			j += (i % shape[d]) * cstride[d]
			i /= shape[d]
		}
		return j
	}
}

func unsigned(b []byte, o binary.ByteOrder) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(o.Uint16(b))
	case 4:
		return uint64(o.Uint32(b))
	}
	return o.Uint64(b)
}

func signed(b []byte, o binary.ByteOrder) int64 {
	switch len(b) {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(o.Uint16(b)))
	case 4:
		return int64(int32(o.Uint32(b)))
	}
	return int64(o.Uint64(b))
}

func float(b []byte, o binary.ByteOrder) float64 {
	switch len(b) {
	case 2:
		return halfToFloat(o.Uint16(b))
	case 4:
		return float64(math.Float32frombits(o.Uint32(b)))
	}
	return math.Float64frombits(o.Uint64(b))
}

// halfToFloat converts an IEEE 754 binary16 value.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}
