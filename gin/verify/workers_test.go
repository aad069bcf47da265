package verify_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/verify"
	"github.com/ginsim/ginsim/internal/par"
)

// The suite's runs may go side by side: the report is the same, in the
// suite's order, for every worker count (and under -race, nothing they
// share is written).
func TestWorkersDoNotChangeTheReport(t *testing.T) {
	opt := verify.Options{Schedules: 2, Tests: []string{"put-signal-payload", "signal-exactly-once", "get-needs-flush", "barrier-sync"}}
	want := verify.NewRunner(opt).Run()
	require.NotEmpty(t, want.Tests)
	for _, w := range []int{2, 5} {
		p := par.NewPool(w)
		o := opt
		o.Exec = p.Exec
		got := verify.NewRunner(o).Run()
		p.Close()
		require.Equal(t, want, got, "%d workers", w)
	}
}
