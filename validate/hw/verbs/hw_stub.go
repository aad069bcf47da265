//go:build !(verbs && cgo && linux)

package verbs

// Built reports whether this binary has the libibverbs half.
const Built = false

// Devices lists the RDMA devices; this build has none to ask.
func Devices() ([]string, error) { return nil, ErrNotBuilt }

func run(*Options) ([]Row, error) { return nil, ErrNotBuilt }
