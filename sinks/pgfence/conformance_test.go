package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// The conformance suite of package sinktest, run against every way pgfence
// fences a write, plus the negative control with the fence removed.

// sinkScope is the scope every adapter presents: the suite's registers are
// each one fence of one lease. Scope keying has tests of its own.
const sinkScope = "sinktest-lease"

// guardSink adapts Guard.Check: Check and the business write in one
// transaction at the pool's default level, as the package documentation
// shows, run again while it fails with a retryable error (IsRetryable:
// under a REPEATABLE READ or SERIALIZABLE default, racing writers of one
// resource make Check or COMMIT fail with 40001).
type guardSink struct{ b *bundle }

func (s guardSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	return retrying(func() error {
		return pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
			if err := s.b.guard.Check(ctx, tx, resource, fence.Holder{Scope: sinkScope, Token: t, Owner: owner}); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+s.b.registers()+` (resource, value) VALUES ($1, $2)
			ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value`, resource, value)
			return err
		})
	})
}

// WriteScoped is Write under h's own scope (sinktest.ScopedWriter).
func (s guardSink) WriteScoped(ctx context.Context, resource string, h fence.Holder, value string) error {
	return retrying(func() error {
		return pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
			if err := s.b.guard.Check(ctx, tx, resource, h); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+s.b.registers()+` (resource, value) VALUES ($1, $2)
			ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value`, resource, value)
			return err
		})
	})
}

// PruneSlotScopes is Guard.PruneSlotScopes on the pool (fence.SlotScopePruner).
func (s guardSink) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	return s.b.guard.PruneSlotScopes(ctx, s.b.pool, resource, unit, before)
}

// retrying runs the transaction write (or a read) again while it fails with an error
// IsRetryable matches, at most maxAttempts times: what the package
// documentation asks of a caller.
func retrying(write func() error) error {
	var err error
	for range maxAttempts {
		if err = write(); !pgfence.IsRetryable(err) {
			return err
		}
	}
	return err
}

// Read takes the value and the guard's token in one statement: one snapshot.
func (s guardSink) Read(ctx context.Context, resource string) (string, fence.Token, error) {
	guard := pgx.Identifier{s.b.schema, pgfence.DefaultTable}.Sanitize()
	var (
		value string
		token int64
	)
	// Retried as the writes are: at a SERIALIZABLE default a lone SELECT
	// can fail with 40001 too.
	err := retrying(func() error {
		return s.b.pool.QueryRow(ctx, `SELECT
		coalesce((SELECT value FROM `+s.b.registers()+` WHERE resource = $1), ''),
		coalesce((SELECT token FROM `+guard+` WHERE resource = $1 AND scope = $2), 0)`, resource, sinkScope).Scan(&value, &token)
	})
	return value, fence.Token(token), err
}

func (b *bundle) registers() string { return pgx.Identifier{b.schema, "registers"}.Sanitize() }

func newGuardSink(t *testing.T) sinktest.Sink { return newGuardSinkAt("")(t) }

// newGuardSinkAt returns guardSinks whose transactions run on a pool
// defaulting to isolation ("": the server's default).
func newGuardSinkAt(isolation string) func(t *testing.T) sinktest.Sink {
	return func(t *testing.T) sinktest.Sink {
		b := setup(t)
		if isolation != "" {
			b.pool = shared.PoolAt(t, isolation)
		}
		return guardSinkOn(t, b)
	}
}

func guardSinkOn(t *testing.T, b *bundle) sinktest.Sink {
	_, err := b.pool.Exec(t.Context(), `CREATE TABLE `+b.registers()+` (resource text PRIMARY KEY, value text NOT NULL)`)
	require.NoError(t, err)
	return guardSink{b}
}

// rowSink adapts FencedUpdate or FencedUpsert on a user table
//
//	registers(resource text PRIMARY KEY, value text NOT NULL DEFAULT '',
//	          fence_token bigint, fence_owner text, fence_scope text)
//
// in autocommit on the pool (at the pool's default level, defaultIso:
// the server's when "") or, with isolation set, in a transaction of that
// level, run again while it fails with ErrRetryable.
type rowSink struct {
	pool      *pgxpool.Pool
	table     pgx.Identifier
	upsert    bool
	isolation pgx.TxIsoLevel // "": no transaction
}

func newRowSink(upsert bool, isolation pgx.TxIsoLevel) func(t *testing.T) sinktest.Sink {
	return newRowSinkAt(upsert, isolation, "")
}

func newRowSinkAt(upsert bool, isolation pgx.TxIsoLevel, defaultIso string) func(t *testing.T) sinktest.Sink {
	return func(t *testing.T) sinktest.Sink {
		pool := testPool(t)
		if defaultIso != "" {
			pool = shared.PoolAt(t, defaultIso)
		}
		schema := newSchema(t)
		s := &rowSink{pool: pool, table: pgx.Identifier{schema, "registers"}, upsert: upsert, isolation: isolation}
		_, err := pool.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+s.table.Sanitize()+` (resource text PRIMARY KEY, value text NOT NULL DEFAULT '', fence_token bigint, fence_owner text, fence_scope text)`)
		require.NoError(t, err)
		return s
	}
}

// maxAttempts bounds the retries of a serialization failure; one writer
// commits in every round of conflicts, so this is never reached.
const maxAttempts = 1000

func (s *rowSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	if !s.upsert {
		// FencedUpdate needs the row: the application created it, with no
		// fence yet (NULL), before any fenced write. Same state as absent.
		if err := retrying(func() error {
			_, err := s.pool.Exec(ctx, `INSERT INTO `+s.table.Sanitize()+` (resource) VALUES ($1) ON CONFLICT DO NOTHING`, resource)
			return err
		}); err != nil {
			return err
		}
	}
	write := pgfence.FencedUpdate
	if s.upsert {
		write = pgfence.FencedUpsert
	}
	row := pgfence.Row{Table: s.table, KeyColumn: "resource", Key: resource}
	set := map[string]any{"value": value}
	if s.isolation == "" {
		return retrying(func() error { // a statement of its own: an implicit transaction
			return write(ctx, s.pool, row, set, fence.Holder{Scope: sinkScope, Token: t, Owner: owner})
		})
	}
	return retrying(func() error { // from the statement or from COMMIT
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: s.isolation}, func(tx pgx.Tx) error {
			return write(ctx, tx, row, set, fence.Holder{Scope: sinkScope, Token: t, Owner: owner})
		})
	})
}

func (s *rowSink) Read(ctx context.Context, resource string) (string, fence.Token, error) {
	var (
		value string
		token int64
	)
	// Retried as the writes are: at a SERIALIZABLE default a lone SELECT
	// can fail with 40001 too (read/write dependencies among transactions).
	err := retrying(func() error {
		return s.pool.QueryRow(ctx, `SELECT value, coalesce(fence_token, 0) FROM `+s.table.Sanitize()+` WHERE resource = $1`, resource).
			Scan(&value, &token)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fence.None, nil
	}
	return value, fence.Token(token), err
}

// unguardedRowSink is the negative control: it reads the fence columns,
// applies the rule in Go, and then writes without the WHERE clause, in two
// statements, the mistake FencedUpdate exists to prevent.
type unguardedRowSink struct{ *rowSink }

func (s unguardedRowSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	var (
		current      int64
		currentOwner string
	)
	err := s.pool.QueryRow(ctx, `SELECT coalesce(fence_token, 0), coalesce(fence_owner, '') FROM `+s.table.Sanitize()+
		` WHERE resource = $1`, resource).Scan(&current, &currentOwner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if err := fence.Check(resource, fence.Token(current), currentOwner, t, owner); err != nil {
		return err
	}
	runtime.Gosched()
	_, err = s.pool.Exec(ctx, `INSERT INTO `+s.table.Sanitize()+` (resource, value, fence_token, fence_owner) VALUES ($1, $2, $3, $4)
		ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, fence_token = EXCLUDED.fence_token, fence_owner = EXCLUDED.fence_owner`,
		resource, value, int64(t), owner)
	return err
}

func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("GuardCheck", func(t *testing.T) {
		t.Parallel()
		sinktest.Exercise(t, newGuardSink)
	})
	for _, upsert := range []bool{false, true} {
		for _, iso := range []pgx.TxIsoLevel{"", pgx.Serializable} {
			name := fmt.Sprintf("%s/%s", map[bool]string{false: "FencedUpdate", true: "FencedUpsert"}[upsert],
				map[pgx.TxIsoLevel]string{"": "ReadCommittedAutocommit", pgx.Serializable: "SerializableTx"}[iso])
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				sinktest.Exercise(t, newRowSink(upsert, iso))
			})
		}
	}
	// The caller's transactions and statements at every level a database
	// may default to: refusals stay refusals, and a serialization failure
	// is ErrRetryable, which the caller runs again.
	for _, iso := range pgtest.Isolations {
		t.Run("DefaultIsolation/"+iso+"/GuardCheck", func(t *testing.T) {
			t.Parallel()
			sinktest.Exercise(t, newGuardSinkAt(iso))
		})
		for _, upsert := range []bool{false, true} {
			name := map[bool]string{false: "FencedUpdate", true: "FencedUpsert"}[upsert]
			t.Run("DefaultIsolation/"+iso+"/"+name, func(t *testing.T) {
				t.Parallel()
				sinktest.Exercise(t, newRowSinkAt(upsert, "", iso))
			})
		}
	}
	t.Run("NegativeControlUnguarded", func(t *testing.T) {
		t.Parallel()
		newSink := newRowSink(true, "")
		sinktest.NegativeControl(t, func(t *testing.T) sinktest.Sink {
			return unguardedRowSink{newSink(t).(*rowSink)}
		})
	})
}
