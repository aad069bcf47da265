package importer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type expectedTensor struct {
	Dtype  string    `json:"dtype"`
	Shape  []int     `json:"shape"`
	Values []float64 `json:"values"`
}

// readFixture decodes a fixture file into tensors by name.
func readFixture(t *testing.T, file string) map[string]*Tensor {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var ts []*Tensor
	switch filepath.Ext(file) {
	case ".npy":
		tn, err := decodeNPY(strings.TrimSuffix(file, ".npy"), b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		ts = []*Tensor{tn}
	case ".npz":
		ts, err = decodeNPZ(b)
	case ".safetensors":
		ts, err = decodeSafetensors(b)
	}
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	out := map[string]*Tensor{}
	for _, tn := range ts {
		out[tn.Name] = tn
	}
	return out
}

// TestDecodeMatchesNumPy decodes every fixture written by mkfixtures.py
// (NumPy: little and big endian, C and Fortran order, int8..int64,
// uint8..uint32, float16/32/64, .npy 1.0 and 2.0, stored and deflated
// .npz; safetensors written from its documented layout) and compares each
// tensor with the values NumPy listed in expected.json.
func TestDecodeMatchesNumPy(t *testing.T) {
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]map[string]expectedTensor
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 7 {
		t.Fatalf("expected.json lists %d files", len(want))
	}
	for file, tensors := range want {
		got := readFixture(t, file)
		if len(got) != len(tensors) {
			t.Errorf("%s: %d tensors, want %d", file, len(got), len(tensors))
		}
		for name, w := range tensors {
			g := got[name]
			if g == nil {
				t.Errorf("%s: no tensor %q", file, name)
				continue
			}
			if !slices.Equal(g.Shape, w.Shape) {
				t.Errorf("%s/%s: shape %v, want %v", file, name, g.Shape, w.Shape)
				continue
			}
			if g.Float() != (strings.HasPrefix(w.Dtype, "float")) {
				t.Errorf("%s/%s: float %v for NumPy dtype %s", file, name, g.Float(), w.Dtype)
				continue
			}
			for i, v := range w.Values {
				var gv float64
				if g.Float() {
					gv = g.Floats[i]
				} else {
					gv = float64(g.Ints[i])
				}
				tol := 0.0
				if w.Dtype == "float16" {
					tol = 1e-12 // NumPy printed the exact half value as a double
				}
				if math.Abs(gv-v) > tol {
					t.Errorf("%s/%s: element %d = %v, want %v", file, name, i, gv, v)
					break
				}
			}
		}
	}
}

func TestNPYDtypes(t *testing.T) {
	for _, tc := range []struct {
		descr string
		ok    bool
		want  string
	}{
		{"<i8", true, "int64"}, {">i4", true, "int32"}, {"|u1", true, "uint8"}, {"|i1", true, "int8"},
		{"<u2", true, "uint16"}, {">u8", true, "uint64"}, {"<f2", true, "float16"}, {">f8", true, "float64"},
		{"<f1", false, ""}, {"|i4", false, ""}, {"<c8", false, ""}, {"<b1", false, ""}, {"<i3", false, ""},
		{"i8", false, ""}, {"<U10", false, ""}, {"", false, ""},
	} {
		et, err := npyDtype(tc.descr)
		if (err == nil) != tc.ok {
			t.Errorf("npyDtype(%q) error %v, want ok=%v", tc.descr, err, tc.ok)
			continue
		}
		if tc.ok && et.String() != tc.want {
			t.Errorf("npyDtype(%q) = %s, want %s", tc.descr, et, tc.want)
		}
	}
}

func TestHalfToFloat(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float64
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125}, {0x0001, math.Ldexp(1, -24)},
		{0x7bff, 65504}, {0x0000, 0}, {0x7c00, math.Inf(1)}, {0xfc00, math.Inf(-1)},
	} {
		if got := halfToFloat(tc.h); got != tc.want {
			t.Errorf("halfToFloat(%#04x) = %v, want %v", tc.h, got, tc.want)
		}
	}
	if !math.IsNaN(halfToFloat(0x7e00)) {
		t.Error("halfToFloat(0x7e00) is not NaN")
	}
}

func TestFortranOrder(t *testing.T) {
	// A 2x3x2 array 0..11 in C order, stored column-major.
	shape := []int{2, 3, 2}
	var data []byte
	for k := range 2 {
		for j := range 3 {
			for i := range 2 {
				data = append(data, byte(i*6+j*2+k))
			}
		}
	}
	tn, err := decodeData("x", shape, elemType{kind: 'u', size: 1}, true, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range tn.Ints {
		if v != int64(i) {
			t.Fatalf("Fortran decode: %v, want 0..11", tn.Ints)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	npy := func(header string, data ...byte) []byte {
		h := header
		for (10+len(h)+1)%64 != 0 {
			h += " "
		}
		h += "\n"
		b := append([]byte(npyMagic), 1, 0, byte(len(h)), byte(len(h)>>8))
		return append(append(b, h...), data...)
	}
	st := func(header string, data ...byte) []byte {
		b := make([]byte, 8)
		b[0] = byte(len(header))
		return append(append(b, header...), data...)
	}
	for _, tc := range []struct {
		name, kind string
		in         []byte
		want       string
	}{
		{"no magic", "npy", []byte("PK\x03\x04 not npy"), "no \\x93NUMPY magic"},
		{"version 9", "npy", append([]byte(npyMagic), 9, 0, 0, 0), "version 9.0 unsupported"},
		{"header beyond file", "npy", append([]byte(npyMagic), 1, 0, 0xff, 0x7f), "exceeds the file"},
		{"short data", "npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", 1, 2, 3), "data has 3 bytes, shape [2 2] of int64 needs 32"},
		{"structured", "npy", npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }"), "unsupported value"},
		{"bad dtype", "npy", npy("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }"), `dtype "<c16" unsupported`},
		{"no shape", "npy", npy("{'descr': '<i8', 'fortran_order': False}"), "'shape' missing"},
		{"huge shape", "npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (100000, 100000, 100000), }"), "more than"},
		{"not a zip", "npz", []byte("hello"), "not a .npz (zip) archive"},
		{"st short", "st", []byte{1, 2}, "not a safetensors file"},
		{"st header too long", "st", st("{}")[:8], "exceeds the file"},
		{"st dtype", "st", st(`{"x":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)...), `tensor "x": dtype "C64" unsupported`},
		{"st offsets", "st", st(`{"x":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}`, make([]byte, 8)...), "outside the 8 data bytes"},
		{"st size", "st", st(`{"x":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)...), "data has 8 bytes, shape [2] of int64 needs 16"},
		{"st json", "st", st(`{"x":`), "safetensors header"},
	} {
		var err error
		switch tc.kind {
		case "npy":
			_, err = decodeNPY("t", tc.in)
		case "npz":
			_, err = decodeNPZ(tc.in)
		case "st":
			_, err = decodeSafetensors(tc.in)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
