package pgfence

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/internal/pgmigrate"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// migrations holds the schema, one file per step, applied in name order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrate creates the schema and the guard table if they do not exist, and
// brings an existing one up to date (002 adds the scope column and makes
// (resource, scope) the primary key). It returns ErrInvalidOptions for a nil
// db (a typed nil *pgxpool.Pool included). It is
// idempotent, and safe when several processes run it at once against one
// database: the whole script runs in one transaction that first takes
// pg_advisory_xact_lock on a key derived from the schema name, so concurrent
// runs take turns instead of racing on the system catalogs (CREATE ... IF NOT
// EXISTS alone fails with a unique violation on pg_type or pg_namespace when
// two sessions create the same name at once).
//
// The script is sent as one simple-protocol query without parameters, which
// Postgres runs as one implicit transaction; given a pgx.Tx, it runs inside
// that transaction and the lock is held until it ends. Migrate needs the
// privilege to create the schema (or its existence) and a table in it.
func (g *Guard) Migrate(ctx context.Context, db DBTX) error {
	if err := g.ready(); err != nil {
		return err
	}
	if safe.IsNil(db) {
		return fmt.Errorf("%w: migrate: nil database", ErrInvalidOptions)
	}
	script, err := g.migrationScript()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, script); err != nil {
		return wrapDBError("migrate", g.schema+"."+g.table, err)
	}
	return nil
}

// migrationScript returns the advisory lock statement followed by every
// migration file, with the placeholders replaced by quoted identifiers.
func (g *Guard) migrationScript() (string, error) {
	script, err := pgmigrate.Script(migrations, g.schema, strings.NewReplacer(
		"{{schema}}", pgx.Identifier{g.schema}.Sanitize(),
		"{{table}}", pgx.Identifier{g.table}.Sanitize(),
	))
	if err != nil {
		return "", fmt.Errorf("pgfence: %w", err)
	}
	return script, nil
}
