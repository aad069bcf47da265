package internal_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// layer is one row of the layer table: the packages at or under Prefix
// (longest prefix wins; Exact rows match one package only) sit at Tier.
// A package may depend, directly or through others, only on packages of
// its own tier or below, so every import points down the table.
type layer struct {
	prefix string
	exact  bool
	tier   int
	why    string
}

// layers is the project's layer table, lowest first. Adding a package
// needs no edit here unless it opens a new layer: it takes the tier of the
// longest prefix above it.
var layers = []layer{
	{"internal", true, 0, "the guardrail tests (test files only)"},
	{"internal/", false, 0, "leaf helpers of the edges (atomic files, worker pools, memory sampling)"},
	{"traces", true, 0, "the trace format and generators are data: no model package"},
	{"sim", false, 1, "the event kernel"},
	{"sim/mem", false, 2, "byte regions on the kernel"},
	{"fabric/roce", false, 3, "wire formats: stdlib only"},
	{"fabric/link", false, 3, "a serialising link direction (Pipe)"},
	{"fabric", false, 4, "packet network, PCIe and NVLink buses, topologies"},
	{"gpu", false, 5, "SMs, thread groups, GPU memory"},
	{"nic", false, 5, "the RC NIC and its host-side drivers"},
	{"gin", false, 6, "GIN's host and device API, backends, machines, programs"},
	{"traces/", false, 7, "output writers and the workload contract (traces/workload)"},
	{"traces/deepep", false, 8, "DeepEP's kernels as workloads"},
	{"traces/ncclbase", false, 8, "the host-initiated NCCL baseline as a workload"},
	{"traces/replay", false, 9, "the replay driver: runs the workloads"},
	{"traces/sweep", false, 10, "what-if studies: many replays"},
	{"validate", false, 11, "model against hardware"},
	{"cmd", false, 12, "the CLI"},
}

// apart are pairs of packages (by prefix) on one tier that must not depend
// on each other either way.
var apart = [][2]string{
	{"gpu", "nic"},
	{"traces/deepep", "traces/ncclbase"},
	{"traces/deepep/ll", "traces/deepep/ht"},
	{"traces/deepep/ll", "traces/deepep/v2"},
	{"traces/deepep/ht", "traces/deepep/v2"},
}

// tierOf returns the row that places a module-relative package path: an
// exact row first, else the longest prefix; ok is false when none does.
func tierOf(rel string) (best layer, ok bool) {
	for _, l := range layers {
		var match bool
		switch {
		case l.exact:
			match = rel == l.prefix
		case strings.HasSuffix(l.prefix, "/"):
			match = strings.HasPrefix(rel, l.prefix)
		default:
			match = within(rel, l.prefix)
		}
		if !match {
			continue
		}
		if l.exact {
			return l, true
		}
		if !ok || len(l.prefix) > len(best.prefix) {
			best, ok = l, true
		}
	}
	return best, ok
}

func within(rel, prefix string) bool { return rel == prefix || strings.HasPrefix(rel, prefix+"/") }

// layerViolations checks a dependency listing (package, then its
// transitive module-relative deps) against the table.
func layerViolations(deps map[string][]string) []string {
	var bad []string
	for pkg, ds := range deps {
		pl, ok := tierOf(pkg)
		if !ok {
			bad = append(bad, pkg+": no row of the layer table covers it")
			continue
		}
		for _, d := range ds {
			dl, ok := tierOf(d)
			if !ok {
				bad = append(bad, d+": no row of the layer table covers it")
				continue
			}
			if dl.tier > pl.tier {
				bad = append(bad, pkg+" (tier "+strconv.Itoa(pl.tier)+", "+pl.why+") depends on "+d+" (tier "+strconv.Itoa(dl.tier)+", "+dl.why+")")
			}
			for _, a := range apart {
				if within(pkg, a[0]) && within(d, a[1]) || within(pkg, a[1]) && within(d, a[0]) {
					bad = append(bad, pkg+" depends on "+d+": "+a[0]+" and "+a[1]+" stand side by side")
				}
			}
		}
	}
	return bad
}

// goListDeps runs `go list -deps` over the module and returns, for every
// package of the module, its transitive dependencies inside the module.
func goListDeps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg, ok := strings.CutPrefix(f[0], module+"/")
		if !ok {
			continue // the module root, if it ever has a package
		}
		var ds []string
		for _, d := range f[1:] {
			if rel, ok := strings.CutPrefix(d, module+"/"); ok {
				ds = append(ds, rel)
			}
		}
		deps[pkg] = ds
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return deps
}

// TestLayers fails on any import, direct or transitive, that points up
// the layer table (go list -deps, so an edge through a third package
// counts too).
func TestLayers(t *testing.T) {
	deps := goListDeps(t)
	if len(deps) < 10 {
		t.Fatalf("go list found only %d packages", len(deps))
	}
	for _, b := range layerViolations(deps) {
		t.Error(b)
	}
}

// TestLayerTableCatches shows the table rejecting the edges it exists to
// stop, so TestLayers cannot pass by matching nothing.
func TestLayerTableCatches(t *testing.T) {
	for _, tc := range []struct {
		pkg, dep string
		bad      bool
	}{
		{"fabric", "fabric/roce", false},
		{"fabric", "nic", true},          // the old fabric -> nic/roce edge
		{"fabric/pcie", "fabric", false}, // same tier
		{"fabric/link", "fabric", true},
		{"gpu", "fabric/pcie", false},
		{"gpu", "nic", true},
		{"nic", "gpu", true},
		{"nic", "gin", true},
		{"gin/proxy", "gin", false},
		{"gin", "traces/replay", true},
		{"traces", "sim", true},                     // the format stays data only
		{"traces/deepep/ht", "traces/replay", true}, // a workload never imports the driver
		{"traces/workload", "traces/deepep/ll", true},
		{"traces/replay", "traces/deepep/v2", false},
		{"traces/replay", "traces/sweep", true},
		{"traces/sweep", "traces/replay", false},
		{"traces/deepep/v2", "traces/deepep/ht", true},
		{"traces/ncclbase", "traces/deepep/ll", true},
		{"traces/pcap", "fabric/roce", false},
		{"sim", "sim/mem", true},
		{"validate/gpumicro", "cmd/ginsim", true},
		{"cmd/ginsim", "validate/gpumicro", false},
	} {
		got := len(layerViolations(map[string][]string{tc.pkg: {tc.dep}})) > 0
		if got != tc.bad {
			t.Errorf("%s -> %s: violation %v, want %v", tc.pkg, tc.dep, got, tc.bad)
		}
	}
}
