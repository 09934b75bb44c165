package pglease_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease/pglease"
)

// The exported migrations, applied by hand as a DBA would, give the
// table Migrate creates.
func TestExportedMigrationsGiveMigratesTables(t *testing.T) {
	t.Parallel()
	pool := shared.Pool(t)
	migrated, byHand := shared.Schema(t, "pglease_test_"), shared.Schema(t, "pglease_test_")
	b, err := pglease.New(pool, pglease.Options{Schema: migrated})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(t.Context()))

	files, err := pglease.Migrations(pglease.Options{Schema: byHand})
	require.NoError(t, err)
	pgtest.MigrationsMatch(t, pool, files, []string{"001_leases.up.sql", "002_leases_holder.up.sql", "003_format_1.up.sql"}, migrated, byHand)

	_, err = pglease.Migrations(pglease.Options{Schema: "Bad"})
	require.ErrorIs(t, err, pglease.ErrInvalidOptions)
}
