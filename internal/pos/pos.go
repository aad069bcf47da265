package pos

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// Format returns "file:line:column: field \"field\": msg", leaving out a
// line or column that is 0 (a column only follows a line) and an empty
// field.
func Format(file string, line, column int, field, msg string) string {
	s := file
	if line > 0 {
		s += ":" + strconv.Itoa(line)
		if column > 0 {
			s += ":" + strconv.Itoa(column)
		}
	}
	if field != "" {
		s += fmt.Sprintf(": field %q", field)
	}
	return s + ": " + msg
}

// yamlLine finds the line gopkg.in/yaml.v3 names in its errors: "yaml:
// line 3: ..." for a syntax error, "line 3: ..." inside "yaml: unmarshal
// errors:" for a type or unknown-field error.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// YAML splits an error of gopkg.in/yaml.v3 into the line it names (0 when
// it names none) and its message without the position: an empty document
// (io.EOF) is "empty file".
func YAML(err error) (line int, msg string) {
	if errors.Is(err, io.EOF) {
		return 0, "empty file"
	}
	msg = err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	return line, msg
}
