package hw

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ginsim/ginsim/gin/prog"
)

// Case is one program file, named after its base name without ".json".
type Case struct {
	Name string
	Path string
	File *prog.File
}

// LoadError is a program file that could not be read or decoded.
type LoadError struct {
	Path string
	Err  error
}

func (e *LoadError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *LoadError) Unwrap() error { return e.Err }

// Load reads a gin/prog file, or every *.json file of a directory (sorted
// by name).
func Load(path string) ([]Case, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &LoadError{path, err}
	}
	paths := []string{path}
	if st.IsDir() {
		paths, err = filepath.Glob(filepath.Join(path, "*.json"))
		if err != nil {
			return nil, &LoadError{path, err}
		}
		if len(paths) == 0 {
			return nil, &LoadError{path, fmt.Errorf("no *.json program files")}
		}
		sort.Strings(paths)
	}
	var out []Case
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, &LoadError{p, err}
		}
		f, err := prog.Decode(data)
		if err != nil {
			return nil, &LoadError{p, err}
		}
		out = append(out, Case{Name: strings.TrimSuffix(filepath.Base(p), ".json"), Path: p, File: f})
	}
	return out, nil
}
