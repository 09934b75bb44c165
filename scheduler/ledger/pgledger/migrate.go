package pgledger

import (
	"context"
	"embed"
	"fmt"
	"github.com/holdfast-go/holdfast/internal/formatver/pgformat"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/internal/pgmigrate"
)

// migrations holds the schema, one file per step, applied in name order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrate creates the schema and the ledger's tables if they do not exist.
// It is idempotent, and safe when several processes run it at once against
// one database: the whole script runs in one transaction that first takes
// pg_advisory_xact_lock on a key derived from the schema name, the key
// pgfence.Guard.Migrate takes too, so every holdfast store migrating into
// one schema takes turns instead of racing on the system catalogs (CREATE
// ... IF NOT EXISTS alone fails with a unique violation when two sessions
// create the same name at once).
//
// Migrate needs the privilege to create the schema (or its existence) and
// tables in it.
func (l *Ledger) Migrate(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Migrate")
	}
	if err := l.ready(); err != nil {
		return err
	}
	script, err := migrationScript(l.schema)
	if err != nil {
		return err
	}
	return l.inTx(ctx, "migrate", "schema "+l.schema, func(tx pgx.Tx) error {
		// No parameters: pgx sends the script with the simple protocol,
		// which runs several statements in one call.
		if _, err := tx.Exec(ctx, script); err != nil {
			return wrapDBError("migrate", "schema "+l.schema, pgformat.FromMigrate(err, store, pgx.Identifier{l.schema, "job_runs"}.Sanitize()))
		}
		return nil
	})
}

// migrationScript returns the advisory lock statement (pgmigrate.LockKey,
// the key pgfence takes too) followed by every migration file, with
// {{schema}} replaced by the quoted schema.
func migrationScript(schema string) (string, error) {
	script, err := pgmigrate.Script(migrations, schema, strings.NewReplacer("{{schema}}", pgx.Identifier{schema}.Sanitize()))
	if err != nil {
		return "", fmt.Errorf("pgledger: %w", err)
	}
	return script, nil
}

// Migrations returns the ledger's migrations for opts.Schema as files for
// a migration tool or a DBA, for a role that cannot run DDL: NNN_name.up.sql
// at the root (golang-migrate's names, read by atlas and goose as they
// are, with goose's annotations as SQL comments), the schema already
// filled in, without Migrate's advisory lock. Every file is idempotent.
// Apply them in name order with a role that may create the schema and
// tables, then run the application with a role that may only read and
// write them (Migrate is then not needed). It returns an error matching
// ErrInvalidOptions for an invalid schema. In the source files the
// placeholder {{schema}} stands for the quoted schema.
func Migrations(opts Options) (fs.FS, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	files, err := pgmigrate.Files(migrations, strings.NewReplacer("{{schema}}", pgx.Identifier{opts.Schema}.Sanitize()))
	if err != nil {
		return nil, fmt.Errorf("pgledger: %w", err)
	}
	return files, nil
}
