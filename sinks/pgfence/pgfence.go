package pgfence

import (
	"context"
	"errors"
	"fmt"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// Defaults for Options.
const (
	// DefaultSchema is the schema of the guard table when Options.Schema is "".
	DefaultSchema = "holdfast"
	// DefaultTable is the name of the guard table when Options.Table is "".
	DefaultTable = "fence_guard"
)

// MaxResourceLen is the longest resource name Check and Current accept, in
// bytes, and MaxScopeLen the longest scope. Together they keep every key far
// below the btree entry limit of the primary key index (about 2.7 kB).
const (
	MaxResourceLen = 512
	MaxScopeLen    = 512
)

// DBTX is what the guard needs from a connection: pgx.Tx, *pgx.Conn and
// *pgxpool.Pool satisfy it. Check is meant to be given the caller's own
// pgx.Tx; see the package documentation.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Options names the guard table. The zero Options is valid and uses
// DefaultSchema and DefaultTable.
type Options struct {
	// Schema holds the guard table; Migrate creates it if missing.
	// Default DefaultSchema ("holdfast").
	Schema string
	// Table is the guard table's name. Default DefaultTable ("fence_guard").
	Table string
	// TracerProvider gives the tracer of Check's spans
	// (holdfast.pgfence.check; docs/operations.md, "Traces"). Default
	// otel.GetTracerProvider(). FencedUpdate and FencedUpsert, which
	// take no Options, use otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// identifierRE is the identifier form accepted for Schema and Table: what
// Postgres accepts unquoted, lower case only, so the name a user types in
// psql without quotes is the name pgfence uses. 63 bytes is NAMEDATALEN-1.
var identifierRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// withDefaults returns c with empty fields set to their defaults.
func (c Options) withDefaults() Options {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	return c
}

// validate reports an error matching ErrInvalidOptions for a field that is
// not an identifier. It expects defaults to be applied.
func (c Options) validate() error {
	if !identifierRE.MatchString(c.Schema) {
		return fmt.Errorf("%w: Schema %q: want a lower-case SQL identifier matching %s", ErrInvalidOptions, c.Schema, identifierRE)
	}
	if !identifierRE.MatchString(c.Table) {
		return fmt.Errorf("%w: Table %q: want a lower-case SQL identifier matching %s", ErrInvalidOptions, c.Table, identifierRE)
	}
	if n := len(c.Table) + len(ClosedTableSuffix); n > 63 {
		return fmt.Errorf("%w: Table %q: the table of closed slot scopes, %q, would be %d bytes, over Postgres's 63", ErrInvalidOptions, c.Table, c.Table+ClosedTableSuffix, n)
	}
	return nil
}

// Guard enforces the fence acceptance rule on one guard table. It holds no
// connection and no goroutine; it is safe for concurrent use.
type Guard struct {
	schema, table string
	checkSQL      string  // upsert that raises the stored token iff the rule accepts
	currentSQL    string  // reads the stored token and owner
	slot          slotSQL // slot-scoped checks and PruneSlotScopes
	tracer        trace.Tracer
	format        formatver.Gate // the stored format, checked on first use
}

// store names the package in format markers and errors.
const store = "sinks/pgfence"

// New returns a Guard for the table named by cfg. It returns an error
// matching ErrInvalidOptions when a name is not a valid identifier. New does
// not touch the database: run Migrate once before the first Check.
func New(cfg Options) (*Guard, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Identifiers are validated above and quoted here as well, so no input
	// can reach the SQL text unescaped.
	guard := pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
	closed := pgx.Identifier{cfg.Schema, cfg.Table + ClosedTableSuffix}.Sanitize()
	return &Guard{
		slot:   newSlotSQL(guard, closed),
		tracer: newTracer(cfg.TracerProvider),
		schema: cfg.Schema,
		table:  cfg.Table,
		// The rule, in one statement (fencerule.Upsert): the check and the
		// raise are atomic, and the row lock held until the caller's
		// transaction ends serialises every writer of one resource.
		checkSQL: fencerule.Upsert{
			Table:     guard,
			Columns:   "resource, scope, token, owner, updated_at",
			Values:    "$1, $2, $3, $4, now()",
			Conflict:  "resource, scope",
			Set:       "updated_at = now()",
			Returning: "f.token",
		}.SQL(),
		currentSQL: `SELECT token, owner FROM ` + guard + ` WHERE resource = $1 AND scope = $2`,
	}, nil
}

// Check applies the acceptance rule to a write for resource by holder h,
// inside tx, and raises the stored token when it accepts. The guard keeps
// one fence per (resource, h.Scope): h is only compared with tokens
// presented before under the same scope (the same lease), so holders of
// other leases writing the same resource neither refuse h nor are refused
// by it. It returns:
//
//   - nil: accepted. The guard row of (resource, h.Scope) now holds
//     (h.Token, h.Owner) and stays locked until tx commits or rolls back;
//     commit the business write in tx.
//   - a *fence.StaleTokenError (errors.Is fence.ErrStaleToken): h.Token is
//     below the scope's stored token, or equal to it and h.Owner is not the
//     stored owner. Current is the stored token, Scope is h.Scope. Roll tx
//     back.
//   - an error matching fence.ErrNoToken for h.Token == fence.None, or
//     ErrTokenOutOfRange, ErrInvalidResource, ErrInvalidScope,
//     ErrInvalidOwner for bad input, ErrInvalidOptions for a nil tx; the
//     database is not touched.
//   - a wrapped database error; errors.As finds the *pgconn.PgError, and
//     errors.Is(err, ErrRetryable) tells a serialization failure or
//     deadlock worth running the whole transaction again for.
//
// tx should be the transaction that makes the business write. Given a pool
// or a connection outside a transaction, Check still applies the rule and
// raises the stored token, but nothing ties the write to it.
func (g *Guard) Check(ctx context.Context, tx DBTX, resource string, h fence.Holder) (err error) {
	if err := g.Validate(resource, h); err != nil {
		return err
	}
	if ctx != nil {
		var span trace.Span
		ctx, span = startWrite(ctx, g.tracer, "check", resource, h)
		defer func() { endWrite(span, err) }()
	}
	if safe.IsNil(tx) {
		return fmt.Errorf("%w: check %q: nil transaction", ErrInvalidOptions, resource)
	}
	if ctx == nil {
		return fmt.Errorf("%w: check %q: %w", ErrInvalidOptions, resource, errfamily.ErrNilContext)
	}
	if err := g.CheckFormat(ctx, tx); err != nil {
		return err
	}
	if unit, slot, ok := fence.SplitSlotScope(h.Scope); ok {
		return g.checkSlot(ctx, tx, resource, h, unit, slot)
	}
	t := h.Token
	var raised int64
	err = tx.QueryRow(ctx, g.checkSQL, resource, h.Scope, int64(t), ownerarg.Owner(h.Owner)).Scan(&raised)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, pgx.ErrNoRows):
		return wrapDBError("check", resource, err)
	}

	// No row came back: the rule refused the write, and the upsert left the
	// row locked by this transaction, so this read sees what refused it.
	current, _, err := g.current(ctx, tx, resource, h.Scope)
	if err != nil {
		return err
	}
	return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: t, Current: current}
}

// Validate reports the input error Check would return for resource and h
// without touching the database: ErrNotCreated, ErrInvalidResource,
// ErrInvalidScope, ErrInvalidOwner, fence.ErrNoToken or
// ErrTokenOutOfRange; nil when Check would run its statement. It is for
// callers that apply the guard's rule in a statement of their own (see
// Table).
func (g *Guard) Validate(resource string, h fence.Holder) error {
	if err := g.ready(); err != nil {
		return err
	}
	if err := validateResource(resource); err != nil {
		return err
	}
	if err := validateScope(h.Scope); err != nil {
		return err
	}
	if err := validateOwner(h.Owner); err != nil {
		return err
	}
	switch t := h.Token; {
	case t == fence.None:
		return fmt.Errorf("pgfence: check %q: %w", resource, fence.ErrNoToken)
	case uint64(t) > math.MaxInt64:
		return fmt.Errorf("%w: token %d for %q exceeds the bigint maximum %d", ErrTokenOutOfRange, t, resource, int64(math.MaxInt64))
	}
	return nil
}

// Table returns the guard table's name, schema-qualified: its columns are
// (resource text, scope text, token bigint, owner text, updated_at
// timestamptz), primary key (resource, scope). It is for stores in this
// module that raise the guard in a statement of their own (httpfence's
// pgstore); nil for a Guard not made by New.
func (g *Guard) Table() pgx.Identifier {
	if g.ready() != nil {
		return nil
	}
	return pgx.Identifier{g.schema, g.table}
}

// Current returns the token and owner stored for (resource, scope), or
// (fence.None, "", nil) when no write for it was ever accepted. It takes no
// lock; the answer may be stale by the time it returns unless db is a
// transaction that already called Check for (resource, scope). It returns
// ErrInvalidOptions for a nil db.
func (g *Guard) Current(ctx context.Context, db DBTX, resource, scope string) (fence.Token, string, error) {
	if err := g.ready(); err != nil {
		return fence.None, "", err
	}
	if err := validateResource(resource); err != nil {
		return fence.None, "", err
	}
	if err := validateScope(scope); err != nil {
		return fence.None, "", err
	}
	if safe.IsNil(db) {
		return fence.None, "", fmt.Errorf("%w: current %q: nil database", ErrInvalidOptions, resource)
	}
	if ctx == nil {
		return fence.None, "", fmt.Errorf("%w: current %q: %w", ErrInvalidOptions, resource, errfamily.ErrNilContext)
	}
	if err := g.CheckFormat(ctx, db); err != nil {
		return fence.None, "", err
	}
	return g.current(ctx, db, resource, scope)
}

// CheckFormat returns nil when the guard table's stored format is this
// build's, and a *fence.FormatError (fence.ErrUnknownFormat) when its
// comment names another: a newer build's or another store's
// (docs/compatibility.md). It reads the comment through db on the Guard's
// first use only (one SELECT); after one success it returns nil at once.
// Check, Current and Reset run it; callers that raise the guard in a
// statement of their own (see Table) run it first.
func (g *Guard) CheckFormat(ctx context.Context, db DBTX) error {
	if g.format.Passed() {
		return nil
	}
	if err := g.ready(); err != nil {
		return err
	}
	table := pgx.Identifier{g.schema, g.table}.Sanitize()
	return g.format.Check(ctx, func(ctx context.Context) error {
		var found *string
		if err := db.QueryRow(ctx, formatver.CommentSQL, table).Scan(&found); err != nil {
			return wrapDBError("check the stored format of", table, err)
		}
		return formatver.CheckComment(store, table, found)
	})
}

func (g *Guard) current(ctx context.Context, db DBTX, resource, scope string) (fence.Token, string, error) {
	var (
		token int64
		owner string
	)
	err := db.QueryRow(ctx, g.currentSQL, resource, scope).Scan(&token, &owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fence.None, "", nil
	case err != nil:
		return fence.None, "", wrapDBError("read current token of", resource, err)
	}
	// The table's CHECK (token > 0) makes the conversion exact.
	return fence.Token(token), owner, nil
}

// ready reports ErrNotCreated for a nil Guard or one not made by New.
func (g *Guard) ready() error {
	if g == nil || g.checkSQL == "" {
		return ErrNotCreated
	}
	return nil
}

func validateResource(resource string) error {
	switch {
	case resource == "":
		return fmt.Errorf("%w: empty", ErrInvalidResource)
	case len(resource) > MaxResourceLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidResource, len(resource), MaxResourceLen)
	case !validText(resource):
		return fmt.Errorf("%w: %q: not valid UTF-8 or holds a NUL byte", ErrInvalidResource, resource)
	}
	return nil
}

func validateScope(scope string) error {
	switch {
	case len(scope) > MaxScopeLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidScope, len(scope), MaxScopeLen)
	case !validText(scope):
		return fmt.Errorf("%w: %q: not valid UTF-8 or holds a NUL byte", ErrInvalidScope, scope)
	}
	return nil
}

func validateOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: empty", ErrInvalidOwner)
	case !validText(owner):
		return fmt.Errorf("%w: %q: not valid UTF-8 or holds a NUL byte", ErrInvalidOwner, owner)
	}
	return nil
}

// validText reports whether s can be stored in a Postgres text column:
// valid UTF-8 without NUL bytes (Postgres rejects both).
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
