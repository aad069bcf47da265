package traces

import (
	"errors"

	"github.com/ginsim/ginsim/internal/pos"
)

// ErrInvalid is wrapped by every *Error reporting bad trace content.
var ErrInvalid = errors.New("traces: invalid trace")

// Error locates a problem in a trace file. Its message has the form
// "file:line[:column]: field \"name\": message".
type Error struct {
	File   string // file name given to the reader
	Line   int    // 1-based line; 0 when the problem is not on one line
	Column int    // 1-based byte column within the line; 0 if unknown
	Field  string // JSON field path, e.g. "topk[3][2]"; "" if none
	Msg    string
	Err    error // underlying error, if any
}

// Error formats the position, field and message.
func (e *Error) Error() string {
	return pos.Format(e.File, e.Line, e.Column, e.Field, e.Msg)
}

// Unwrap returns the underlying error, or ErrInvalid.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}
