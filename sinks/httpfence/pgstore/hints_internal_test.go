package pgstore

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/fence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guardHints holds at most maxGuardHints fences: past it, it starts again
// with the newest.
func TestGuardHintsAreBounded(t *testing.T) {
	var g guardHints
	k := func(i int) guardHint { return guardHint{table: "t", resource: "/r" + strconv.Itoa(i), scope: "s"} }
	for i := range maxGuardHints + 10 {
		g.set(k(i), fence.Token(i+1))
		require.LessOrEqual(t, len(g.m), maxGuardHints)
	}
	last := maxGuardHints + 9
	require.True(t, g.at(k(last), fence.Token(last+1)))
	require.False(t, g.at(k(last), fence.Token(last)), "another token")
	require.False(t, g.at(k(0), 1), "dropped when the hints started again")
	g.forget(k(last))
	require.False(t, g.at(k(last), fence.Token(last+1)))
	// (table, resource, scope) are kept apart: no join of two names one.
	g.set(guardHint{table: "t", resource: "a", scope: "b:c"}, 7)
	require.False(t, g.at(guardHint{table: "t", resource: "a:b", scope: "c"}, 7))
}
