package proxy_test

import (
	"testing"

	"github.com/ginsim/ginsim/gin/internal/backendtest"
)

// TestGoldenBarrier checks the timeline of a two-rank world GIN barrier.
func TestGoldenBarrier(t *testing.T) { backendtest.GoldenBarrier(t, backend, *rewrite) }
