package sweep

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzReadJSONL: any input gives rows or an error naming the line, and
// rows read back are written and read again unchanged.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"study":"s","index":0,"id":"ab","axes":{"ep":"8"},"settings":{"layers":1,"cluster":"h100-ib","mode":"ll","backend":"gdaki","nvlink":false,"seed":1,"ib_timeout":20},"cluster":{"name":"h100-ib"},"metrics":{"dispatch_us":1.5},"version":"devel"}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"id":"x","error":"boom"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ReadJSONL(bytes.NewReader(b), "f.jsonl")
		if err != nil {
			return
		}
		var out bytes.Buffer
		require.NoError(t, WriteJSONL(&out, rows))
		first := out.String()
		again, err := ReadJSONL(&out, "again.jsonl")
		require.NoError(t, err)
		require.Equal(t, len(rows), len(again))
		var out2 bytes.Buffer
		require.NoError(t, WriteJSONL(&out2, again))
		require.Equal(t, first, out2.String())
	})
}
