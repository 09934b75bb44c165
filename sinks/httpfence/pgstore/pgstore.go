package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/formatver/pgformat"
	"io/fs"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgmigrate"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/internal/storeutil"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// DefaultSchema is the schema of Store's table when none is given.
const DefaultSchema = "holdfast"

// Options configure a Store. The zero value is valid. (A Fence takes
// pgfence.Options, the guard table's Schema and Table.)
type Options struct {
	// Schema holds the table idempotency_keys; Migrate creates it. A
	// lower-case SQL identifier. Default DefaultSchema ("holdfast").
	Schema string
}

// migrations holds the schema of Store, applied in name order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the store's migrations for opts.Schema (default
// DefaultSchema) as files for a migration tool or a DBA, for a role that
// cannot run DDL: NNN_name.up.sql at the root (golang-migrate's names,
// read by atlas and goose as they are, with goose's annotations as SQL
// comments), the schema filled in, without Migrate's advisory lock. Every
// file is idempotent. It returns an error matching
// httpfence.ErrInvalidOptions for an invalid schema. In the source files
// {{schema}} stands for the quoted schema.
func Migrations(opts Options) (fs.FS, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !identifierRE.MatchString(schema) {
		return nil, fmt.Errorf("%w: schema %q: want a lower-case SQL identifier matching %s", httpfence.ErrInvalidOptions, schema, identifierRE)
	}
	files, err := pgmigrate.Files(migrations, strings.NewReplacer("{{schema}}", pgx.Identifier{schema}.Sanitize()))
	if err != nil {
		return nil, fmt.Errorf("httpfence: %w", err)
	}
	return files, nil
}

// identifierRE is the schema form accepted: what Postgres accepts unquoted,
// lower case only (as in pgfence).
var identifierRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// DB is what Store and Fence need from a database: *pgxpool.Pool
// satisfies it (a *pgx.Conn too, but it is not safe for concurrent use). A
// pgx.Tx does not: the stores commit their own transactions.
//
// Every statement the stores send runs in a READ COMMITTED transaction of
// its own (internal/pgtx), whatever the database's or the role's
// default_transaction_isolation: their upserts and conditional updates are
// designed for READ COMMITTED, where a statement racing another request's
// write to the same key or guard row waits for it and reads its latest
// version. Under REPEATABLE READ or SERIALIZABLE the same statements fail
// with SQLSTATE 40001 instead. Store's statements are pipelined with their
// BEGIN and COMMIT (one round trip each, as before), and so are
// Fence.Accept's (pgfence.Guard.CheckOwnTx, one). A serialization failure or
// deadlock left even so is retried inside the store (pgtx.MaxAttempts
// attempts, jittered backoff, within the request's ctx), so the middleware
// never answers 503 for a conflict between concurrent requests.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// lockLeftSQL is a live record's remaining time in whole milliseconds,
// rounded up, by the database's clock: Outcome.LockLeft of an in-flight
// record.
const lockLeftSQL = `ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint`

// beginAttempts bounds Begin's loop when other requests keep moving a key
// on (creating, completing, abandoning it) between its steps.
const beginAttempts = 3

// Store is an idemstore.Store in PostgreSQL: one row per key in
// <schema>.idempotency_keys. Begin is one statement for a new key (INSERT
// ... ON CONFLICT DO NOTHING), two for a live one (plus a SELECT, neither
// writing, so a replay costs no commit flush) and three for a dead one (plus
// a conditional UPDATE that takes it over); Complete and Abandon are one
// conditional statement each. With a Fence on the same pool, BeginFenced
// claims a new key and checks the fence in one statement (see there).
// Every statement runs at READ COMMITTED: Begin's, BeginFenced's and
// Complete's are sent alone where that is the session's default level
// (each writes only at READ COMMITTED), and in a READ COMMITTED
// transaction otherwise (docs/guarantees.md). Expiry uses the database
// clock. Dead rows of keys never used again stay until DeleteExpired
// removes them: call it periodically (hourly, say). Safe for concurrent
// use.
type Store struct {
	db     DB
	schema string
	table  string   // quoted, schema-qualified
	fenced sync.Map // guard table (quoted) -> BeginFenced's fencedStatements
	hints  guardHints
	// Statements, built once with the quoted table name.
	insertSQL, readSQL, takeoverSQL           string
	completeSQL, abandonSQL, deleteExpiredSQL string
	format                                    formatver.Gate // the stored format, checked on first use
	// lone: send Begin's, BeginFenced's and Complete's statements on their
	// own (gated on pgtx.AtReadCommitted) until one finds another level.
	lone pgtx.Lone
}

// store names the package in format markers and errors.
const store = "sinks/httpfence/pgstore"

// NewStore returns a Store working through db (a
// *pgxpool.Pool, typically) on the table idempotency_keys in opts.Schema
// (DefaultSchema when empty). It returns an error matching ErrInvalidOptions
// for a nil db (a typed nil *pgxpool.Pool included) or a schema that is not
// a lower-case SQL identifier. It does not touch the database: run Migrate
// once at start-up.
func NewStore(db DB, opts Options) (*Store, error) {
	schema := opts.Schema
	if safe.IsNil(db) {
		return nil, fmt.Errorf("%w: nil database", httpfence.ErrInvalidOptions)
	}
	if schema == "" {
		schema = DefaultSchema
	}
	if !identifierRE.MatchString(schema) {
		return nil, fmt.Errorf("%w: schema %q: want a lower-case SQL identifier matching %s", httpfence.ErrInvalidOptions, schema, identifierRE)
	}
	t := pgx.Identifier{schema, "idempotency_keys"}.Sanitize()
	return &Store{
		db:     db,
		schema: schema,
		table:  t,
		// Creates the record. DO NOTHING on a conflict neither writes nor
		// locks, so Begin of a live key costs no commit flush.
		// Every statement Begin sends returns one row, whose first column
		// says whether it ran at READ COMMITTED (gatedRow), and writes
		// only where it did.
		insertSQL: `WITH ins AS (
  INSERT INTO ` + t + ` (key, fingerprint, lock_id, expires_at)
  SELECT $1, $2, $3, now() + $4::bigint * interval '1 millisecond' WHERE ` + pgtx.AtReadCommitted + `
  ON CONFLICT (key) DO NOTHING
  RETURNING lock_id
)
SELECT ` + pgtx.AtReadCommitted + `, (SELECT lock_id FROM ins)`,
		readSQL: `SELECT ` + pgtx.AtReadCommitted + `, r.same, r.in_flight, r.left_ms, r.status, r.header, r.body
  FROM (VALUES (1)) AS one LEFT JOIN (
    SELECT fingerprint = $2 AS same, lock_id IS NOT NULL AS in_flight, ` + lockLeftSQL + ` AS left_ms, status, header, body
      FROM ` + t + ` WHERE key = $1 AND expires_at > now()
  ) AS r ON true`,
		// Takes over a dead record. The WHERE clause is re-checked on the
		// latest row version after waiting for a concurrent writer, so two
		// concurrent takeovers never both return a row.
		takeoverSQL: `WITH taken AS (
  UPDATE ` + t + `
     SET fingerprint = $2, lock_id = $3, status = NULL, header = NULL, body = NULL,
         created_at = now(), expires_at = now() + $4::bigint * interval '1 millisecond'
   WHERE key = $1 AND expires_at <= now() AND ` + pgtx.AtReadCommitted + `
  RETURNING lock_id
)
SELECT ` + pgtx.AtReadCommitted + `, (SELECT lock_id FROM taken)`,
		completeSQL: `UPDATE ` + t + `
   SET lock_id = NULL, status = $3, header = $4::jsonb, body = $5,
       expires_at = now() + $6::bigint * interval '1 millisecond'
 WHERE key = $1 AND lock_id = $2 AND expires_at > now() AND ` + pgtx.AtReadCommitted,
		abandonSQL:       `DELETE FROM ` + t + ` WHERE key = $1 AND lock_id = $2 AND expires_at > now()`,
		deleteExpiredSQL: `DELETE FROM ` + t + ` WHERE expires_at <= now()`,
	}, nil
}

// Migrate creates the schema and the table if they do not exist. It is
// idempotent and safe to run from several processes at once: it runs in one
// transaction under the advisory lock every holdfast store takes for the
// schema (the one pgfence.Guard.Migrate takes).
func (s *Store) Migrate(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Migrate")
	}
	script, err := pgmigrate.Script(migrations, s.schema, strings.NewReplacer("{{schema}}", pgx.Identifier{s.schema}.Sanitize()))
	if err != nil {
		return fmt.Errorf("httpfence: %w", err)
	}
	if _, err := s.db.Exec(ctx, pgmigrate.OwnTransaction+script); err != nil {
		return fmt.Errorf("httpfence: migrate %s: %w", s.schema, pgformat.FromMigrate(err, store, s.table))
	}
	return nil
}

// Begin implements idemstore.Store.
func (s *Store) Begin(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (idemstore.Outcome, error) {
	if ctx == nil {
		return idemstore.Outcome{}, nilContext("Begin")
	}
	if err := storeutil.ValidTTL("lock TTL", lockTTL); err != nil {
		return idemstore.Outcome{}, err
	}
	lock, err := storeutil.NewLock()
	if err != nil {
		return idemstore.Outcome{}, err
	}
	// insert -> read -> takeover, until one of them decides: a key is new
	// (insert), live (read) or dead (takeover); between two steps another
	// request may move it on, which the next step sees.
	for range beginAttempts {
		claimed, err := s.claim(ctx, s.insertSQL, key, fingerprint, lock, lockTTL)
		if err != nil || claimed {
			return idemstore.Outcome{State: idemstore.StateNew, Lock: lock}, err
		}
		out, live, err := s.read(ctx, key, fingerprint)
		if err != nil || live {
			return out, err
		}
		claimed, err = s.claim(ctx, s.takeoverSQL, key, fingerprint, lock, lockTTL)
		if err != nil || claimed {
			return idemstore.Outcome{State: idemstore.StateNew, Lock: lock}, err
		}
	}
	return idemstore.Outcome{}, fmt.Errorf("httpfence: postgres begin: key %q changed state %d times in a row", key, beginAttempts)
}

// claim runs the insert or takeover statement and reports whether it
// returned the row, that is, whether lock now holds the key.
func (s *Store) claim(ctx context.Context, sql, key, fingerprint, lock string, lockTTL time.Duration) (bool, error) {
	var got *string
	if err := s.gatedRow(ctx, sql, []any{key, fingerprint, lock, lockTTL.Milliseconds()}, &got); err != nil {
		return false, fmt.Errorf("httpfence: postgres begin: %w", err)
	}
	return got != nil, nil
}

// read returns the outcome for the live record of key, or live == false
// when the key has none (dead or gone).
func (s *Store) read(ctx context.Context, key, fingerprint string) (out idemstore.Outcome, live bool, err error) {
	var (
		same, inFlight *bool
		leftMS         *int64
		status         *int32
		header, body   []byte
	)
	err = s.gatedRow(ctx, s.readSQL, []any{key, fingerprint}, &same, &inFlight, &leftMS, &status, &header, &body)
	switch {
	case err != nil:
		return idemstore.Outcome{}, false, fmt.Errorf("httpfence: postgres begin: read record: %w", err)
	case same == nil:
		return idemstore.Outcome{}, false, nil
	}
	out, err = s.outcome(*same, *inFlight, *leftMS, status, header, body)
	return out, err == nil, err
}

// outcome is Begin's answer for a live record read as (fingerprint equal,
// in flight, remaining time in ms, status, header, body).
func (s *Store) outcome(same, inFlight bool, leftMS int64, status *int32, header, body []byte) (idemstore.Outcome, error) {
	switch {
	case !same:
		return idemstore.Outcome{State: idemstore.StateMismatch}, nil
	case inFlight:
		return idemstore.Outcome{State: idemstore.StateInFlight, LockLeft: max(time.Duration(leftMS)*time.Millisecond, time.Millisecond)}, nil
	}
	h, err := storeutil.DecodeHeader(header)
	if err != nil {
		return idemstore.Outcome{}, err
	}
	if body == nil {
		body = []byte{}
	}
	return idemstore.Outcome{State: idemstore.StateCompleted, Response: &idemstore.Response{Status: int(*status), Header: h, Body: body}}, nil
}

// Complete implements idemstore.Store.
func (s *Store) Complete(ctx context.Context, key, lock string, resp *idemstore.Response, ttl time.Duration) error {
	if ctx == nil {
		return nilContext("Complete")
	}
	if err := storeutil.ValidTTL("TTL", ttl); err != nil {
		return err
	}
	h, err := storeutil.EncodeHeader(resp.Header)
	if err != nil {
		return err
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // NULL would read back as a missing body
	}
	args := []any{key, lock, resp.Status, string(h), body, ttl.Milliseconds()}
	if s.lone.Try() {
		// On its own (see pgtx.Lone): it writes only at READ COMMITTED.
		tag, err := s.execLone(ctx, s.completeSQL, args...)
		if err != nil {
			return fmt.Errorf("httpfence: postgres complete: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		// Nothing written: the lock was lost, or the session is at another
		// level. The statement in a READ COMMITTED transaction tells which.
	}
	tag, err := s.exec(ctx, s.completeSQL, args...)
	if err != nil {
		return fmt.Errorf("httpfence: postgres complete: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: key %q", idemstore.ErrLockLost, key)
	}
	if s.lone.Try() {
		s.lone.NotReadCommitted() // written here, not alone: another level
	}
	return nil
}

// Abandon implements idemstore.Store.
func (s *Store) Abandon(ctx context.Context, key, lock string) error {
	if ctx == nil {
		return nilContext("Abandon")
	}
	tag, err := s.exec(ctx, s.abandonSQL, key, lock)
	if err != nil {
		return fmt.Errorf("httpfence: postgres abandon: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: key %q", idemstore.ErrLockLost, key)
	}
	return nil
}

// DeleteExpired deletes every dead record (in flight past its lock TTL, or
// completed past its TTL) and returns how many it deleted. Begin takes over
// dead records by itself; this only reclaims space.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	if ctx == nil {
		return 0, nilContext("DeleteExpired")
	}
	tag, err := s.exec(ctx, s.deleteExpiredSQL)
	if err != nil {
		return 0, fmt.Errorf("httpfence: postgres delete expired: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Fence is an idemstore.FenceStore on a pgfence.Guard: Accept is Guard.Check
// run in its own implicit transaction (one INSERT ... ON CONFLICT statement),
// so the check and the raise are atomic. The guard table is the one the
// handler can use in its own transactions (fence.HolderFromContext gives it
// the holder the middleware admitted), which fences its writes end to end.
// Tokens above math.MaxInt64 are refused (pgfence.ErrTokenOutOfRange).
// Safe for concurrent use.
type Fence struct {
	db    DB
	guard *pgfence.Guard
}

// NewFence returns a Fence on the guard table named by cfg
// (the zero Options: holdfast.fence_guard), working through db. It returns
// ErrInvalidOptions for a nil db (a typed nil *pgxpool.Pool included) and
// pgfence's ErrInvalidOptions for a bad name. Run Migrate once at start-up.
func NewFence(db DB, cfg pgfence.Options) (*Fence, error) {
	if safe.IsNil(db) {
		return nil, fmt.Errorf("%w: nil database", httpfence.ErrInvalidOptions)
	}
	g, err := pgfence.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Fence{db: db, guard: g}, nil
}

// Guard returns the pgfence.Guard, for the handler's own fenced writes.
func (f *Fence) Guard() *pgfence.Guard { return f.guard }

// Migrate creates the guard table (pgfence.Guard.Migrate).
func (f *Fence) Migrate(ctx context.Context) error { return f.guard.Migrate(ctx, f.db) }

// Accept implements idemstore.FenceStore: a guard row per (resource,
// h.Scope), checked and raised by pgfence.Guard.CheckOwnTx in a READ
// COMMITTED transaction of its own, one round trip (see DB). A holder the guard cannot take
// (pgfence.ErrTokenOutOfRange, ErrInvalidOwner, ErrInvalidScope,
// ErrInvalidResource) gives an error matching both pgfence's error and
// idemstore.ErrInvalidFencing.
func (f *Fence) Accept(ctx context.Context, resource string, h fence.Holder) error {
	var err error
	if ctx == nil || f.guard.Validate(resource, h) != nil {
		err = f.guard.Check(ctx, f.db, resource, h) // refused before the database is touched
	} else {
		err = f.guard.CheckOwnTx(ctx, f.db, resource, h)
	}
	for _, bad := range []error{pgfence.ErrTokenOutOfRange, pgfence.ErrInvalidOwner, pgfence.ErrInvalidScope, pgfence.ErrInvalidResource} {
		if errors.Is(err, bad) {
			return fmt.Errorf("%w: %w", idemstore.ErrInvalidFencing, err)
		}
	}
	return err
}

var _ fence.SlotScopePruner = (*Fence)(nil)

// PruneSlotScopes implements fence.SlotScopePruner:
// pgfence.Guard.PruneSlotScopes through the Fence's database. From then on
// Accept (and a Store's BeginFenced) refuses a slot scope of unit below the
// watermark with an error matching fence.ErrScopeClosed (the middleware
// answers it 412 like any stale token, with closedBefore). Name the
// resource as the Fence sees it: with httpfence.Options.Identity, that is
// httpfence.FenceResource(identity, resource).
//
// A before later than the database's clock (now(), in the prune's own
// transaction) minus fence.PruneMargin (1 hour) is refused with nothing
// changed: the error wraps a *fence.PruneCutoffError (errors.As) and
// matches fence.ErrPruneCutoff (errors.Is). A watermark never goes down,
// and one in the future would close the slot scopes of runs still going.
func (f *Fence) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	return f.guard.PruneSlotScopes(ctx, f.db, resource, unit, before)
}

// queryRow runs sql (one row expected, scanned into dest; pgx.ErrNoRows
// when none) in a READ COMMITTED transaction of its own, one round trip.
func (s *Store) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	if err := s.checkFormat(ctx); err != nil {
		return err
	}
	return s.batch(ctx, func(b *pgx.Batch) {
		b.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return row.Scan(dest...) })
	})
}

// batch is pgtx.Batch on the Store's database: a connection inside a
// transaction begun by hand (or a pgx.Tx) is refused with
// httpfence.ErrInvalidOptions, before any I/O (the batch's COMMIT would
// commit it).
func (s *Store) batch(ctx context.Context, queue func(*pgx.Batch)) error {
	err := pgtx.Batch(ctx, s.db, queue)
	if errors.Is(err, pgtx.ErrInTransaction) {
		return fmt.Errorf("%w: %w", httpfence.ErrInvalidOptions, err)
	}
	return err
}

// checkFormat is the stored format check of the Store's first use (every
// statement goes through queryRow or exec): the comment of its table must
// be this build's marker, or the call fails with a *fence.FormatError
// (docs/compatibility.md).
func (s *Store) checkFormat(ctx context.Context) error {
	if s.format.Passed() {
		return nil
	}
	return s.format.Check(ctx, func(ctx context.Context) error {
		return pgformat.Postgres(ctx, s.db, store, s.table)
	})
}

// exec runs sql in a READ COMMITTED transaction of its own, one round
// trip, and returns its command tag.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := s.checkFormat(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	var tag pgconn.CommandTag
	err := s.batch(ctx, func(b *pgx.Batch) {
		b.Queue(sql, args...).Exec(func(t pgconn.CommandTag) error {
			tag = t
			return nil
		})
	})
	return tag, err
}

// execLone runs sql on its own (outside an explicit transaction, at the
// session's default level: sql must gate its writes on
// pgtx.AtReadCommitted), one round trip, and returns its command tag.
func (s *Store) execLone(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := s.checkFormat(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	var tag pgconn.CommandTag
	err := pgtx.Retry(ctx, func() (err error) {
		tag, err = s.db.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// gatedRow runs sql, which returns one row whose first column is
// pgtx.AtReadCommitted and writes only where that holds, and scans the
// other columns into dest: sent on its own while s.lone says so, and in a
// READ COMMITTED transaction (queryRow) when it is not, or when sent alone
// it ran at another level (s.lone then sends the next ones so at once).
func (s *Store) gatedRow(ctx context.Context, sql string, args []any, dest ...any) error {
	var readCommitted bool
	dest = append([]any{&readCommitted}, dest...)
	if s.lone.Try() {
		if err := s.checkFormat(ctx); err != nil {
			return err
		}
		err := pgtx.Retry(ctx, func() error { return s.db.QueryRow(ctx, sql, args...).Scan(dest...) })
		if err != nil || readCommitted {
			return err
		}
		s.lone.NotReadCommitted()
	}
	return s.queryRow(ctx, sql, args, dest...)
}

// nilContext is the error of method op called with a nil context.
func nilContext(op string) error { return fmt.Errorf("pgstore: %s: %w", op, idemstore.ErrNilContext) }
