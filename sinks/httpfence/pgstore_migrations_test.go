package httpfence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
)

// pgstore's exported migrations, applied by hand as a DBA would, give the
// table Migrate creates.
func TestPGStoreExportedMigrationsGiveMigratesTables(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	migrated, byHand := newSchema(t), newSchema(t)
	s, err := pgstore.NewStore(pool, pgstore.Options{Schema: migrated})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))

	files, err := pgstore.Migrations(pgstore.Options{Schema: byHand})
	require.NoError(t, err)
	pgtest.MigrationsMatch(t, pool, files, []string{"001_idempotency_keys.up.sql", "002_format_1.up.sql"}, migrated, byHand)

	_, err = pgstore.Migrations(pgstore.Options{Schema: "Bad"})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
}
