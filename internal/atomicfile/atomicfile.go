package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write calls fill with a writer to a temporary file next to path and renames
// it to path if fill and the close succeed; otherwise it removes the
// temporary file and returns the error. "-" writes to stdout directly.
func Write(path string, fill func(w io.Writer) error) (err error) {
	if path == "-" {
		return fill(os.Stdout)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ErrAborted can be returned by fill to abandon the write without an error
// message of its own.
var ErrAborted = errors.New("atomicfile: aborted")
