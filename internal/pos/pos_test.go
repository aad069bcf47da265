package pos

import (
	"errors"
	"io"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		file         string
		line, column int
		field, msg   string
		want         string
	}{
		{"c.yaml", 3, 7, "nics_per_gpu", "too many", `c.yaml:3:7: field "nics_per_gpu": too many`},
		{"c.yaml", 3, 0, "", "bad", "c.yaml:3: bad"},
		{"c.yaml", 0, 5, "nodes", "missing", `c.yaml: field "nodes": missing`}, // no column without a line
		{"t.jsonl", 0, 0, "", "empty file", "t.jsonl: empty file"},
		{"s.yaml", 12, 1, `a "quoted" key`, "x", `s.yaml:12:1: field "a \"quoted\" key": x`},
	} {
		if got := Format(c.file, c.line, c.column, c.field, c.msg); got != c.want {
			t.Errorf("Format(%q, %d, %d, %q, %q) = %q, want %q", c.file, c.line, c.column, c.field, c.msg, got, c.want)
		}
	}
}

func TestYAML(t *testing.T) {
	for _, c := range []struct {
		err  error
		line int
		msg  string
	}{
		{errors.New("yaml: line 3: mapping values are not allowed in this context"), 3, "mapping values are not allowed in this context"},
		{errors.New("yaml: unmarshal errors:\n  line 7: field bogus not found in type main.x"), 7, "field bogus not found in type main.x"},
		{io.EOF, 0, "empty file"},
		{errors.New("yaml: did not find expected key"), 0, "yaml: did not find expected key"},
	} {
		line, msg := YAML(c.err)
		if line != c.line || msg != c.msg {
			t.Errorf("YAML(%q) = %d, %q; want %d, %q", c.err, line, msg, c.line, c.msg)
		}
	}
}
