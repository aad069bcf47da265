package machine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/ginsim/ginsim/internal/pos"

	"gopkg.in/yaml.v3"
)

// ErrInvalid is wrapped by every *SpecError.
var ErrInvalid = errors.New("machine: invalid cluster spec")

// SpecError locates a problem in a cluster file. Its message has the form
// "file:line:column: field \"path\": message".
type SpecError struct {
	File   string
	Line   int // 1-based; 0 when the problem is not on one line (e.g. a missing field)
	Column int // 1-based; 0 if unknown
	Field  string
	Msg    string
}

// Error formats the position, field and message.
func (e *SpecError) Error() string {
	return pos.Format(e.File, e.Line, e.Column, e.Field, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *SpecError) Unwrap() error { return ErrInvalid }

// BaseKey is the optional top-level key naming a preset that the file's
// other keys override.
const BaseKey = "base"

// LoadSpec reads and validates a cluster file. Errors name the file, the
// line and the field.
func LoadSpec(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("machine: %w", err)
	}
	return ParseSpec(b, path)
}

// ParseSpec parses and validates a cluster description; name is used in
// errors. A top-level "base: PRESET" starts from that preset.
func ParseSpec(data []byte, name string) (Spec, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		se := &SpecError{File: name}
		se.Line, se.Msg = pos.YAML(err)
		return Spec{}, se
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return Spec{}, &SpecError{File: name, Line: root.Line, Column: root.Column, Msg: "want a mapping of cluster fields"}
	}
	var spec Spec
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != BaseKey {
			continue
		}
		p, ok := Preset(v.Value)
		if !ok {
			return Spec{}, &SpecError{File: name, Line: v.Line, Column: v.Column, Field: BaseKey,
				Msg: fmt.Sprintf("unknown preset %q (have %v)", v.Value, PresetNames())}
		}
		spec = p
	}
	pos := map[string]*yaml.Node{}
	if err := decodeStruct(root, reflect.ValueOf(&spec).Elem(), "", name, pos, true); err != nil {
		return Spec{}, err
	}
	if err := spec.validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			se := &SpecError{File: name, Field: fe.Field, Msg: fe.Msg}
			if n := pos[fe.Field]; n != nil {
				se.Line, se.Column = n.Line, n.Column
			} else {
				se.Msg += " (field missing)"
			}
			return Spec{}, se
		}
		return Spec{}, &SpecError{File: name, Msg: err.Error()}
	}
	return spec, nil
}

// decodeStruct decodes mapping m into struct v field by field, so that every
// error carries the key's position and path; unknown and duplicate keys are
// errors. pos records the value node of every path decoded.
func decodeStruct(m *yaml.Node, v reflect.Value, prefix, file string, pos map[string]*yaml.Node, top bool) error {
	if m.Kind != yaml.MappingNode {
		return &SpecError{File: file, Line: m.Line, Column: m.Column, Field: strings.TrimSuffix(prefix, "."),
			Msg: "want a mapping"}
	}
	t := v.Type()
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, val := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		if seen[k.Value] {
			return &SpecError{File: file, Line: k.Line, Column: k.Column, Field: path, Msg: "duplicate key"}
		}
		seen[k.Value] = true
		if top && k.Value == BaseKey {
			continue
		}
		fi, inline := -1, -1
		var known []string
		for j := 0; j < t.NumField(); j++ {
			tag, opt, _ := strings.Cut(t.Field(j).Tag.Get("yaml"), ",")
			if tag == "" && opt == "inline" {
				inline = j
				continue
			}
			known = append(known, tag)
			if tag == k.Value {
				fi = j
			}
		}
		if fi < 0 && inline >= 0 {
			// Other keys set the inline Params.
			if err := decodeParams(k, val, v.Field(inline), prefix, file, pos); err != nil {
				return err
			}
			continue
		}
		if fi < 0 {
			if top {
				known = append(known, BaseKey)
			}
			return &SpecError{File: file, Line: k.Line, Column: k.Column, Field: path,
				Msg: fmt.Sprintf("unknown field (have %s)", strings.Join(known, ", "))}
		}
		pos[path] = val
		f := v.Field(fi)
		if f.Type() == reflect.TypeFor[Params]() {
			if val.Kind != yaml.MappingNode {
				return &SpecError{File: file, Line: val.Line, Column: val.Column, Field: path, Msg: "want a mapping of field: value"}
			}
			for j := 0; j+1 < len(val.Content); j += 2 {
				if err := decodeParams(val.Content[j], val.Content[j+1], f, path+".", file, pos); err != nil {
					return err
				}
			}
			continue
		}
		if f.Kind() == reflect.Struct && f.Addr().Type().Implements(reflect.TypeFor[yaml.Unmarshaler]()) == false {
			if err := decodeStruct(val, f, path+".", file, pos, false); err != nil {
				return err
			}
			continue
		}
		if err := val.Decode(f.Addr().Interface()); err != nil {
			msg := err.Error()
			var te *yaml.TypeError
			if errors.As(err, &te) && len(te.Errors) > 0 {
				msg = te.Errors[0]
				if _, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(msg, "line ") {
					msg = rest
				}
			}
			return &SpecError{File: file, Line: val.Line, Column: val.Column, Field: path, Msg: msg}
		}
	}
	return nil
}

// decodeParams stores key k with value val in the Params p (allocated on
// first use) under prefix; a mapping value sets a nested struct's fields
// as dotted keys. Positions go into pos.
func decodeParams(k, val *yaml.Node, p reflect.Value, prefix, file string, pos map[string]*yaml.Node) error {
	path := prefix + k.Value
	sec, _, _ := strings.Cut(prefix, ".")
	key := strings.TrimPrefix(path, sec+".")
	if p.IsNil() {
		p.Set(reflect.ValueOf(Params{}))
	}
	m := p.Interface().(Params)
	switch val.Kind {
	case yaml.MappingNode:
		for j := 0; j+1 < len(val.Content); j += 2 {
			if err := decodeParams(val.Content[j], val.Content[j+1], p, path+".", file, pos); err != nil {
				return err
			}
		}
		return nil
	case yaml.ScalarNode:
	default:
		return &SpecError{File: file, Line: val.Line, Column: val.Column, Field: path, Msg: "want a value"}
	}
	if _, dup := m[key]; dup && pos[path] != nil {
		return &SpecError{File: file, Line: k.Line, Column: k.Column, Field: path, Msg: "duplicate key"}
	}
	m[key] = val.Value
	pos[path] = val
	return nil
}

// MarshalSpec returns the YAML form of s (every field resolved).
func MarshalSpec(s Spec) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	return b.Bytes(), nil
}
