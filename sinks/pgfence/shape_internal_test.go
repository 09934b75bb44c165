package pgfence

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// The most recent shape is only reused for the same table, key column and
// set of columns; anything else goes through the keyed cache.
func TestLastShapeIsOnlyReusedForTheSameShape(t *testing.T) {
	h := fence.Holder{Token: 1, Owner: "a"}
	table := pgx.Identifier{"s", "t"}
	shapeOf := func(tbl pgx.Identifier, key string, set map[string]any) *shape {
		t.Helper()
		sh, err := prepareWrite(Row{Table: tbl, KeyColumn: key, Key: 1}, set, h)
		require.NoError(t, err)
		return sh
	}
	a := shapeOf(table, "id", map[string]any{"a": 1})
	require.Same(t, a, shapeOf(table, "id", map[string]any{"a": 2}), "the same shape again")
	b := shapeOf(table, "id", map[string]any{"b": 1})
	require.NotSame(t, a, b)
	require.Contains(t, b.update, `"b" = $5`)
	require.NotContains(t, b.update, `"a"`)
	require.Contains(t, shapeOf(table, "id", map[string]any{"a": 1, "b": 1}).update, `"a" = $5, "b" = $6`)
	require.Contains(t, shapeOf(table, "k", map[string]any{"b": 1}).update, `"k" = $1`)
	require.Contains(t, shapeOf(pgx.Identifier{"s", "u"}, "k", map[string]any{"b": 1}).update, `"s"."u"`)

	// A caller that reuses its Identifier slice for another table.
	reused := pgx.Identifier{"s", "v"}
	require.Contains(t, shapeOf(reused, "k", map[string]any{"b": 1}).update, `"s"."v"`)
	reused[1] = "w"
	require.Contains(t, shapeOf(reused, "k", map[string]any{"b": 1}).update, `"s"."w"`)
}
