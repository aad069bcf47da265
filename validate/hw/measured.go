package hw

import (
	"embed"
	"io/fs"
)

//go:embed measured
var measured embed.FS

// DefaultRun is the committed device run `validate gin --backend hw` reads
// without --results.
const DefaultRun = "2026-12-01-h200"

// Measured returns a committed run's files.
func Measured(name string) (fs.FS, error) { return fs.Sub(measured, "measured/"+name) }

// ConfRun is the committed device run of the conformance suite
// (`validate gin --suite conformance --backend hw` without --results).
const ConfRun = "2026-12-02-h200-conformance"
