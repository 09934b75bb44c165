package httpfence_test

import (
	"io/fs"
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
	names, err := fs.Glob(files, "*")
	require.NoError(t, err)
	require.Equal(t, []string{"001_idempotency_keys.up.sql"}, names)
	pgtest.ApplyFiles(t, pool, files)
	pgtest.ApplyFiles(t, pool, files)
	require.Equal(t, pgtest.Columns(t, pool, migrated), pgtest.Columns(t, pool, byHand))

	_, err = pgstore.Migrations(pgstore.Options{Schema: "Bad"})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
}
