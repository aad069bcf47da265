package submit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Free hands back the machine put last, and keeps FreeCap at most: the
// ones put past it are left to the garbage collector.
func TestFreeKeepsAtMostFreeCap(t *testing.T) {
	var f Free[int]
	ms := make([]*int, FreeCap+10)
	for i := range ms {
		ms[i] = new(int)
		*ms[i] = i + 1
		f.Put(ms[i])
	}
	require.Len(t, f.list, FreeCap)
	require.Same(t, ms[FreeCap-1], f.Get(), "last in, first out; the ones past the cap were dropped")
	for range FreeCap - 1 {
		f.Get()
	}
	fresh := f.Get()
	require.Zero(t, *fresh, "an empty list gives a new zero machine")
}
