package main

import (
	"io"

	"github.com/ginsim/ginsim/validate/hw"
)

// runConformance is `validate gin --suite conformance`.
func runConformance(w io.Writer, backend, results, lower, fabric string, asJSON bool) error {
	var cases []hw.Case
	for _, cc := range hw.Conformance() {
		if cc.Skip == "" {
			cases = append(cases, cc.Case)
		}
	}
	if lower != "" {
		return writeLoweredIn(w, lower, cases, []hw.Fabric{hw.Zero}, hw.ConfLayout)
	}
	return nil
}
