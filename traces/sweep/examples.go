package sweep

import (
	"embed"
	"path"
	"slices"
	"strings"
)

//go:embed examples/*.yaml
var exampleFS embed.FS

// Examples lists the studies built into the binary.
func Examples() []string {
	ents, _ := exampleFS.ReadDir("examples")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Example returns a built-in study's YAML.
func Example(name string) ([]byte, bool) {
	b, err := exampleFS.ReadFile(path.Join("examples", name+".yaml"))
	return b, err == nil
}
