package pgledger

import (
	"context"
	"embed"
	"fmt"
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
			return wrapDBError("migrate", "schema "+l.schema, err)
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
