package fenceruletest_test

import (
	"math"
	"testing"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
)

// TestGo runs the table against fence.Accept, the reference.
func TestGo(t *testing.T) {
	t.Parallel()
	fenceruletest.Run(t, "", math.MaxUint64, fenceruletest.Go())
}

func TestGoInt64Limit(t *testing.T) {
	t.Parallel()
	fenceruletest.Run(t, "", fence.Token(math.MaxInt64), fenceruletest.Go())
}
