// Package pgtx runs the statements a holdfast Postgres store sends on its
// own (not inside a caller's transaction) at the isolation level they were
// designed for, READ COMMITTED, whatever the server's or the role's
// default_transaction_isolation, and retries the two failures after which
// running the transaction again can succeed.
//
// A single statement sent outside a transaction runs at the default level
// too: under REPEATABLE READ or SERIALIZABLE an INSERT ... ON CONFLICT DO
// UPDATE or an UPDATE of a row another transaction changed after the
// statement's snapshot fails with SQLSTATE 40001 instead of waiting for the
// row and re-reading it, as READ COMMITTED does. So every such statement
// runs in an explicit READ COMMITTED transaction: Batch sends BEGIN, the
// statements and COMMIT in one pipeline (one round trip, as the bare
// statement took), Tx begins one with pgx.TxOptions for code that needs a
// pgx.Tx (three round trips for one statement: pgx sends BEGIN at once,
// not with the first query).
//
// A statement can also pin its level itself: one that gates every write
// on AtReadCommitted (and says whether it held) does nothing unless it
// runs at READ COMMITTED, and where the session's default is READ
// COMMITTED it can be sent on its own, without Batch's BEGIN and COMMIT:
// the same transaction at the same level, with two statements fewer for
// the server and less client work (pgx v5.12 makes 4 allocations for an
// INSERT sent alone, 45 for the same INSERT in Batch). Lone remembers
// when the default is another level, so that such statements go through
// Batch from then on.
//
// Both retry a serialization failure (40001) or a deadlock (40P01): the
// transaction was rolled back, so running it again is safe. At most
// MaxAttempts attempts, each wait a jittered exponential backoff (from
// RetryBase, capped at RetryMax, drawn from [d/2, d]) within ctx.
package pgtx

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/retry"
)

// ReadCommitted is the mode of every transaction pgtx begins.
var ReadCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// Retry limits: MaxAttempts attempts in all (6), waits from RetryBase
// (5 ms) doubling up to RetryMax (100 ms), each drawn from [d/2, d].
const (
	MaxAttempts = 6
	RetryBase   = 5 * time.Millisecond
	RetryMax    = 100 * time.Millisecond
)

// AtReadCommitted is an SQL condition that holds in a READ COMMITTED
// transaction and in no other. A statement sent on its own (outside an
// explicit transaction) runs at the session's default level: one that
// writes only where AtReadCommitted holds does nothing at another.
const AtReadCommitted = `pg_catalog.current_setting('transaction_isolation') = 'read committed'`

// Lone says whether a store's statements that gate their writes on
// AtReadCommitted are worth sending on their own: until one of them finds
// another level (the session's default), they are; from then on they go
// through Batch. It is a hint for speed only: the gate, not Lone, keeps
// such a statement from writing at another level. The zero value tries
// them alone. Safe for concurrent use.
type Lone struct{ elsewhere atomic.Bool }

// Try reports whether to send a gated statement on its own.
func (l *Lone) Try() bool { return !l.elsewhere.Load() }

// NotReadCommitted records that a gated statement sent on its own found
// another level than READ COMMITTED: Try reports false from now on.
func (l *Lone) NotReadCommitted() { l.elsewhere.Store(true) }

// rollbackTimeout bounds the rollback of a transaction whose ctx ended.
const rollbackTimeout = 5 * time.Second

// Batcher sends a pgx.Batch: *pgxpool.Pool and *pgx.Conn do. A pgx.Tx
// refuses a batch that begins a transaction.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Beginner begins a transaction: *pgxpool.Pool and *pgx.Conn do.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Retryable reports whether err holds a *pgconn.PgError whose SQLSTATE is
// a serialization failure (40001) or a deadlock (40P01).
func Retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// ErrInTransaction is returned by Batch and Tx, before any I/O, for a
// database that is inside a transaction they did not begin: a pgx.Tx given
// to Batch, or a connection (*pgx.Conn, *pgxpool.Conn) whose session is in
// a transaction begun by hand (BEGIN through Exec). Their BEGIN would only
// warn there, and their COMMIT would commit the caller's transaction. Tx
// takes a pgx.Tx (pgx begins a savepoint in it). It matches the family's
// ErrInvalidOptions.
var ErrInTransaction = fmt.Errorf("%w: the database is inside a transaction (a pgx.Tx, or a connection in a transaction begun by hand): "+
	"this call runs a transaction of its own, whose COMMIT would commit yours; give it a pool, or a connection outside a transaction", errfamily.ErrInvalidOptions)

// InTransaction reports whether db is a pgx.Tx, or a connection whose
// session is inside a transaction (its last ReadyForQuery said 'T' or
// 'E'). It sends nothing.
func InTransaction(db any) bool {
	switch c := db.(type) {
	case pgx.Tx:
		return true
	case *pgx.Conn:
		return c != nil && c.PgConn().TxStatus() != 'I'
	case *pgxpool.Conn:
		return c != nil && c.Conn().PgConn().TxStatus() != 'I'
	}
	return false
}

// Batch runs the statements queue puts in a batch (with their
// QueuedQuery callbacks) in one READ COMMITTED transaction, in one round
// trip: BEGIN, the statements and COMMIT are pipelined. queue is called
// once per attempt on a fresh batch; its callbacks must reset what they
// set. A failed transaction is rolled back (one more round trip) so the
// connection goes back clean. It returns the first error of the batch
// (a callback's included).
func Batch(ctx context.Context, db Batcher, queue func(b *pgx.Batch)) error {
	if InTransaction(db) {
		return ErrInTransaction
	}
	return Retry(ctx, func() error {
		b := &pgx.Batch{}
		b.BeginTx(ReadCommitted)
		queue(b)
		b.Queue("COMMIT")
		br := db.SendBatch(ctx, b)
		tx := br.Tx()
		err := br.Close()
		switch {
		case tx == nil:
		case err == nil:
			// The COMMIT ran, so the transaction is closed: Rollback sends
			// nothing and only gives the pool its connection back, so it
			// needs none of rollback's timer (a timer and a wake-up of the
			// runtime per statement: 8% of a batched INSERT's client CPU
			// profile).
			_ = tx.Rollback(context.WithoutCancel(ctx))
		default:
			rollback(ctx, tx)
		}
		return err
	})
}

// Tx runs fn in a READ COMMITTED transaction begun on db and commits it
// when fn returns nil; otherwise it rolls it back and returns fn's error.
func Tx(ctx context.Context, db Beginner, fn func(tx pgx.Tx) error) error {
	if _, isTx := db.(pgx.Tx); !isTx && InTransaction(db) {
		return ErrInTransaction
	}
	return Retry(ctx, func() error {
		tx, err := db.BeginTx(ctx, ReadCommitted)
		if err != nil {
			return err
		}
		committing := false
		defer func() {
			if !committing { // fn failed or panicked
				rollback(ctx, tx)
			}
		}()
		if err := fn(tx); err != nil {
			return err
		}
		// Commit closes tx whether it succeeds or not (and a pool's Tx
		// gives its connection back): nothing is left to roll back.
		committing = true
		return tx.Commit(ctx)
	})
}

// rollback rolls tx back, beyond ctx's end (bounded by rollbackTimeout),
// so that a canceled call leaves a usable connection.
func rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(rctx) // after a commit: pgx.ErrTxClosed, ignored
}

// Retry runs attempt until it succeeds, fails with an error that is not
// Retryable, MaxAttempts ran, or ctx ended (then ctx's error joined with
// the last attempt's). attempt must be a whole transaction (or a single
// statement sent alone): a retryable failure rolled it back.
func Retry(ctx context.Context, attempt func() error) error {
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || !Retryable(err) || n == MaxAttempts {
			return err
		}
		t := time.NewTimer(retry.Delay(n, RetryBase, RetryMax, 0.5, 0, nil))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, context.Cause(ctx))
		case <-t.C:
		}
	}
}
