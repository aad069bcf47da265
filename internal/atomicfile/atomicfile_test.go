package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteReplacesOnSuccess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out.json")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	require.NoError(t, Write(p, func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*tmp*"))
	require.Empty(t, left, "temporary file left behind")
}

func TestWriteLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.json")
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, statErr := os.Stat(p)
	require.True(t, os.IsNotExist(statErr), "output must not exist after a failed write")
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "temporary file left behind")
}

func TestWriteKeepsOldFileOnFailure(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out.json")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	require.Error(t, Write(p, func(w io.Writer) error { return ErrAborted }))
	b, _ := os.ReadFile(p)
	require.Equal(t, "old", string(b))
}
