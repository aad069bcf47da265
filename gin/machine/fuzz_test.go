package machine

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParseSpec feeds arbitrary cluster files to the loader: it must
// answer with a spec or a positioned *SpecError, never panic, and a spec it
// accepts must show (Effective) and load back to the same effective spec.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"base: h100-ib\n",
		"base: h100-ib\nnics_per_gpu: 4\npcie_switch_ports: 10\n",
		"base: h100-ib\ngpu:\n  sms: 100\nnic:\n  cc:\n    ai: 10Mb/s\n",
		"base: h800-cx7\ntopology:\n  kind: fat-tree\n  k: 8\nnvlink:\n  write_latency: 1us\n",
		"base: h100-ib\ntopology:\n  lossless: false\n  port_buffer: 4MiB\n  ecn_pmax: 0.5\n",
		"name: x\nprofile: h100\ngpus_per_node: 8\nnics_per_gpu: 1\nlink_rate: 1Gb/s\nnvlink: {bandwidth: 1Gb/s}\ntopology: {kind: single-switch}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data, "f.yaml")
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SpecError", err)
			}
			return
		}
		e, err := Effective(s)
		if err != nil {
			t.Fatalf("accepted spec has no effective form: %v", err)
		}
		b, err := MarshalSpec(e)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseSpec(b, "show.yaml")
		if err != nil {
			t.Fatalf("cluster show output does not load: %v\n%s", err, b)
		}
		e2, err := Effective(q)
		if err != nil {
			t.Fatal(err)
		}
		hp, _ := s.Hardware()
		hq, _ := q.Hardware()
		if !reflect.DeepEqual(hp, hq) {
			t.Fatalf("hardware changed through show:\n%+v\n%+v", hp, hq)
		}
		_ = e2
	})
}

// FuzzParseSize checks that every accepted size formats and parses back
// to itself.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64B", "4KiB", "1.5MiB", "7", "1GB", "0.5B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Fatalf("%q = %d formats as %q, parsed back as %d (%v)", s, n, FormatSize(n), back, err)
		}
	})
}
