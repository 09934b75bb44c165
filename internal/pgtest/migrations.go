package pgtest

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// ApplyFiles runs every *.up.sql file at the root of fsys in name order,
// each as one simple-protocol Exec, as psql -f or a migration tool would:
// what a user without DDL rights for the application role hands to a DBA.
func ApplyFiles(t testing.TB, pool *pgxpool.Pool, fsys fs.FS) {
	t.Helper()
	names, err := fs.Glob(fsys, "*.up.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names, "no *.up.sql files")
	for _, name := range names {
		text, err := fs.ReadFile(fsys, name)
		require.NoError(t, err)
		_, err = pool.Exec(t.Context(), string(text))
		require.NoError(t, err, "apply %s", name)
	}
}

// Columns describes the tables of schema for comparison: one line per
// column (table, column, type, nullability, default with the schema name
// taken out) and one per constraint and index (its definition, likewise),
// and one per table comment (the stored-format marker), sorted.
func Columns(t testing.TB, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = $1
UNION ALL
SELECT tablename || ' index ' || indexdef FROM pg_indexes WHERE schemaname = $1
UNION ALL
SELECT tc.table_name || ' ' || tc.constraint_type || ' ' || pg_get_constraintdef(c.oid)
  FROM information_schema.table_constraints tc
  JOIN pg_constraint c ON c.conname = tc.constraint_name
  JOIN pg_namespace n ON n.oid = c.connamespace AND n.nspname = tc.constraint_schema
 WHERE tc.table_schema = $1
UNION ALL
SELECT c.relname || ' comment ' || obj_description(c.oid, 'pg_class')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relkind = 'r' AND obj_description(c.oid, 'pg_class') IS NOT NULL
ORDER BY 1`, schema)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		out = append(out, strings.ReplaceAll(line, schema+".", "SCHEMA."))
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out, "schema %s has no tables", schema)
	return out
}

// MigrationsMatch checks a store's exported migrations as a DBA would use
// them: files holds exactly names (in order); applied by hand in byHand,
// twice (they are idempotent, as Migrate is), they give the tables the
// store's Migrate created in migrated.
func MigrationsMatch(t testing.TB, pool *pgxpool.Pool, files fs.FS, names []string, migrated, byHand string) {
	t.Helper()
	got, err := fs.Glob(files, "*")
	require.NoError(t, err)
	require.Equal(t, names, got)
	ApplyFiles(t, pool, files)
	ApplyFiles(t, pool, files)
	require.Equal(t, Columns(t, pool, migrated), Columns(t, pool, byHand))
}
