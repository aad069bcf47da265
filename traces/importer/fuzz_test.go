package importer

import (
	"os"
	"path/filepath"
	"testing"
)

func addFixtures(f *testing.F, pattern string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkTensor asserts the invariants every decoded tensor must satisfy.
func checkTensor(t *testing.T, tn *Tensor) {
	n, err := numElems(tn.Shape)
	if err != nil || n != tn.Len() {
		t.Fatalf("tensor %q: shape %v, %d elements", tn.Name, tn.Shape, tn.Len())
	}
}

func FuzzNPY(f *testing.F) {
	addFixtures(f, "*.npy")
	f.Fuzz(func(t *testing.T, b []byte) {
		tn, err := decodeNPY("x", b)
		if err == nil {
			checkTensor(t, tn)
		}
	})
}

func FuzzNPZ(f *testing.F) {
	addFixtures(f, "*.npz")
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := decodeNPZ(b)
		if err == nil {
			for _, tn := range ts {
				checkTensor(t, tn)
			}
		}
	})
}

func FuzzSafetensors(f *testing.F) {
	addFixtures(f, "*.safetensors")
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := decodeSafetensors(b)
		if err == nil {
			for _, tn := range ts {
				checkTensor(t, tn)
			}
		}
	})
}

func FuzzCSV(f *testing.F) {
	addFixtures(f, "*.csv")
	f.Add([]byte("iter,layer,rank,topk_idx_0,topk_weights_0\n0,3,1,5,0.5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bs, err := decodeCSV("x.csv", b, 16)
		if err != nil {
			return
		}
		for _, blk := range bs {
			for _, row := range blk.topk {
				for _, e := range row {
					if e < -1 || e >= 16 {
						t.Fatalf("expert %d accepted", e)
					}
				}
			}
		}
		// Whatever decodes must build a trace or fail with an error.
		o := opts(2)
		if len(bs) > 0 {
			_, _ = build(bs, o)
		}
	})
}
