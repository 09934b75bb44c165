package pgledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// The exported migrations, applied by hand as a DBA would, give the
// tables Migrate creates; the ledger then works on them.
func TestExportedMigrationsGiveMigratesTables(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	migrated, byHand := newSchema(t), newSchema(t)
	l, err := pgledger.New(pool, pgledger.Options{Schema: migrated})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(ctx))

	files, err := pgledger.Migrations(pgledger.Options{Schema: byHand})
	require.NoError(t, err)
	pgtest.MigrationsMatch(t, pool, files, []string{"001_ledger.up.sql", "002_attempt_holder.up.sql", "003_pruned_before.up.sql", "004_format_1.up.sql"}, migrated, byHand)

	_, err = pgledger.Migrations(pgledger.Options{Schema: "Bad"})
	require.ErrorIs(t, err, pgledger.ErrInvalidOptions)
}
