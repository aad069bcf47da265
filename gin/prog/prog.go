package prog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// FormatVersion is the version of the file format written by Encode.
const FormatVersion = 1

// File is a set of programs for one run.
type File struct {
	// Format is FormatVersion.
	Format int `json:"format"`
	// NCCL is the device API version the programs target: "2.28" or "2.30".
	NCCL string `json:"nccl"`
	// Programs, one per (rank, group).
	Programs []Program `json:"programs"`
}

// Program is what one thread group of one rank executes.
type Program struct {
	Rank    int    `json:"rank"`
	Group   string `json:"group"`
	Threads int    `json:"threads"`
	Ops     []Op   `json:"ops"`
}

// Op is one instruction. Which fields an op takes is fixed by its kind
// (see fields); absent numeric fields are 0.
type Op struct {
	Op string `json:"op"`
	// Ctx is the GIN context index (GIN ops).
	Ctx int `json:"ctx,omitempty"`
	// Team is "world", "lsa" or "rail"; Peer a rank in it.
	Team string `json:"team,omitempty"`
	Peer int    `json:"peer,omitempty"`
	// Windows by registration name, offsets and sizes in bytes.
	Dst    string `json:"dst,omitempty"`
	DstOff uint64 `json:"dst_off,omitempty"`
	Src    string `json:"src,omitempty"`
	SrcOff uint64 `json:"src_off,omitempty"`
	Bytes  uint64 `json:"bytes,omitempty"`
	// Value is the put_value value; Size its size (1, 2, 4, 8).
	Value uint64 `json:"value,omitempty"`
	Size  int    `json:"size,omitempty"`
	// Remote is the remote action of put, put_value and signal.
	Remote *Action `json:"remote,omitempty"`
	// Counter, when set on a put, is its local CounterInc.
	Counter *int `json:"counter,omitempty"`
	// Flags are "aggregate" and "skip_credit_check".
	Flags []string `json:"flags,omitempty"`
	// Release is [givenRelease, requiredRelease] scopes ("system",
	// "device", "block", "thread") when not the defaults.
	Release []string `json:"release,omitempty"`
	// ID is the signal or counter of reads, waits and resets.
	ID int `json:"id,omitempty"`
	// Least is the wait threshold; Bits the compare width (0: 64 for
	// signals, 56 for counters).
	Least uint64 `json:"least,omitempty"`
	Bits  int    `json:"bits,omitempty"`
	// Req is the request slot of flush_async (written) and wait (read).
	Req int `json:"req,omitempty"`
	// Barrier ops: kind "rail_gin", "world_gin", "lsa", "hybrid"; index;
	// all contexts; order; fence levels "put", "get", or "none". Without
	// fence a barrier takes NCCL's default: Put|Get in 2.30, none (Relaxed,
	// the only level) in 2.28.
	Kind  string   `json:"kind,omitempty"`
	Index int      `json:"index,omitempty"`
	All   bool     `json:"all,omitempty"`
	Order string   `json:"order,omitempty"`
	Fence []string `json:"fence,omitempty"`
	// Ps is the duration of sleep and compute in picoseconds.
	Ps int64 `json:"ps,omitempty"`
}

// Action is a remote action: "inc"/"add" on indexed signal ID, or
// "va_inc"/"va_add" on the word at Off of window Win.
type Action struct {
	Kind  string `json:"kind"`
	ID    int    `json:"id,omitempty"`
	Value uint64 `json:"value,omitempty"`
	Win   string `json:"win,omitempty"`
	Off   uint64 `json:"off,omitempty"`
	Weak  bool   `json:"weak,omitempty"`
}

// fields lists, per op, the fields it requires and those it may take.
var fields = map[string]struct{ need, may []string }{
	"put":              {[]string{"team"}, []string{"ctx", "peer", "dst", "dst_off", "src", "src_off", "bytes", "remote", "counter", "flags", "release"}},
	"put_value":        {[]string{"team", "dst", "size"}, []string{"ctx", "peer", "dst_off", "value", "remote", "flags", "release"}},
	"signal":           {[]string{"team", "remote"}, []string{"ctx", "peer", "flags", "release"}},
	"get":              {[]string{"team", "src", "dst"}, []string{"ctx", "peer", "src_off", "dst_off", "bytes", "flags"}},
	"flush":            {nil, []string{"ctx"}},
	"flush_async":      {[]string{"team"}, []string{"ctx", "peer", "req"}},
	"wait":             {nil, []string{"ctx", "req"}},
	"read_signal":      {nil, []string{"ctx", "id", "bits"}},
	"wait_signal":      {nil, []string{"ctx", "id", "least", "bits"}},
	"reset_signal":     {nil, []string{"ctx", "id"}},
	"read_counter":     {nil, []string{"ctx", "id", "bits"}},
	"wait_counter":     {nil, []string{"ctx", "id", "least", "bits"}},
	"reset_counter":    {nil, []string{"ctx", "id"}},
	"barrier":          {[]string{"kind"}, []string{"ctx", "index", "all", "order", "fence"}},
	"sleep":            {nil, []string{"ps"}},
	"compute":          {nil, []string{"ps"}},
	"lsa_store":        {[]string{"dst"}, []string{"peer", "dst_off", "src", "src_off", "bytes", "value", "size"}},
	"increase_shadow":  {nil, []string{"ctx", "id", "value"}},
	"wait_meet_shadow": {nil, []string{"ctx", "id", "bits"}},
	"read":             {[]string{"src"}, []string{"ctx", "src_off", "bytes"}},
	"read_va_signal":   {[]string{"dst"}, []string{"ctx", "dst_off", "bits"}},
	"wait_va_signal":   {[]string{"dst"}, []string{"ctx", "dst_off", "least", "bits"}},
}

var (
	teams    = []string{"world", "lsa", "rail"}
	actions  = []string{"inc", "add", "va_inc", "va_add"}
	flagVals = []string{"aggregate", "skip_credit_check"}
	scopes   = []string{"system", "device", "block", "thread"}
	kinds    = []string{"rail_gin", "world_gin", "lsa", "hybrid"}
	orders   = []string{"relaxed", "acquire", "release", "acq_rel"}
	fences   = []string{"put", "get", "none"}
)

// Error is a decoding error at an op (Op < 0: at the program or file).
type Error struct {
	Program int
	Op      int
	Field   string
	Msg     string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("prog: ")
	if e.Program >= 0 {
		fmt.Fprintf(&b, "program %d: ", e.Program)
	}
	if e.Op >= 0 {
		fmt.Fprintf(&b, "op %d: ", e.Op)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Decode parses and validates a file.
func Decode(data []byte) (*File, error) {
	var top struct {
		Format   int               `json:"format"`
		NCCL     string            `json:"nccl"`
		Programs []json.RawMessage `json:"programs"`
	}
	if err := strict(data, &top); err != nil {
		return nil, &Error{Program: -1, Op: -1, Msg: err.Error()}
	}
	if top.Format != FormatVersion {
		return nil, &Error{Program: -1, Op: -1, Field: "format", Msg: fmt.Sprintf("format %d, want %d", top.Format, FormatVersion)}
	}
	if top.NCCL != "2.28" && top.NCCL != "2.30" {
		return nil, &Error{Program: -1, Op: -1, Field: "nccl", Msg: fmt.Sprintf("version %q, want \"2.28\" or \"2.30\"", top.NCCL)}
	}
	f := &File{Format: top.Format, NCCL: top.NCCL}
	for pi, raw := range top.Programs {
		var p struct {
			Rank    int               `json:"rank"`
			Group   string            `json:"group"`
			Threads int               `json:"threads"`
			Ops     []json.RawMessage `json:"ops"`
		}
		if err := strict(raw, &p); err != nil {
			return nil, &Error{Program: pi, Op: -1, Msg: err.Error()}
		}
		if p.Rank < 0 {
			return nil, &Error{Program: pi, Op: -1, Field: "rank", Msg: "negative rank"}
		}
		if p.Group == "" {
			return nil, &Error{Program: pi, Op: -1, Field: "group", Msg: "missing group name"}
		}
		if p.Threads < 1 || p.Threads > 1024 {
			return nil, &Error{Program: pi, Op: -1, Field: "threads", Msg: fmt.Sprintf("%d threads, want 1..1024", p.Threads)}
		}
		prog := Program{Rank: p.Rank, Group: p.Group, Threads: p.Threads, Ops: make([]Op, 0, len(p.Ops))}
		for oi, raw := range p.Ops {
			op, err := decodeOp(raw)
			if err != nil {
				err.Program, err.Op = pi, oi
				return nil, err
			}
			prog.Ops = append(prog.Ops, op)
		}
		f.Programs = append(f.Programs, prog)
	}
	return f, nil
}

func strict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

func decodeOp(raw json.RawMessage) (Op, *Error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return Op{}, &Error{Msg: err.Error()}
	}
	var kind string
	if k, ok := keys["op"]; !ok || json.Unmarshal(k, &kind) != nil {
		return Op{}, &Error{Field: "op", Msg: "missing or not a string"}
	}
	spec, ok := fields[kind]
	if !ok {
		return Op{}, &Error{Field: "op", Msg: fmt.Sprintf("unknown op %q", kind)}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if k != "op" && !slices.Contains(spec.need, k) && !slices.Contains(spec.may, k) {
			return Op{}, &Error{Field: k, Msg: fmt.Sprintf("not a field of %s", kind)}
		}
	}
	for _, k := range spec.need {
		if _, ok := keys[k]; !ok {
			return Op{}, &Error{Field: k, Msg: fmt.Sprintf("%s needs it", kind)}
		}
	}
	var op Op
	if err := strict(raw, &op); err != nil {
		return Op{}, &Error{Field: fieldOf(err), Msg: err.Error()}
	}
	if len(op.Flags) == 0 {
		op.Flags = nil
	}
	if len(op.Fence) == 0 {
		op.Fence = nil
	}
	for _, k := range spec.need { // required means present and not empty
		empty := (k == "team" && op.Team == "") || (k == "dst" && op.Dst == "") || (k == "src" && op.Src == "") ||
			(k == "remote" && op.Remote == nil)
		if empty {
			return Op{}, &Error{Field: k, Msg: fmt.Sprintf("%s needs it (not empty)", kind)}
		}
	}
	return op, op.check()
}

// fieldOf extracts the field name of a json type error.
func fieldOf(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return te.Field
	}
	return ""
}

func enum(field, v string, set []string) *Error {
	if !slices.Contains(set, v) {
		return &Error{Field: field, Msg: fmt.Sprintf("%q is not one of %s", v, strings.Join(set, ", "))}
	}
	return nil
}

// check validates values (enums, ranges).
func (op *Op) check() *Error {
	if op.Team != "" {
		if e := enum("team", op.Team, teams); e != nil {
			return e
		}
	}
	switch {
	case op.Ctx < 0:
		return &Error{Field: "ctx", Msg: "negative"}
	case op.Peer < 0:
		return &Error{Field: "peer", Msg: "negative"}
	case op.ID < 0:
		return &Error{Field: "id", Msg: "negative"}
	case op.Req < 0:
		return &Error{Field: "req", Msg: "negative"}
	case op.Index < 0:
		return &Error{Field: "index", Msg: "negative"}
	case op.Bits < 0 || op.Bits > 64:
		return &Error{Field: "bits", Msg: fmt.Sprintf("%d, want 1..64 (0: default)", op.Bits)}
	case op.Ps < 0:
		return &Error{Field: "ps", Msg: "negative duration"}
	case op.Counter != nil && *op.Counter < 0:
		return &Error{Field: "counter", Msg: "negative"}
	}
	if op.Op == "lsa_store" && op.Size != 0 && op.Size != 8 {
		return &Error{Field: "size", Msg: fmt.Sprintf("%d, an LSA word store is 8 bytes", op.Size)}
	}
	if op.Op == "put_value" {
		if op.Size != 1 && op.Size != 2 && op.Size != 4 && op.Size != 8 {
			return &Error{Field: "size", Msg: fmt.Sprintf("%d, want 1, 2, 4 or 8", op.Size)}
		}
	}
	if op.Remote != nil {
		a := op.Remote
		if e := enum("remote.kind", a.Kind, actions); e != nil {
			return e
		}
		va := strings.HasPrefix(a.Kind, "va_")
		switch {
		case va && a.Win == "":
			return &Error{Field: "remote.win", Msg: a.Kind + " needs a window"}
		case !va && (a.Win != "" || a.Off != 0):
			return &Error{Field: "remote.win", Msg: a.Kind + " takes no window"}
		case a.ID < 0:
			return &Error{Field: "remote.id", Msg: "negative"}
		case strings.HasSuffix(a.Kind, "inc") && a.Value != 0:
			return &Error{Field: "remote.value", Msg: a.Kind + " takes no value"}
		}
	}
	for _, f := range op.Flags {
		if e := enum("flags", f, flagVals); e != nil {
			return e
		}
	}
	if op.Release != nil {
		if len(op.Release) != 2 {
			return &Error{Field: "release", Msg: "want [given, required]"}
		}
		for _, s := range op.Release {
			if e := enum("release", s, scopes); e != nil {
				return e
			}
		}
	}
	if op.Op == "barrier" {
		if e := enum("kind", op.Kind, kinds); e != nil {
			return e
		}
		if op.Order != "" {
			if e := enum("order", op.Order, orders); e != nil {
				return e
			}
		}
		for _, f := range op.Fence {
			if e := enum("fence", f, fences); e != nil {
				return e
			}
			if f == "none" && len(op.Fence) > 1 {
				return &Error{Field: "fence", Msg: "\"none\" goes alone"}
			}
		}
	}
	return nil
}

// Encode writes f as indented JSON (format FormatVersion).
func Encode(f *File) ([]byte, error) {
	g := *f
	g.Format = FormatVersion
	return json.MarshalIndent(&g, "", " ")
}
