package pgfence

import (
	"context"
	"embed"
	"fmt"
	"github.com/holdfast-go/holdfast/internal/formatver/pgformat"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/pgmigrate"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// migrations holds the schema, one file per step, applied in name order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrate creates the schema and the guard table if they do not exist, and
// brings an existing one up to date (002 adds the scope column and makes
// (resource, scope) the primary key; 003 creates the table of closed slot
// scopes, "<table>_closed"). It returns ErrInvalidOptions for a nil
// db (a typed nil *pgxpool.Pool included). It is
// idempotent, and safe when several processes run it at once against one
// database: the whole script runs in one transaction that first takes
// pg_advisory_xact_lock on a key derived from the schema name, so concurrent
// runs take turns instead of racing on the system catalogs (CREATE ... IF NOT
// EXISTS alone fails with a unique violation on pg_type or pg_namespace when
// two sessions create the same name at once).
//
// The script is sent as one simple-protocol query without parameters, which
// Postgres runs as one implicit transaction, set to READ COMMITTED (the
// level it is designed for) whatever default_transaction_isolation is:
// under REPEATABLE READ or SERIALIZABLE a run that waited for another's
// lock would read the catalogs from before that run and redo its DDL.
// Given a pgx.Tx, it runs inside that transaction at the transaction's
// level (a REPEATABLE READ or SERIALIZABLE one may then fail when another
// process migrates at the same moment) and the lock is held until it ends.
// Migrate needs the privilege to create the schema (or its existence) and
// a table in it.
func (g *Guard) Migrate(ctx context.Context, db DBTX) error {
	if err := g.ready(); err != nil {
		return err
	}
	if safe.IsNil(db) {
		return fmt.Errorf("%w: migrate: nil database", ErrInvalidOptions)
	}
	if ctx == nil {
		return fmt.Errorf("%w: migrate: %w", ErrInvalidOptions, errfamily.ErrNilContext)
	}
	script, err := g.migrationScript()
	if err != nil {
		return err
	}
	if _, inTx := db.(pgx.Tx); !inTx {
		script = pgmigrate.OwnTransaction + script
	}
	if _, err := db.Exec(ctx, script); err != nil {
		return wrapDBError("migrate", g.schema+"."+g.table, pgformat.FromMigrate(err, store, pgx.Identifier{g.schema, g.table}.Sanitize()))
	}
	return nil
}

// migrationScript returns the advisory lock statement followed by every
// migration file, with the placeholders replaced by quoted identifiers.
func (g *Guard) migrationScript() (string, error) {
	script, err := pgmigrate.Script(migrations, g.schema, strings.NewReplacer(
		"{{schema}}", pgx.Identifier{g.schema}.Sanitize(),
		"{{table}}", pgx.Identifier{g.table}.Sanitize(),
		"{{closed}}", pgx.Identifier{g.table + ClosedTableSuffix}.Sanitize(),
	))
	if err != nil {
		return "", fmt.Errorf("pgfence: %w", err)
	}
	return script, nil
}

// Migrations returns the guard table's migrations for opts (Schema and
// Table, defaults DefaultSchema and DefaultTable) as files for a
// migration tool or a DBA, for a role that cannot run DDL: NNN_name.up.sql
// at the root (golang-migrate's names, read by atlas and goose as they
// are, with goose's annotations as SQL comments), the names filled in,
// without Migrate's advisory lock. Every file is idempotent. It returns an
// error matching ErrInvalidOptions for an invalid name. In the source
// files {{schema}}, {{table}} and {{closed}} ("<table>_closed") stand for
// the quoted names.
func Migrations(opts Options) (fs.FS, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	files, err := pgmigrate.Files(migrations, strings.NewReplacer(
		"{{schema}}", pgx.Identifier{opts.Schema}.Sanitize(),
		"{{table}}", pgx.Identifier{opts.Table}.Sanitize(),
		"{{closed}}", pgx.Identifier{opts.Table + ClosedTableSuffix}.Sanitize(),
	))
	if err != nil {
		return nil, fmt.Errorf("pgfence: %w", err)
	}
	return files, nil
}
