package pglease

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/formatver/pgformat"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/pgmigrate"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// DefaultSchema holds the lease table when Options.Schema is "". It is
// pgledger's and pgfence's default too: the three stores can share one
// schema.
const DefaultSchema = "holdfast"

// ErrInvalidOptions is returned by New for a nil DB or a Options.Schema that
// is not a lower-case SQL identifier; match it with errors.Is.
var ErrInvalidOptions = fmt.Errorf("pglease: %w", errfamily.ErrInvalidOptions)

// DB is what the backend needs from a database: batches (each statement
// of the backend is sent as BEGIN ISOLATION LEVEL READ COMMITTED, the
// statement and COMMIT in one pipelined round trip) and Migrate's script,
// each on whatever connection is free. *pgxpool.Pool satisfies it (a
// *pgx.Conn too, but it is not safe for concurrent use, and a Client
// renews from a goroutine of its own). A pgx.Tx, or a connection inside
// a transaction begun by hand, is refused at each call with
// ErrInvalidOptions: the backend commits its own transactions. Nothing is
// held on a session between calls.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Options names where the leases live. The zero Options is valid.
type Options struct {
	// Schema holds the table leases; Migrate creates both. A lower-case
	// SQL identifier. Default DefaultSchema ("holdfast").
	Schema string
	// Holder is the holder label (lease.Options.Holder: the replica's
	// name) stored in the row's holder column with each acquisition, in
	// the same statement, for views to show in place of the owner.
	// Default "" (none). leasedriver.CheckHolder's rules apply.
	Holder string
}

// identifierRE is the form accepted for Schema, as in pgledger and
// pgfence. 63 bytes is NAMEDATALEN-1.
var identifierRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Backend is a leasedriver.Backend in PostgreSQL; see the package documentation
// for the model. It holds no goroutine and is safe for concurrent use.
type Backend struct {
	db     DB
	schema string
	holder string // Options.Holder
	sql    queries
	table  string         // the lease table, quoted and schema-qualified
	format formatver.Gate // the stored format, checked on first use
	// direct is db when it also sends statements alone (a *pgxpool.Pool or
	// a *pgx.Conn does), nil otherwise; lone says whether to (see alone).
	direct queryer
	lone   pgtx.Lone
}

// queryer sends a statement on its own.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// alone returns the DB to send a statement on its own with, or nil to send
// it in a READ COMMITTED transaction of its own (pgtx.Batch). Every
// statement of the backend writes only at READ COMMITTED
// (pgtx.AtReadCommitted), so where the session's default is READ
// COMMITTED it is sent alone: the same transaction, at the same level,
// without the BEGIN and COMMIT. Once one finds another level
// (pgtx.Lone), they all go through pgtx.Batch.
func (b *Backend) alone() queryer {
	if b.direct == nil || !b.lone.Try() {
		return nil
	}
	return b.direct
}

// ready refuses, before any I/O, a nil ctx (lease.ErrNilContext) and a
// database inside a transaction begun by hand (ErrInvalidOptions): the
// backend's statements run alone or in transactions of their own, and
// would run in the caller's transaction, or commit it.
func (b *Backend) ready(ctx context.Context) error {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return err
	}
	if pgtx.InTransaction(b.db) {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, pgtx.ErrInTransaction)
	}
	return nil
}

// batch is pgtx.Batch on the backend's database: a connection inside a
// transaction begun by hand (or a pgx.Tx) is refused with
// ErrInvalidOptions, before any I/O (the batch's COMMIT would commit it).
func (b *Backend) batch(ctx context.Context, queue func(*pgx.Batch)) error {
	err := pgtx.Batch(ctx, b.db, queue)
	if errors.Is(err, pgtx.ErrInTransaction) {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return err
}

// store names the package in format markers and errors.
const store = "lease/pglease"

var (
	_ leasedriver.Backend = (*Backend)(nil)
	_ leasedriver.Labeled = (*Backend)(nil)
)

// New returns a Backend over db with its table in cfg.Schema. It returns
// an error matching ErrInvalidOptions for a nil db (a nil *pgxpool.Pool
// too) or an invalid schema, and one matching lease.ErrInvalidOptions for
// a Holder leasedriver.CheckHolder refuses. New does not touch the database: run Migrate
// once before the first lease.
func New(db DB, cfg Options) (*Backend, error) {
	if safe.IsNil(db) {
		return nil, fmt.Errorf("%w: nil DB", ErrInvalidOptions)
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if !identifierRE.MatchString(cfg.Schema) {
		return nil, fmt.Errorf("%w: Schema %q: want a lower-case SQL identifier matching %s", ErrInvalidOptions, cfg.Schema, identifierRE)
	}
	if err := leasedriver.CheckHolder(cfg.Holder); err != nil {
		return nil, err
	}
	table := pgx.Identifier{cfg.Schema, "leases"}.Sanitize()
	direct, _ := db.(queryer)
	return &Backend{db: db, schema: cfg.Schema, holder: cfg.Holder, sql: newQueries(table), table: table, direct: direct}, nil
}

// HolderLabel implements leasedriver.Labeled: Options.Holder.
func (b *Backend) HolderLabel() string { return b.holder }

// migrations holds the schema, one file per step, applied in name order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the lease table's migrations for opts.Schema (default
// DefaultSchema) as files for a migration tool or a DBA, for a role that
// cannot run DDL: NNN_name.up.sql at the root (golang-migrate's names,
// read by atlas and goose as they are, with goose's annotations as SQL
// comments), the schema filled in, without Migrate's advisory lock. Every
// file is idempotent. It returns an error matching ErrInvalidOptions for
// an invalid schema. In the source files {{schema}} stands for the quoted
// schema.
func Migrations(opts Options) (fs.FS, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if !identifierRE.MatchString(opts.Schema) {
		return nil, fmt.Errorf("%w: Schema %q: want a lower-case SQL identifier matching %s", ErrInvalidOptions, opts.Schema, identifierRE)
	}
	files, err := pgmigrate.Files(migrations, strings.NewReplacer("{{schema}}", pgx.Identifier{opts.Schema}.Sanitize()))
	if err != nil {
		return nil, fmt.Errorf("pglease: %w", err)
	}
	return files, nil
}

// Migrate creates the schema and the lease table if they do not exist. It
// is idempotent and safe to run from several processes at once: the script
// runs as one transaction behind the advisory lock pgledger and pgfence
// take for the same schema (internal/pgmigrate). It needs the privilege to
// create the schema (or its existence) and a table in it.
func (b *Backend) Migrate(ctx context.Context) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	script, err := pgmigrate.Script(migrations, b.schema, strings.NewReplacer("{{schema}}", pgx.Identifier{b.schema}.Sanitize()))
	if err != nil {
		return fmt.Errorf("pglease: %w", err)
	}
	// No arguments: pgx sends the script with the simple protocol, which
	// runs its statements as one implicit transaction, at READ COMMITTED
	// (pgmigrate.OwnTransaction).
	if _, err := b.db.Exec(ctx, pgmigrate.OwnTransaction+script); err != nil {
		return fmt.Errorf("pglease: migrate schema %s: %w", b.schema, pgformat.FromMigrate(err, store, b.table))
	}
	return nil
}

// Acquire implements leasedriver.Backend in one statement: the row is taken
// when free or expired and its token raised in the same statement; when
// held, the holder's remaining TTL comes back (rounded up to a ms).
//
// Every statement of the backend runs in a READ COMMITTED transaction of
// its own (one round trip; see alone), whatever the database's
// default_transaction_isolation: its upsert is designed for READ
// COMMITTED, where a try racing a grant or a renewal waits for the row
// and reads its latest version. Under REPEATABLE READ or SERIALIZABLE the
// same statement fails with SQLSTATE 40001 instead, and the failed tries
// of competitors would make the holder's renewals fail until it lost the
// lease. A serialization failure or deadlock left even so is retried
// (pgtx.MaxAttempts attempts, jittered backoff, within ctx).
func (b *Backend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (leasedriver.Grant, error) {
	if err := b.ready(ctx); err != nil {
		return leasedriver.Grant{}, err
	}
	if err := b.format.Check(ctx, b.checkFormat); err != nil {
		return leasedriver.Grant{}, err
	}
	var taken bool
	var token, remainingMS int64
	args := []any{name, ownerarg.Owner(owner), ttl.Milliseconds(), b.holder}
	err := pgx.ErrNoRows
	if q := b.alone(); q != nil {
		err = pgtx.Retry(ctx, func() error {
			return q.QueryRow(ctx, b.sql.acquire, args...).Scan(&taken, &token, &remainingMS)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			// At READ COMMITTED the upsert returns its row: another level,
			// where it wrote nothing.
			b.lone.NotReadCommitted()
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = b.batch(ctx, func(batch *pgx.Batch) {
			batch.Queue(b.sql.acquire, args...).QueryRow(func(row pgx.Row) error {
				return row.Scan(&taken, &token, &remainingMS)
			})
		})
	}
	switch {
	case err != nil:
		// The statement may have committed (a reply lost, ctx ended on
		// the wire): lease.Client undoes the acquisition with Release,
		// which frees the row only if it holds this owner.
		return leasedriver.Grant{}, err
	case taken:
		return leasedriver.Grant{Acquired: true, Token: fence.Token(token)}, nil
	default:
		return leasedriver.Grant{Remaining: time.Duration(remainingMS) * time.Millisecond}, nil
	}
}

// Renew implements leasedriver.Backend: one statement for the whole batch,
// after the stored-format check (every lease's error on a refusal).
// Each lease is extended by its own TTL if its row still holds its owner
// and has not expired; ErrNotHeld otherwise. A database error is every
// lease's error.
func (b *Backend) Renew(ctx context.Context, batch []leasedriver.Held) []error {
	if err := b.ready(ctx); err != nil {
		return leasedriver.Errs(len(batch), err)
	}
	errs := make([]error, len(batch))
	if err := b.format.Check(ctx, b.checkFormat); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	names, owners, ttls := make([]string, len(batch)), make([]string, len(batch)), make([]int64, len(batch))
	for i, h := range batch {
		names[i], owners[i], ttls[i] = h.Name, h.Owner, h.TTL.Milliseconds()
	}
	renewed, err := b.renewed(ctx, names, owners, ttls)
	for i, h := range batch {
		switch {
		case err != nil:
			errs[i] = err
		case !renewed[held{h.Name, h.Owner}]:
			errs[i] = lease.ErrNotHeld
		}
	}
	return errs
}

// held is a (name, owner) pair, how Renew matches the rows it renewed to
// its batch.
type held struct{ name, owner string }

func (b *Backend) renewed(ctx context.Context, names, owners []string, ttls []int64) (map[held]bool, error) {
	// collect adds the (name, owner) of each row to into.
	collect := func(rows pgx.Rows, into map[held]bool) error {
		defer rows.Close()
		for rows.Next() {
			var h held
			if err := rows.Scan(&h.name, &h.owner); err != nil {
				return err
			}
			into[h] = true
		}
		return rows.Err()
	}
	out := make(map[held]bool, len(names))
	alone := b.alone()
	if alone != nil {
		err := pgtx.Retry(ctx, func() error {
			clear(out) // an attempt that failed renewed nothing
			rows, err := alone.Query(ctx, b.sql.renew, names, ownerarg.Owners(owners), ttls)
			if err != nil {
				return err
			}
			return collect(rows, out)
		})
		if err != nil {
			return nil, err
		}
		if len(out) == len(names) {
			return out, nil
		}
		// Some not renewed: not held, or another level (nothing renewed).
		// The statement in a READ COMMITTED transaction tells which.
		var again []int
		for i := range names {
			if !out[held{names[i], owners[i]}] {
				again = append(again, i)
			}
		}
		names, owners, ttls = pick(names, again), pick(owners, again), pick(ttls, again)
	}
	var got map[held]bool
	err := b.batch(ctx, func(batch *pgx.Batch) {
		batch.Queue(b.sql.renew, names, ownerarg.Owners(owners), ttls).Query(func(rows pgx.Rows) error {
			got = make(map[held]bool, len(names)) // per attempt
			return collect(rows, got)
		})
	})
	if err != nil {
		return nil, err
	}
	if len(got) > 0 && alone != nil {
		b.lone.NotReadCommitted() // renewed here, not alone: another level
	}
	maps.Copy(out, got)
	return out, nil
}

// pick returns the elements of xs at the indexes is.
func pick[T any](xs []T, is []int) []T {
	out := make([]T, len(is))
	for j, i := range is {
		out[j] = xs[i]
	}
	return out
}

// Release implements leasedriver.Backend, after the stored-format check
// (a *fence.FormatError, nothing written, on a refusal): the row is freed (owner ”, expiry
// -infinity; its token stays) if it holds h.Owner and has not expired;
// ErrNotHeld otherwise.
func (b *Backend) Release(ctx context.Context, h leasedriver.Held) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := b.format.Check(ctx, b.checkFormat); err != nil {
		return err
	}
	alone := b.alone() != nil
	if alone {
		var tag pgconn.CommandTag
		err := pgtx.Retry(ctx, func() (err error) {
			tag, err = b.db.Exec(ctx, b.sql.release, h.Name, ownerarg.Owner(h.Owner))
			return err
		})
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		// Nothing released: not held, or another level. The statement in
		// a READ COMMITTED transaction tells which.
	}
	var tag pgconn.CommandTag
	err := b.batch(ctx, func(batch *pgx.Batch) {
		batch.Queue(b.sql.release, h.Name, ownerarg.Owner(h.Owner)).Exec(func(t pgconn.CommandTag) error {
			tag = t
			return nil
		})
	})
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return lease.ErrNotHeld
	}
	if alone {
		b.lone.NotReadCommitted() // released here, not alone: another level
	}
	return nil
}

// checkFormat reads the lease table's format marker (its comment) and
// refuses another format with a *fence.FormatError (docs/compatibility.md).
func (b *Backend) checkFormat(ctx context.Context) error {
	var found *string
	err := b.batch(ctx, func(batch *pgx.Batch) {
		batch.Queue(formatver.CommentSQL, b.table).QueryRow(func(row pgx.Row) error { return row.Scan(&found) })
	})
	if err != nil {
		return fmt.Errorf("pglease: check the stored format of %s: %w", b.table, err)
	}
	return formatver.CheckComment(store, b.table, found)
}

// MinIdle is the smallest idle age PruneIdle takes (1 h): the largest
// step back of the database clock it assumes.
const MinIdle = time.Hour

// PruneIdle deletes the rows of leases that are not held and whose last
// acquisition is older than idle (its token, at least the database clock
// in µs when it was issued, is below the clock minus idle), and returns
// how many. Rows are otherwise kept for ever (one per lease name ever
// acquired); run it from a periodic job to bound the table. A held lease
// is never deleted, and a row an acquisition takes meanwhile is
// re-checked and kept (READ COMMITTED).
//
// Safe under one assumption: the database clock never steps back by more
// than idle. The next acquisition of a pruned name issues max(1, clock in
// µs), above every token issued for it, all of them more than idle in the
// past. It returns an error matching ErrInvalidOptions for idle below
// MinIdle.
func (b *Backend) PruneIdle(ctx context.Context, idle time.Duration) (int64, error) {
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	if idle < MinIdle {
		return 0, fmt.Errorf("%w: PruneIdle idle %v: at least %v", ErrInvalidOptions, idle, MinIdle)
	}
	if err := b.format.Check(ctx, b.checkFormat); err != nil {
		return 0, err
	}
	var tag pgconn.CommandTag
	err := b.batch(ctx, func(batch *pgx.Batch) {
		batch.Queue(`DELETE FROM `+b.table+`
WHERE expires_at <= clock_timestamp()
  AND token < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint - $1::bigint`, idle.Microseconds()).Exec(func(t pgconn.CommandTag) error {
			tag = t
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("pglease: prune idle leases: %w", err)
	}
	return tag.RowsAffected(), nil
}
