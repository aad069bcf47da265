package check_test

import (
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gin/prog"
)

// progFile is rank 0 putting 8 KiB with a signal to rank 1, which runs
// recv (its ops before reading the payload with read).
func progFile(recv string) string {
	return fmt.Sprintf(`{"format":1,"nccl":"2.30","programs":[
 {"rank":0,"group":"s","threads":1,"ops":[
  {"op":"put","team":"world","peer":1,"dst":"buf","src":"buf","bytes":8192,"remote":{"kind":"inc","id":0}},
  {"op":"flush"}]},
 {"rank":1,"group":"r","threads":1,"ops":[%s
  {"op":"read","src":"buf","bytes":8192}]}]}`, recv)
}

// TestProgramFiles: a device program file is checked as its Go form is:
// reading the payload after waiting for its signal is clean, reading it
// after only sleeping is a race, on both backends.
func TestProgramFiles(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		for _, tc := range []struct {
			recv string
			race int64
		}{
			{`{"op":"wait_signal","id":0,"least":1},`, 0},
			{`{"op":"sleep","ps":40000000},`, 1},
		} {
			f, err := prog.Decode([]byte(progFile(tc.recv)))
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, backend, 1)
			c := check.New()
			e.Observe(c)
			if _, err := prog.Launch(e.Dev, f); err != nil {
				t.Fatal(err)
			}
			if err := e.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			c.End(false)
			if r := c.Report(); c.Count(check.Race) != tc.race || int64(r.Violations) != tc.race || r.Reads != 1 {
				t.Errorf("%s, %s: %+v", backend, tc.recv, r)
			}
		}
	}
	// A read past the window fails the run like any out-of-bounds access.
	f, err := prog.Decode([]byte(`{"format":1,"nccl":"2.30","programs":[{"rank":1,"group":"r","threads":1,"ops":[
  {"op":"read","src":"buf","src_off":8,"bytes":18446744073709551615}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "gdaki", 1)
	if _, err := prog.Launch(e.Dev, f); err != nil {
		t.Fatal(err)
	}
	if err := e.Sim.Run(); err == nil {
		t.Error("an oversized read ran")
	}
}
