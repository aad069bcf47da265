package hw

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Exec drives two executor processes with NCCL's and the plugin's
// environment and reads back what they wrote; a stand-in script plays the
// executor (the real one needs a GPU).
func TestExecDrivesTwoRanks(t *testing.T) {
	bin := t.TempDir()
	script := `#!/bin/sh
# ginexec RANK NRANKS IDFILE OPS RESULT
{ echo "ginhw-result 1"; echo "info rank $1 nranks $2 nccl 22809 gpu fake"; echo "done ok ok"; } > "$5"
echo "$NCCL_HOSTID $GINHW_FABRIC $NCCL_NET_PLUGIN" >&2
grep -q '^ginhw-ops 1$' "$4" || exit 3
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "ginexec"), []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "libnccl-net-ginhw.so"), nil, 0o644))
	dir := t.TempDir()
	c := testCase(t, "put_signal")
	d, err := Exec(ExecConfig{Bin: bin, Dir: dir, Fabric: Fabric{Name: "h100-ib", Latency: 300000, Rate: 400e9}}, c)
	require.NoError(t, err)
	for r := range Ranks {
		require.Equal(t, r, d.Results[r].Rank)
		log, err := os.ReadFile(filepath.Join(dir, "put_signal.h100-ib.r"+string(rune('0'+r))+".log"))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(log), "host"+string(rune('A'+r))+" lat_ns=300,gbps=400,name=h100-ib /"), string(log))
	}
	out, err := d.Outcome(c)
	require.NoError(t, err)
	require.Equal(t, "not reached", out.Ranks[0].Ops[0].Status)

	_, err = Exec(ExecConfig{Bin: t.TempDir(), Dir: dir}, c)
	require.ErrorContains(t, err, "build with validate/hw/native/build.sh")
}
