package pgfence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// The fence columns FencedUpdate and FencedUpsert expect on the caller's
// table:
//
//	fence_token bigint, -- highest token accepted for the row; NULL or 0: none yet
//	fence_owner text,   -- the owner that presented it
//	fence_scope text    -- its scope: the lease the token was issued for
//
// All may be NULL (for example right after ALTER TABLE ... ADD COLUMN on an
// existing table): a NULL token counts as fence.None, so any holder is
// accepted for that row; a NULL scope next to a token (a row written before
// fence_scope existed) lets holders of any scope be judged by the token
// alone, and the first accepted write records its scope.
//
// A row has one token, so it has one scope: the scope of the write that
// last set its token. A row can only ever be fenced by one lease (see
// "Scope" in the package documentation): a write under another scope is
// refused with ErrScopeMismatch, never judged by comparing tokens of two
// leases, so a stale holder of lease A is never let through because lease
// B wrote last.
const (
	TokenColumn = "fence_token"
	OwnerColumn = "fence_owner"
	ScopeColumn = "fence_scope"
)

// Row names one row of a caller's table that carries the fence columns
// (TokenColumn, OwnerColumn, ScopeColumn).
type Row struct {
	// Table is the table, schema-qualified or not:
	// pgx.Identifier{"billing", "accounts"} or pgx.Identifier{"accounts"}.
	// Each part is quoted, so it is matched exactly (case included).
	Table pgx.Identifier
	// KeyColumn names a column that identifies at most one row: a primary
	// key or a column with a unique constraint (FencedUpsert needs it for
	// ON CONFLICT). It is quoted like Table.
	KeyColumn string
	// Key is the row's value of KeyColumn, sent as a query parameter.
	Key any
}

// resource names the row in errors, e.g. billing.accounts[id=42]. It is
// built only when an error needs it, never on the accepted path.
func (r Row) resource() string {
	return fmt.Sprintf("%s[%s=%v]", strings.Join(r.Table, "."), r.KeyColumn, r.Key)
}

// FencedUpdate updates the row named by row in one statement, iff the
// acceptance rule passes for holder h: the row has no token yet (NULL or 0), or
// its fence_scope is h.Scope (or NULL) and its fence_token is below h.Token,
// or equal to it and fence_owner equals h.Owner. The same statement sets
// every column of set to its value and the fence columns to (h.Token,
// h.Owner, h.Scope):
//
//	UPDATE <table> SET <col> = $5, ..., fence_token = $2, fence_owner = $3, fence_scope = $4
//	 WHERE <key> = $1
//	   AND (COALESCE(fence_token, 0) = 0
//	        OR ((fence_scope IS NULL OR fence_scope = $4)
//	            AND (fence_token < $2 OR (fence_token = $2 AND fence_owner = $3))))
//
// Identifiers are quoted with pgx.Identifier.Sanitize and every value is a
// query parameter, so no input reaches the SQL text unescaped. The SQL is
// built once per shape (table, key column, set's columns in sorted order)
// and cached, so a write builds no SQL and pgx reuses one prepared
// statement per shape.
// set may be empty: the row's fence is raised and nothing else changes.
//
// It returns:
//
//   - nil: accepted; the row holds the new values and h.
//   - a *fence.StaleTokenError (matches fence.ErrStaleToken) when the rule
//     refused the write; Current is the row's token, read by a follow-up
//     SELECT on db. Nothing was written.
//   - an error matching ErrScopeMismatch when the row's token is of another
//     scope (another lease). Nothing was written.
//   - ErrRowNotFound when no row has the key. Nothing was written.
//   - an error matching fence.ErrNoToken, ErrTokenOutOfRange,
//     ErrInvalidOwner, ErrInvalidScope or ErrInvalidIdentifier for bad
//     input, ErrInvalidOptions for a nil db, before the database is touched.
//   - a wrapped database error; errors.Is(err, ErrRetryable) tells a
//     serialization failure or deadlock (see ErrRetryable).
//
// db may be a pool, a connection or the caller's pgx.Tx; in a transaction
// the update commits or rolls back with it. Under READ COMMITTED a
// concurrent writer of the row makes FencedUpdate wait for it and then
// apply the rule to the row as that writer left it. Under REPEATABLE READ or
// SERIALIZABLE it fails with ErrRetryable instead.
func FencedUpdate(ctx context.Context, db DBTX, row Row, set map[string]any, h fence.Holder) (err error) {
	if tr := callerTracer(ctx); tr != nil {
		var span trace.Span
		ctx, span = startWrite(ctx, tr, "update", row.resource(), h)
		defer func() { endWrite(span, err) }()
	}
	sh, err := prepareWrite(row, set, h)
	if err != nil {
		return err
	}
	if safe.IsNil(db) {
		return fmt.Errorf("%w: fenced update of %s: nil database", ErrInvalidOptions, row.resource())
	}
	if ctx == nil {
		return fmt.Errorf("%w: fenced update of %s: %w", ErrInvalidOptions, row.resource(), errfamily.ErrNilContext)
	}
	tag, err := db.Exec(ctx, sh.update, sh.args(row, set, h)...)
	if err != nil {
		return wrapDBError("fenced update of", row.resource(), err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	return refused(ctx, db, row, sh.current, h, ErrRowNotFound)
}

// FencedUpsert is FencedUpdate for a row that may not exist yet: its first
// write inserts it with the key, the columns of set and the fence columns,
// in one statement that updates the row instead, iff the rule passes, when
// the key is taken:
//
//	INSERT INTO <table> AS cur (<key>, <col>, ..., fence_token, fence_owner, fence_scope)
//	VALUES ($1, $5, ..., $2, $3, $4)
//	ON CONFLICT (<key>) DO UPDATE SET <col> = EXCLUDED.<col>, ...,
//	       fence_token = $2, fence_owner = $3, fence_scope = $4
//	 WHERE <the rule of FencedUpdate, on cur>
//
// Row.KeyColumn must carry a unique constraint or be the primary key
// (otherwise Postgres reports SQLSTATE 42P10), and set must give every
// column the insert needs (NOT NULL without default).
//
// It returns nil when the row was inserted or updated, a
// *fence.StaleTokenError when the rule refused the write, ErrScopeMismatch
// when the row is fenced by another scope, and the same input and database
// errors as FencedUpdate. Under READ COMMITTED a
// concurrent insert or update of the key makes it wait and then apply the
// rule to the committed row; under REPEATABLE READ or SERIALIZABLE it fails
// with ErrRetryable instead.
func FencedUpsert(ctx context.Context, db DBTX, row Row, set map[string]any, h fence.Holder) (err error) {
	if tr := callerTracer(ctx); tr != nil {
		var span trace.Span
		ctx, span = startWrite(ctx, tr, "upsert", row.resource(), h)
		defer func() { endWrite(span, err) }()
	}
	sh, err := prepareWrite(row, set, h)
	if err != nil {
		return err
	}
	if safe.IsNil(db) {
		return fmt.Errorf("%w: fenced upsert of %s: nil database", ErrInvalidOptions, row.resource())
	}
	if ctx == nil {
		return fmt.Errorf("%w: fenced upsert of %s: %w", ErrInvalidOptions, row.resource(), errfamily.ErrNilContext)
	}
	tag, err := db.Exec(ctx, sh.upsert, sh.args(row, set, h)...)
	if err != nil {
		return wrapDBError("fenced upsert of", row.resource(), err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	// The key existed (the insert did not happen) and the rule refused the
	// update. A row gone by the time of the read was deleted in between:
	// running the write again will insert it.
	return refused(ctx, db, row, sh.current, h, fmt.Errorf("%w: row deleted concurrently", ErrRetryable))
}

// refused explains a statement that changed no row: it reads the row's
// fence and returns a *fence.StaleTokenError, ErrScopeMismatch when the row
// is fenced by another scope, or notFound when the row does not exist.
//
// The read is a second statement. In a transaction under REPEATABLE READ or
// SERIALIZABLE it sees the snapshot the refusal saw. Under READ COMMITTED,
// or on a pool, it may see a later commit; tokens only grow under the rule,
// so the token read still refuses t and is at least the one that did. A
// token that would accept t means the row was changed outside the rule (or
// moved to another key) in between, and is reported as retryable.
func refused(ctx context.Context, db DBTX, row Row, currentSQL string, h fence.Holder, notFound error) error {
	var (
		current      int64
		currentOwner string
		currentScope *string
	)
	err := db.QueryRow(ctx, currentSQL, row.Key).Scan(&current, &currentOwner, &currentScope)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s", notFound, row.resource())
	case err != nil:
		return wrapDBError("read fence token of", row.resource(), err)
	}
	if current < 0 {
		current = 0 // outside the contract; never reported as a token
	}
	if current > 0 && currentScope != nil && *currentScope != h.Scope {
		return fmt.Errorf("%w: %s: the row's token %d is of scope %q, the write's of scope %q",
			ErrScopeMismatch, row.resource(), current, *currentScope, h.Scope)
	}
	if fence.Accept(fence.Token(current), currentOwner, h.Token, h.Owner) {
		return fmt.Errorf("pgfence: %s: write refused but the row now accepts token %d: changed concurrently outside the rule: %w",
			row.resource(), h.Token, ErrRetryable)
	}
	return &fence.StaleTokenError{Resource: row.resource(), Scope: h.Scope, Presented: h.Token, Current: fence.Token(current)}
}
