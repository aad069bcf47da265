package hw

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/prog"
	"github.com/ginsim/ginsim/gin/verify"
)

// ConfLayout is the layout of the conformance cases: gin/verify's 4 MiB
// window "buf", filled with verify.Pattern.
var ConfLayout = Layout{Verify: true, Bytes: verify.WindowBytes}

// ConfCase is one test of gin/verify's conformance suite as a device
// case: its program for the proxy backend under NCCL 2.28 (the device's
// 2.28.9), or why the device run cannot run it.
type ConfCase struct {
	Test verify.Test
	Case Case
	// Skip says why the device cannot run the test ("" when it can).
	Skip string
}

// Conformance returns every test of the suite, each with its program for
// the proxy backend and NCCL 2.28, and whether the device harness (two
// ranks, one process and one program each, context 0, rail GIN barriers
// only) can run it.
func Conformance() []ConfCase {
	var out []ConfCase
	for _, t := range verify.Suite() {
		cc := ConfCase{Test: t, Case: Case{Name: t.Name, Path: "gin/verify test " + t.Name}}
		s := t.Setup
		switch {
		case !slices.Contains(t.Backends, "proxy"):
			cc.Skip = fmt.Sprintf("not a proxy-backend test (%v)", t.Backends)
		case !slices.Contains(t.Versions, gin.V2_28):
			cc.Skip = "NCCL 2.30 only (the device has 2.28.9)"
		case s.FourRanks:
			cc.Skip = "four ranks (two nodes of two GPUs); the device run has two"
		case s.Contexts > 1:
			cc.Skip = fmt.Sprintf("%d GIN contexts; the executor uses context 0 only", s.Contexts)
		case s.WorldGinBarrier:
			cc.Skip = "world GIN barrier (NCCL 2.30)"
		case s.LSABarriers > 0 || s.Barriers > 0:
			cc.Skip = "LSA or hybrid barriers; each rank is its own host here"
		}
		if cc.Skip == "" {
			cc.Case.File = t.Program(gin.V2_28, "proxy")
			if _, err := SetupIn(cc.Case.File, ConfLayout); err != nil {
				var ue *UnsupportedError
				if !errors.As(err, &ue) {
					panic(err) // a suite program the lowering cannot read is a bug here
				}
				cc.Skip = ue.Error()
			}
		}
		out = append(out, cc)
	}
	return out
}

// loadReads reads the bytes of a rank's read ops (the executor's
// RESULT.reads, or RESULT.reads.gz as committed).
func loadReads(fsys fs.FS, p string, n uint64) ([]byte, error) {
	var r io.Reader
	f, err := fsys.Open(p + ".reads")
	if errors.Is(err, fs.ErrNotExist) {
		if f, err = fsys.Open(p + ".reads.gz"); err != nil {
			return nil, err
		}
		z, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, &ParseError{File: p + ".reads.gz", Msg: err.Error()}
		}
		r = z
	} else if err != nil {
		return nil, err
	} else {
		r = f
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err != nil {
		return nil, &ParseError{File: p + ".reads", Msg: err.Error()}
	}
	if uint64(len(b)) != n {
		return nil, &ParseError{File: p + ".reads", Msg: fmt.Sprintf("%d bytes, the result file says %d", len(b), n)}
	}
	return b, nil
}

// VerifyOutcome is the device run of c in the suite's shape: each op's
// value, the bytes each read op read; Err names the first op that did not
// return (a bounded wait that gave up, an op not reached).
func (d *Device) VerifyOutcome(c Case) (*verify.Outcome, error) {
	o := &verify.Outcome{Pattern: verify.Pattern, Res: &prog.Results{Ops: make([][]prog.Result, len(c.File.Programs))}}
	for pi, p := range c.File.Programs {
		res := d.Results[p.Rank]
		o.Res.Ops[pi] = make([]prog.Result, len(p.Ops))
		if len(res.Ops) > len(p.Ops) {
			return nil, fmt.Errorf("hw: %s rank %d: %d op results for a program of %d ops", c.Name, p.Rank, len(res.Ops), len(p.Ops))
		}
		var at uint64
		for i, op := range p.Ops {
			x := &o.Res.Ops[pi][i]
			if i >= len(res.Ops) {
				if o.Err == nil {
					o.Err = fmt.Errorf("rank %d op %d (%s) was not reached on the device: %s", p.Rank, i, op.Op, res.Msg)
				}
				continue
			}
			h := res.Ops[i]
			if h.Kind != execKind(op.Op) {
				return nil, fmt.Errorf("hw: %s rank %d op %d: result is a %s, the program's op a %s", c.Name, p.Rank, i, h.Kind, op.Op)
			}
			x.Done, x.Value = h.Status == "ok", h.Value
			if !x.Done && o.Err == nil {
				o.Err = fmt.Errorf("rank %d op %d (%s) %s on the device (value %d)", p.Rank, i, op.Op, h.Status, h.Value)
			}
			if op.Op == "read" {
				rd := d.Reads[p.Rank]
				if at+op.Bytes > uint64(len(rd)) {
					return nil, fmt.Errorf("hw: %s rank %d op %d: the reads file has %d bytes, want %d", c.Name, p.Rank, i, len(rd), at+op.Bytes)
				}
				x.Bytes = rd[at : at+op.Bytes]
				at += (op.Bytes + 7) &^ 7
			}
		}
		if o.Err == nil && (!res.Done || res.Stuck != "") {
			o.Err = fmt.Errorf("rank %d did not finish on the device: %s", p.Rank, res.Msg)
		}
	}
	return o, nil
}

// ConfVerdict is one conformance test judged by its own rules on the
// device and on the model (one unperturbed run of the proxy backend,
// NCCL 2.28: verify's schedule 0).
type ConfVerdict struct {
	Test string `json:"test"`
	Kind string `json:"kind"`
	// Device is "yes" (allowed; for a non-guarantee: the expected outcome),
	// "no", "surprise" (a non-guarantee's surprising outcome appeared),
	// "not reported" (a rule: NCCL checks none), "not run" or "no result".
	Device    string `json:"device"`
	DeviceWhy string `json:"device_detail,omitempty"`
	// Model is the same verdict on the model ("reported" for a rule the
	// model reports); empty when not run.
	Model    string `json:"model,omitempty"`
	ModelWhy string `json:"model_detail,omitempty"`
	// Agree is "yes", "no" or "-" (nothing to compare: not run, or a rule,
	// which NCCL does not check).
	Agree string `json:"agree"`
}

// verdict judges o by t's rules.
func verdict(t *verify.Test, o *verify.Outcome) (string, string) {
	bad, surprise := t.Judge(o)
	switch {
	case t.Kind == verify.Rule && bad == nil:
		return "reported", o.Err.Error()
	case t.Kind == verify.Rule:
		return "not reported", ""
	case bad != nil:
		return "no", bad.Error()
	case surprise:
		return "surprise", t.Allowed(o).Error()
	}
	return "yes", ""
}

// JudgeConf judges cc on the model and, when dev is not nil, on the
// device run dev (whose results lack the reads if err is not nil).
func JudgeConf(cc ConfCase, dev *Device) (ConfVerdict, error) {
	t := cc.Test
	v := ConfVerdict{Test: t.Name, Kind: t.Kind.String(), Agree: "-"}
	if cc.Skip != "" {
		v.Device, v.DeviceWhy = "not run", cc.Skip
		return v, nil
	}
	v.Model, v.ModelWhy = verdict(&t, t.Model("proxy", gin.V2_28, verify.Explore(0)))
	if dev == nil {
		v.Device = "no result"
		return v, nil
	}
	o, err := dev.VerifyOutcome(cc.Case)
	if err != nil {
		return v, err
	}
	v.Device, v.DeviceWhy = verdict(&t, o)
	bugs := 0
	for _, tr := range dev.Traces {
		if tr != nil {
			bugs += tr.Bugged
		}
	}
	if bugs > 0 {
		v.DeviceWhy += fmt.Sprintf(" (NCCL 2.28.9's proxy putValue bug seen %d time(s) by the plugin: it drops the signal; fixed in 2.29.7)", bugs)
	}
	switch t.Kind {
	case verify.Rule:
		// NCCL checks no usage rules: say what it did instead.
		v.DeviceWhy = "NCCL checks no usage rules; " + didWhat(cc.Case, dev, o)
	case verify.NonGuarantee:
		// The surprise may appear or not on one run; both are allowed.
		if v.Device != "no" && v.Model != "no" {
			v.Agree = "yes"
		} else {
			v.Agree = "no"
		}
	default:
		v.Agree = "no"
		if v.Device == v.Model {
			v.Agree = "yes"
		}
	}
	return v, nil
}

// didWhat says how a device run ended: its first op that did not return,
// or that every op returned, and the nonzero final signals.
func didWhat(c Case, dev *Device, o *verify.Outcome) string {
	var b []string
	if o.Err != nil {
		b = append(b, o.Err.Error())
	} else {
		b = append(b, "every op returned")
	}
	for r := range Ranks {
		for id, x := range dev.Results[r].Signals {
			if x != 0 {
				b = append(b, fmt.Sprintf("rank %d signal %d = %d", r, id, x))
			}
		}
	}
	for pi, p := range c.File.Programs {
		for i, op := range p.Ops {
			if op.Op == "read_signal" && i < len(o.Res.Ops[pi]) && o.Res.Ops[pi][i].Done {
				b = append(b, fmt.Sprintf("rank %d op %d read_signal = %d", p.Rank, i, o.Res.Ops[pi][i].Value))
			}
		}
	}
	return strings.Join(b, "; ")
}
