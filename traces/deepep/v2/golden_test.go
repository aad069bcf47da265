package v2_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	v2 "github.com/ginsim/ginsim/traces/deepep/v2"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt with the actual hashes")

const goldenFile = "testdata/golden.txt"

// goldenCases are the V2 runs whose outputs are pinned: both modes, both
// replaytest.Backends, with and without NVLink. nvlink false on a direct
// case is replay's RDMAOnly (the library's default is NVLink); hybrid
// forwards over NVLink whatever it says.
var goldenCases = []struct {
	name    string
	mode    string
	ep, tok int
	backend string
	nvlink  bool
}{
	{"hybrid-ep16-gdaki", replay.ModeV2Hybrid, 16, 64, replay.BackendGDAKI, true},
	{"hybrid-ep32-gdaki", replay.ModeV2Hybrid, 32, 48, replay.BackendGDAKI, true},
	// Several records per channel: forward chunks of more than one
	// record (puts with AggregateRequests in combine), tokens a
	// forwarder skips.
	{"hybrid-ep32-gdaki-long", replay.ModeV2Hybrid, 32, 384, replay.BackendGDAKI, true},
	{"hybrid-ep16-proxy", replay.ModeV2Hybrid, 16, 24, replay.BackendProxy, true},
	{"direct-ep16-gdaki", replay.ModeV2Direct, 16, 64, replay.BackendGDAKI, false},
	{"direct-ep16-nvlink", replay.ModeV2Direct, 16, 64, replay.BackendGDAKI, true},
	{"direct-ep16-proxy", replay.ModeV2Direct, 16, 24, replay.BackendProxy, false},
	{"direct-ep8-nvlink", replay.ModeV2Direct, 8, 96, replay.BackendGDAKI, true},
}

// readGolden reads name → "report timeline stats" hashes.
func readGolden(t *testing.T) map[string]string {
	f, err := os.Open(goldenFile)
	if *update && os.IsNotExist(err) {
		return map[string]string{}
	}
	require.NoError(t, err)
	defer f.Close()
	g := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		txt := sc.Text()
		if txt == "" || strings.HasPrefix(txt, "#") {
			continue
		}
		name, hashes, ok := strings.Cut(txt, " ")
		require.True(t, ok, "%s:%d: want NAME HASHES", goldenFile, line)
		g[name] = hashes
	}
	require.NoError(t, sc.Err())
	return g
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// The V2 warps give the report (JSON), the Perfetto timeline and the
// hybrid kernels' counters pinned by sha256 in testdata/golden.txt. The
// hashes were taken when every warp also existed as a process closure and
// both forms gave the same outputs; regenerate with -update only for an
// intended change, explained in its commit. They pin the sequential
// kernel, the reference.
func TestV2Golden(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	want := readGolden(t)
	got := map[string]string{}
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			tr := replaytest.TinyTrace(t, c.ep, c.tok)
			var w *v2.Hybrid
			obs := func(x replay.Workload) { w, _ = x.(*v2.Hybrid) }
			var tl, js bytes.Buffer
			tw := timeline.NewWriter(&tl)
			rep, err := replay.Run(tr, spec, replay.Options{Observe: obs, Mode: c.mode, Backend: c.backend, NVLink: c.nvlink,
				RDMAOnly: c.mode == replay.ModeV2Direct && !c.nvlink, Seed: 1, Layers: 1, TraceName: "tiny", Backends: replaytest.Backends, Timeline: tw,
				Sequential: true})
			require.NoError(t, err)
			require.NoError(t, tw.Close())
			require.NoError(t, rep.WriteJSON(&js))
			var st v2.HybridStats
			if w != nil {
				st = w.Stats()
			}
			sb, err := json.Marshal(st)
			require.NoError(t, err)
			h := fmt.Sprintf("report=%s timeline=%s stats=%s", sum256(js.Bytes()), sum256(tl.Bytes()), sum256(sb))
			got[c.name] = h
			if !*update {
				assert.Equal(t, want[c.name], h, "outputs of %s (go test -update rewrites %s)", c.name, goldenFile)
			}
		})
	}
	if !*update {
		return
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# sha256 of the report JSON, Perfetto timeline and HybridStats JSON of each TestV2Golden case.\n")
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", n, got[n])
	}
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	require.NoError(t, os.WriteFile(goldenFile, []byte(b.String()), 0o644))
}
