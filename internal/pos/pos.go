package pos

import (
	"fmt"
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
