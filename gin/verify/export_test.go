package verify

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
)

// TestJudgeExported: Judge and Model judge as the runner does: the
// model's outcome of a guarantee is allowed, the same outcome with a
// payload byte changed is not, and a rule's run reports the violation.
func TestJudgeExported(t *testing.T) {
	tests := map[string]Test{}
	for _, x := range Suite() {
		tests[x.Name] = x
	}
	g := tests["put-signal-payload"]
	o := g.Model("proxy", gin.V2_28, Explore(0))
	bad, surprise := g.Judge(o)
	require.NoError(t, bad)
	assert.False(t, surprise)
	assert.Equal(t, Pattern(0)[:256<<10], o.B(1, 1))
	o.Res.Ops[1][1].Bytes[7] ^= 0xff
	bad, _ = g.Judge(o)
	assert.ErrorContains(t, bad, "byte 7")

	r := tests["rule-inc-add-mix"]
	bad, _ = r.Judge(r.Model("proxy", gin.V2_28, Explore(0)))
	assert.NoError(t, bad)
	bad, _ = r.Judge(&Outcome{Pattern: Pattern})
	assert.Error(t, bad, "a run without the error does not pass a rule")
	assert.Equal(t, WindowBytes, len(Pattern(1)))
}
