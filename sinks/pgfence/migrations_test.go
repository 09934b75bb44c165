package pgfence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The exported migrations, applied by hand as a DBA would, give the
// guard table Migrate creates, for a table name of one's own too.
func TestExportedMigrationsGiveMigratesTables(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	migrated, byHand := newSchema(t), newSchema(t)
	g, err := pgfence.New(pgfence.Options{Schema: migrated, Table: "guard"})
	require.NoError(t, err)
	require.NoError(t, g.Migrate(t.Context(), pool))

	files, err := pgfence.Migrations(pgfence.Options{Schema: byHand, Table: "guard"})
	require.NoError(t, err)
	pgtest.MigrationsMatch(t, pool, files, []string{"001_fence_guard.up.sql", "002_fence_guard_scope.up.sql", "003_fence_guard_closed.up.sql", "004_format_1.up.sql"}, migrated, byHand)

	_, err = pgfence.Migrations(pgfence.Options{Table: "Bad"})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
}
