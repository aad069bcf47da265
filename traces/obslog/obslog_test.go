package obslog

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/sim/obs"
)

func sample() []obs.Event {
	return []obs.Event{
		{At: 0, Kind: obs.Issued, Op: 1, Who: "n0g0/k", Where: "put", Bytes: 8, Value: 1},
		{At: 1082650, Kind: obs.Doorbell, Op: 1, Who: "n0g0/k", Where: "gdaki/r0/c0/p1", Value: 2, Then: 1506666},
		{At: 4959032, Kind: obs.Sent, Op: 1, Who: "n0g0/nic0", QP: 256, PSN: 1, Code: 20, Index: 2},
		{At: 7060248, Kind: obs.Atomic, Op: 1, Who: "q \"quoted\"\n", Where: "sig", Addr: 8, Old: 1<<64 - 1, Value: 0},
		{At: 9, Kind: obs.Poll, Note: "gdaki credit"},
	}
}

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sample()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != len(sample()) {
		t.Fatalf("%d lines for %d events", n, len(sample()))
	}
	got, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestZeroFieldsAreLeftOut(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Observe(obs.Event{At: 3, Kind: obs.Fence})
	if got, want := b.String(), "{\"at\":3,\"kind\":\"fence\"}\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if w.Count() != 1 || w.Err() != nil {
		t.Errorf("count %d, err %v", w.Count(), w.Err())
	}
}

func TestReadErrorsNameLineAndField(t *testing.T) {
	for _, tc := range []struct {
		in    string
		line  int
		field string
	}{
		{"{\"at\":1,\"kind\":\"sent\"}\n{\"at\":2,\"kind\":\"nope\"}\n", 2, "kind"},
		{"\n\n{\"at\":-1,\"kind\":\"sent\"}\n", 3, "at"},
		{"{\"at\":1,\"kind\":\"sent\",\"then\":-5}\n", 1, "then"},
		{"{\"at\":1,\"kind\":\"sent\",\"bogus\":1}\n", 1, ""},
		{"{\"at\":1,\"kind\":\"sent\"} {}\n", 1, ""},
		{"[1,2]\n", 1, ""},
		{"{\"at\":1,\"kind\":\"none\"}\n", 1, "kind"},
	} {
		_, err := Read(strings.NewReader(tc.in))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %v, want *Error", tc.in, err)
			continue
		}
		if e.Line != tc.line || e.Field != tc.field {
			t.Errorf("%q: line %d field %q, want line %d field %q (%v)", tc.in, e.Line, e.Field, tc.line, tc.field, err)
		}
	}
}

// Whatever Read accepts, Write reproduces and Read reads back the same.
func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	if err := Write(&b, sample()); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("{\"at\":1,\"kind\":\"hop\",\"then\":2}\n\n"))
	f.Add([]byte("{\"at\":1e3,\"kind\":\"hop\"}"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, err := Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Write(&out, evs); err != nil {
			t.Fatal(err)
		}
		again, err := Read(&out)
		if err != nil {
			t.Fatalf("re-reading what Write produced: %v", err)
		}
		if len(again) != len(evs) {
			t.Fatalf("%d events, then %d", len(evs), len(again))
		}
		for i := range evs {
			if again[i] != evs[i] {
				t.Fatalf("event %d: %+v, then %+v", i, evs[i], again[i])
			}
		}
	})
}
