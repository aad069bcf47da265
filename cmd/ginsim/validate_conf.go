package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/ginsim/ginsim/validate/hw"
)

// runConformance is `validate gin --suite conformance`: gin/verify's tests
// that the device harness can run, lowered (--lower), or judged by their
// own rules on the model and, with --backend hw, on a device run.
func runConformance(w io.Writer, backend, results, lower, fabric string, asJSON bool) error {
	ccs := hw.Conformance()
	if lower != "" {
		var cases []hw.Case
		for _, cc := range ccs {
			if cc.Skip == "" {
				cases = append(cases, cc.Case)
			}
		}
		if err := writeLoweredIn(w, lower, cases, []hw.Fabric{hw.Zero}, hw.ConfLayout); err != nil {
			return err
		}
		for _, cc := range ccs {
			if cc.Skip != "" {
				fmt.Fprintf(w, "not run on the device: %s: %s\n", cc.Test.Name, cc.Skip)
			}
		}
		return nil
	}
	if backend != "sim" && backend != "hw" {
		return Usagef("--backend: %q, want sim or hw", backend)
	}
	var fsys fs.FS
	source := ""
	if backend == "hw" {
		switch st, err := os.Stat(results); {
		case results == "":
			results = hw.ConfRun
			fallthrough
		case err != nil:
			sub, err := hw.Measured(results)
			if err == nil {
				_, err = fs.Stat(sub, "machine.txt")
			}
			if err != nil {
				return Usagef("--results: %s is neither a directory nor a committed run (%s)", results, hw.ConfRun)
			}
			fsys, source = sub, "committed run "+results
		case !st.IsDir():
			return Usagef("--results: %s is not a directory", results)
		default:
			fsys, source = os.DirFS(results), results
		}
	}
	var rows []hw.ConfVerdict
	for _, cc := range ccs {
		var dev *hw.Device
		if fsys != nil && cc.Skip == "" {
			d, err := hw.LoadDevice(fsys, cc.Case.Name, fabric)
			var pe *hw.ParseError
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case errors.As(err, &pe):
				return Usagef("--results: %v", err)
			case err != nil:
				return err
			default:
				dev = d
			}
		}
		v, err := hw.JudgeConf(cc, dev)
		if err != nil {
			return Usagef("--results: %v", err)
		}
		if backend == "sim" && v.Device == "no result" {
			v.Device = "-"
		}
		rows = append(rows, v)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Backend string           `json:"backend"`
			Results string           `json:"results,omitempty"`
			Fabric  string           `json:"fabric,omitempty"`
			Tests   []hw.ConfVerdict `json:"tests"`
		}{backend, source, fabric, rows})
	}
	fmt.Fprintf(w, "conformance suite (gin/verify), proxy backend, NCCL 2.28; model: schedule 0")
	if backend == "hw" {
		fmt.Fprintf(w, "; device: %s, emulated fabric %q", source, fabric)
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "test\tkind\tdevice\tmodel\tagree\tdetail")
	var skipped []hw.ConfVerdict
	for _, v := range rows {
		if v.Device == "not run" {
			skipped = append(skipped, v)
			continue
		}
		detail := v.DeviceWhy
		if detail == "" && v.Model != "yes" {
			detail = "model: " + v.ModelWhy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Test, v.Kind, v.Device, v.Model, v.Agree, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnot run on the device (%d):\n", len(skipped))
	for _, v := range skipped {
		fmt.Fprintf(w, "  %s [%s]: %s\n", v.Test, v.Kind, v.DeviceWhy)
	}
	return nil
}
