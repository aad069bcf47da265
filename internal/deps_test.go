// Package internal_test holds the repository's guardrail tests: import
// rules for the pure model packages and package documentation.
package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ginsim/ginsim"

// pureRoots are the single-threaded model packages: they and all their
// subpackages must stay deterministic and free of I/O.
var pureRoots = []string{"sim", "fabric", "nic", "gpu", "gin"}

// pureExempt are subtrees of pureRoots allowed to break the rules (none yet;
// the hardware backend lives under validate/hw).
var pureExempt = []string{}

// forbiddenInPure maps an import to the reason it is banned in pure packages.
var forbiddenInPure = map[string]string{
	"C":           "cgo belongs in validate/hw",
	"os/exec":     "no subprocesses in the model",
	"net":         "no real network in the model",
	"net/http":    "no real network in the model",
	"math/rand":   "use math/rand/v2 streams from sim.Rand",
	"sync":        "the model is single-threaded: no mutexes",
	"sync/atomic": "the model is single-threaded",
	"time":        "simulated time is sim.Time; wall clocks break determinism",
	"unsafe":      "keep the model memory-safe",
}

// gopacketOwners are the only packages that may import gopacket.
var gopacketOwners = []string{"traces/pcap"}

// anchors are packages excused from the doc and gopacket rules, with why.
var anchors = map[string]string{}

// pkg is one directory of Go files.
type pkg struct {
	rel   string // path relative to the module root, "." for the root
	name  string
	fset  *token.FileSet
	files map[string]*ast.File // non-test files by base name
	tests map[string]*ast.File // _test.go files by base name
}

// loadPackages parses every Go package in the module, skipping testdata,
// hidden and underscore directories and nested modules.
func loadPackages(t *testing.T) []*pkg {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	fset := token.NewFileSet()
	byDir := map[string]*pkg{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("parse %s: %v", path, err)
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		p := byDir[dir]
		if p == nil {
			p = &pkg{rel: dir, fset: fset, files: map[string]*ast.File{}, tests: map[string]*ast.File{}}
			byDir[dir] = p
		}
		if strings.HasSuffix(name, "_test.go") {
			p.tests[name] = f
		} else {
			p.files[name] = f
			p.name = f.Name.Name
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*pkg
	for _, p := range byDir {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pkg) int { return strings.Compare(a.rel, b.rel) })
	return out
}

func under(rel string, roots []string) bool {
	for _, r := range roots {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return true
		}
	}
	return false
}

func isPure(rel string) bool { return under(rel, pureRoots) && !under(rel, pureExempt) }

func sortedNames(m map[string]*ast.File) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func importPath(spec *ast.ImportSpec) string {
	p, _ := strconv.Unquote(spec.Path.Value)
	return p
}

// TestPurePackagesImports checks that the model packages import nothing that
// brings wall clocks, threads, I/O or global randomness.
func TestPurePackagesImports(t *testing.T) {
	n := 0
	for _, p := range loadPackages(t) {
		if !isPure(p.rel) {
			continue
		}
		n++
		for _, name := range sortedNames(p.files) {
			for _, spec := range p.files[name].Imports {
				path := importPath(spec)
				if why, bad := forbiddenInPure[path]; bad {
					t.Errorf("%s/%s imports %q: %s", p.rel, name, path, why)
				} else if strings.HasPrefix(path, "net/") {
					t.Errorf("%s/%s imports %q: no real network in the model", p.rel, name, path)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("found no pure model package: is the walk rooted at the module?")
	}
}

// TestPurePackagesCode scans the model packages' syntax for what an import
// list does not show: calls to time.Now (whatever the import is named) and
// go statements.
func TestPurePackagesCode(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !isPure(p.rel) {
			continue
		}
		for _, name := range sortedNames(p.files) {
			f := p.files[name]
			timeNames := map[string]bool{}
			for _, spec := range f.Imports {
				if importPath(spec) == "time" {
					n := "time"
					if spec.Name != nil {
						n = spec.Name.Name
					}
					timeNames[n] = true
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && timeNames[id.Name] && (n.Sel.Name == "Now" || n.Sel.Name == "Since" || n.Sel.Name == "Sleep") {
						t.Errorf("%s/%s:%d uses time.%s: models run on sim time", p.rel, name, p.fset.Position(n.Pos()).Line, n.Sel.Name)
					}
				case *ast.GoStmt:
					t.Errorf("%s/%s:%d starts a goroutine: models are single-threaded (use sim.Spawn)", p.rel, name, p.fset.Position(n.Pos()).Line)
				}
				return true
			})
		}
	}
}

// TestGopacketOnlyInTracesPcap keeps the packet library at the edge.
func TestGopacketOnlyInTracesPcap(t *testing.T) {
	for _, p := range loadPackages(t) {
		if _, ok := anchors[p.rel]; ok || under(p.rel, gopacketOwners) {
			continue
		}
		for _, name := range sortedNames(p.files) {
			for _, spec := range p.files[name].Imports {
				if path := importPath(spec); strings.HasPrefix(path, "github.com/gopacket/") || strings.HasPrefix(path, "github.com/google/gopacket") {
					t.Errorf("%s/%s imports %q: only %v may import gopacket", p.rel, name, path, gopacketOwners)
				}
			}
		}
	}
}

// TestPackageDocs requires a package doc comment in every package: in doc.go
// for libraries, in any file for commands.
func TestPackageDocs(t *testing.T) {
	for _, p := range loadPackages(t) {
		if len(p.files) == 0 {
			continue // test-only directory, like this one
		}
		if _, ok := anchors[p.rel]; ok {
			continue
		}
		var where []string
		for _, name := range sortedNames(p.files) {
			if f := p.files[name]; f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
				where = append(where, name)
			}
		}
		switch {
		case len(where) == 0:
			t.Errorf("%s (package %s) has no package doc comment; add a doc.go", p.rel, p.name)
		case p.name != "main" && !slices.Contains(where, "doc.go"):
			t.Errorf("%s: package doc is in %v; put it in doc.go", p.rel, where)
		case len(where) > 1:
			t.Errorf("%s: package doc comments in several files %v; keep one", p.rel, where)
		}
	}
}
