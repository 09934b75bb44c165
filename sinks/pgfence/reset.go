package pgfence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// Errors of Guard.Reset; nothing is changed when either is returned.
var (
	// ErrFenceActive: the fence was raised less than ResetOptions.IdleFor
	// ago, so a holder may be writing under it.
	ErrFenceActive = errors.New("pgfence: fence in active use")
	// ErrFenceChanged: the fence no longer holds ResetOptions.Expect: a
	// holder raised it since it was inspected.
	ErrFenceChanged = errors.New("pgfence: fence changed since it was read")
)

// ResetOptions are the safety checks of Guard.Reset.
type ResetOptions struct {
	// Expect, when not fence.None, is the token the caller inspected: the
	// fence is removed only while it still holds it (ErrFenceChanged
	// otherwise).
	Expect fence.Token
	// IdleFor refuses (ErrFenceActive) to remove a fence raised less than
	// IdleFor ago, by the database's clock (updated_at). 0: no check.
	IdleFor time.Duration
}

// ResetResult is the fence Guard.Reset found: its token (fence.None when
// (resource, scope) had no fence) and when it was last raised.
type ResetResult struct {
	Token     fence.Token
	UpdatedAt time.Time
}

// Reset removes the guard row of (resource, scope), so that the next write
// of any holder of scope is accepted again, and returns what it held (a
// zero ResetResult, and no error, when there was none). It is an operator's
// way out of a fence raised by a token no holder was issued (a forged or
// corrupted one; holdfast fence reset): it never runs as part of normal
// operation. The checks of opts and the removal are one statement, holding
// the row's lock, so a concurrent Check lands either before the reset (and
// counts for opts) or after it (and creates the fence anew with its token).
//
// Removing a fence lets a stale holder's late write in: call it only when
// no holder of scope can be running with an older token (the lease of
// scope is not held, or every older holder is known to be gone). It
// returns ErrFenceActive or ErrFenceChanged (with the result found) when
// opts refuse, input errors as Check does, and ErrInvalidOptions for a nil
// db.
func (g *Guard) Reset(ctx context.Context, db DBTX, resource, scope string, opts ResetOptions) (ResetResult, error) {
	if err := g.ready(); err != nil {
		return ResetResult{}, err
	}
	if err := validateResource(resource); err != nil {
		return ResetResult{}, err
	}
	if err := validateScope(scope); err != nil {
		return ResetResult{}, err
	}
	switch {
	case safe.IsNil(db):
		return ResetResult{}, fmt.Errorf("%w: reset %q: nil database", ErrInvalidOptions, resource)
	case ctx == nil:
		return ResetResult{}, fmt.Errorf("%w: reset %q: %w", ErrInvalidOptions, resource, errfamily.ErrNilContext)
	case opts.IdleFor < 0:
		return ResetResult{}, fmt.Errorf("%w: reset %q: IdleFor %v: want >= 0", ErrInvalidOptions, resource, opts.IdleFor)
	case uint64(opts.Expect) > 1<<63-1:
		return ResetResult{}, fmt.Errorf("%w: reset %q: expected token %d", ErrTokenOutOfRange, resource, opts.Expect)
	}
	if err := g.CheckFormat(ctx, db); err != nil {
		return ResetResult{}, err
	}
	guard := pgx.Identifier{g.schema, g.table}.Sanitize()
	// clock_timestamp, not now(): db may be a transaction begun long ago.
	q := `WITH cur AS (
	SELECT token, updated_at,
		($3::bigint > 0 AND updated_at > clock_timestamp() - $3::bigint * interval '1 microsecond') AS active,
		($4::bigint > 0 AND token <> $4::bigint) AS changed
	FROM ` + guard + ` WHERE resource = $1 AND scope = $2 FOR UPDATE
), gone AS (
	DELETE FROM ` + guard + ` AS g USING cur
	WHERE g.resource = $1 AND g.scope = $2 AND NOT cur.active AND NOT cur.changed
	RETURNING g.token
)
SELECT token, updated_at, active, changed FROM cur`
	var (
		token           int64
		res             ResetResult
		active, changed bool
	)
	err := db.QueryRow(ctx, q, resource, scope, opts.IdleFor.Microseconds(), int64(opts.Expect)).Scan(&token, &res.UpdatedAt, &active, &changed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ResetResult{}, nil
	case err != nil:
		return ResetResult{}, wrapDBError("reset", resource, err)
	}
	res.Token = fence.Token(token) // CHECK (token > 0): exact
	switch {
	case changed:
		return res, fmt.Errorf("%w: %q scope %q holds token %d, not %d", ErrFenceChanged, resource, scope, res.Token, opts.Expect)
	case active:
		return res, fmt.Errorf("%w: %q scope %q raised at %s, less than %v ago", ErrFenceActive, resource, scope, res.UpdatedAt.UTC().Format(time.RFC3339), opts.IdleFor)
	}
	return res, nil
}
