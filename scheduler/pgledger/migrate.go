package pgledger

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
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

// migrationScript returns the advisory lock statement followed by every
// migration file, with {{schema}} replaced by the quoted schema.
func migrationScript(schema string) (string, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return "", fmt.Errorf("pgledger: list migrations: %w", err)
	}
	quoted := strings.NewReplacer("{{schema}}", pgx.Identifier{schema}.Sanitize())
	var b strings.Builder
	// The key is a number computed here, never user text.
	b.WriteString("SELECT pg_advisory_xact_lock(" + strconv.FormatInt(migrateLockKey(schema), 10) + ");\n")
	for _, name := range names { // fs.Glob returns names sorted
		text, err := migrations.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("pgledger: read migration %s: %w", name, err)
		}
		b.WriteString(quoted.Replace(string(text)))
		b.WriteString("\n")
	}
	return b.String(), nil
}

// migrateLockKey is the advisory lock key for migrations into schema: the
// 64-bit FNV-1a hash of "holdfast:migrate:" + schema, the same key as
// pgfence's, so pgfence and pgledger migrating into one schema at once take
// turns too (CREATE SCHEMA IF NOT EXISTS races as well).
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("holdfast:migrate:" + schema))
	return int64(h.Sum64())
}
