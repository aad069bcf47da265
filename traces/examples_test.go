package traces

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the embedded example traces")

// TestExamplesUpToDate regenerates every example and checks that the
// embedded file decompresses to exactly the regenerated canonical bytes.
func TestExamplesUpToDate(t *testing.T) {
	for _, name := range Examples() {
		t.Run(name, func(t *testing.T) {
			cfg, err := ExampleGenConfig(name)
			require.NoError(t, err)
			tr, err := Generate(cfg)
			require.NoError(t, err)
			if *update {
				require.NoError(t, tr.WriteFile(filepath.Join("testdata", "examples", name)))
			}
			var want bytes.Buffer
			require.NoError(t, tr.Write(&want, false))
			raw, err := exampleFS.ReadFile(exampleDir + name)
			require.NoError(t, err)
			require.Less(t, len(raw), 2<<20, "example must stay under 2 MiB")
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			require.NoError(t, err)
			got, err := io.ReadAll(zr)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want.Bytes(), got), "embedded %s drifted from its generator; run go test ./traces -run TestExamplesUpToDate -update", name)

			ex, err := OpenExample(name)
			require.NoError(t, err)
			require.Equal(t, cfg.EP, ex.EP())
			require.Equal(t, cfg.TokensPerRank, ex.Header().MaxTokensPerRank)
		})
	}
	_, err := OpenExample("nope.jsonl.gz")
	require.Error(t, err)
}
