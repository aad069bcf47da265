package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/ginsim/ginsim/gin/machine"
	"gopkg.in/yaml.v3"
)

// Field is a cluster field at a dotted YAML path (such as "nics_per_gpu",
// "topology.kind" or "faults.loss.host") and the value to give it. The
// alias paths "loss" and "corrupt" set both link classes of that fault.
type Field struct {
	Path  string
	Value *yaml.Node
}

// SetFields returns spec with fields set, checked once all are set as
// `cluster show` YAML would be. Errors name the field's path.
func SetFields(spec machine.Spec, fields ...Field) (machine.Spec, error) {
	if len(fields) == 0 {
		return spec, nil
	}
	b, err := machine.MarshalSpec(spec)
	if err != nil {
		return spec, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return spec, fmt.Errorf("sweep: internal error: %w", err)
	}
	for _, f := range fields {
		paths := []string{f.Path}
		switch p := strings.TrimPrefix(f.Path, "faults."); p {
		case "loss", "corrupt":
			if f.Value.Kind == yaml.ScalarNode {
				paths = []string{"faults." + p + ".host", "faults." + p + ".fabric"}
			}
		}
		for _, p := range paths {
			if err := setPath(doc.Content[0], p, f.Value); err != nil {
				return spec, err
			}
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	if err := enc.Encode(&doc); err != nil {
		return spec, fmt.Errorf("sweep: %w", err)
	}
	s, err := machine.ParseSpec(out.Bytes(), "")
	if err != nil {
		var se *machine.SpecError
		if errors.As(err, &se) {
			return spec, fmt.Errorf("cluster field %q: %s", se.Field, se.Msg)
		}
		return spec, fmt.Errorf("sweep: %w", err)
	}
	return s, nil
}

// setPath sets the value at a dotted path of mapping m, making the
// mappings on the way.
func setPath(m *yaml.Node, path string, value *yaml.Node) error {
	keys := strings.Split(path, ".")
	for i, k := range keys {
		if k == "" || m.Kind != yaml.MappingNode {
			return fmt.Errorf("cluster field %q: not a field path", path)
		}
		var v *yaml.Node
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == k {
				v = m.Content[j+1]
			}
		}
		if v == nil {
			v = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
		}
		if i == len(keys)-1 {
			c := *value
			c.Line, c.Column = 0, 0
			*v = c
			return nil
		}
		m = v
	}
	return nil
}

// ScalarNode returns a YAML node for a value written as on a command
// line ("0.1%", "100Gb/s", "3").
func ScalarNode(value string) *yaml.Node {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(value), &n); err == nil && len(n.Content) == 1 && n.Content[0].Kind == yaml.ScalarNode {
		return n.Content[0]
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
}
