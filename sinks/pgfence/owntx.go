package pgfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// Batcher is what CheckOwnTx sends its transaction on: *pgxpool.Pool and
// *pgx.Conn are Batchers (not a pgx.Tx, nor a connection inside a
// transaction begun by hand: the transaction is CheckOwnTx's, and its
// COMMIT would commit yours; both are refused with ErrInvalidOptions).
type Batcher interface {
	DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// CheckOwnTx is Check in a READ COMMITTED transaction of its own, for a
// fence check with no write of the caller's beside it (httpfence's Postgres
// fence store): BEGIN, the check, the read of the stored token that a
// refusal reports, and COMMIT are sent as one pipeline, one round trip,
// where Check in a pgx.Tx takes three (BEGIN, the check, COMMIT). A
// serialization failure or deadlock is retried (5 attempts more at most,
// jittered backoff from 5 ms to 100 ms, within ctx). It returns what Check
// returns: nil when the rule accepted (the stored token raised), a
// *fence.StaleTokenError (fence.ErrStaleToken) when it refused, Check's
// input errors, ErrInvalidOptions for a db inside a transaction, or the
// database's error.
func (g *Guard) CheckOwnTx(ctx context.Context, db Batcher, resource string, h fence.Holder) (err error) {
	if err := g.Validate(resource, h); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("%w: check %q: %w", ErrInvalidOptions, resource, errfamily.ErrNilContext)
	}
	if safe.IsNil(db) {
		return fmt.Errorf("%w: check %q: nil database", ErrInvalidOptions, resource)
	}
	if pgtx.InTransaction(db) {
		return fmt.Errorf("%w: check %q: a pgx.Tx, or a connection inside a transaction; CheckOwnTx runs a transaction of its own (use Check in yours)", ErrInvalidOptions, resource)
	}
	var span trace.Span
	ctx, span = startWrite(ctx, g.tracer, "check", resource, h)
	defer func() { endWrite(span, err) }()
	if err := g.CheckFormat(ctx, db); err != nil {
		return err
	}
	var (
		accepted bool
		current  int64
		closed   *int64 // a slot scope's watermark
	)
	unit, slot, slotScoped := fence.SplitSlotScope(h.Scope)
	err = pgtx.Batch(ctx, db, func(b *pgx.Batch) {
		accepted, current, closed = false, 0, nil
		if slotScoped {
			// As Guard.checkSlot: the closed table's row made to exist,
			// then locked FOR SHARE by the check (slotscope.go).
			b.Queue(g.slot.ensure, resource, unit)
			b.Queue(g.slot.check, resource, h.Scope, int64(h.Token), ownerarg.Owner(h.Owner), unit, slot).QueryRow(func(row pgx.Row) error {
				return row.Scan(&closed, &accepted)
			})
		} else {
			b.Queue(g.checkSQL, resource, h.Scope, int64(h.Token), ownerarg.Owner(h.Owner)).QueryRow(func(row pgx.Row) error {
				var raised int64
				err := row.Scan(&raised)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // refused: the next statement reads what refused it
				}
				accepted = err == nil
				return err
			})
		}
		// After a refusal the upsert left the row locked by this
		// transaction, so this read sees what refused it.
		b.Queue(g.currentSQL, resource, h.Scope).QueryRow(func(row pgx.Row) error {
			var owner string
			err := row.Scan(&current, &owner)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
	})
	switch {
	case err != nil:
		return wrapDBError("check", resource, err)
	case closed != nil && slot < *closed:
		return fence.ClosedScopeError(resource, h, *closed)
	case accepted:
		return nil
	}
	// The table's CHECK (token > 0) makes the conversion exact.
	return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: fence.Token(current)}
}
