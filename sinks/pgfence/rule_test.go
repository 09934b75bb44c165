package pgfence_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The shared case table of the acceptance rule, through Check (tokens up
// to the bigint maximum).
func TestCheckPassesTheRuleTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		return b.guard.Check(ctx, b.pool, resource, h)
	})
}

// CheckOwnTx, Check in a transaction of its own sent as one pipeline,
// passes the same table, and its refusal names the stored token.
func TestCheckOwnTxPassesTheRuleTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		return b.guard.CheckOwnTx(ctx, b.pool, resource, h)
	})
	ctx := t.Context()
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, "own", fence.Holder{Scope: "s", Token: 10, Owner: "a"}))
	err := b.guard.CheckOwnTx(ctx, b.pool, "own", fence.Holder{Scope: "s", Token: 5, Owner: "b"})
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: "own", Scope: "s", Presented: 5, Current: 10}, *stale)
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, "own", fence.Holder{Scope: "other", Token: 5, Owner: "b"}), "another scope's fence")
	tok, owner, err := b.guard.Current(ctx, b.pool, "own", "s")
	require.NoError(t, err)
	require.Equal(t, fence.Token(10), tok)
	require.Equal(t, "a", owner)
	require.ErrorIs(t, b.guard.CheckOwnTx(ctx, b.pool, "own", fence.Holder{Scope: "s", Token: math.MaxInt64 + 1, Owner: "a"}), pgfence.ErrTokenOutOfRange)
	require.ErrorIs(t, b.guard.CheckOwnTx(ctx, nil, "own", fence.Holder{Scope: "s", Token: 11, Owner: "a"}), pgfence.ErrInvalidOptions)
}

// Above the bigint maximum Check refuses with ErrTokenOutOfRange, never a
// decision.
func TestCheckRefusesTokensAboveInt64(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.guard.Check(t.Context(), b.pool, "r", fence.Holder{Token: math.MaxInt64 + 1, Owner: "a"})
	require.ErrorIs(t, err, pgfence.ErrTokenOutOfRange)
	require.NotErrorIs(t, err, fence.ErrStaleToken)
}

// FencedUpdate and FencedUpsert on a caller's table pass the same table:
// their predicate is the guard's rule (fencerule.SQLAccepts) inside the
// row's own checks (no token yet, scope). FencedUpdate's row exists before
// its first write, fence columns NULL, as an application creates it.
func TestFencedUpdatePassesTheRuleTable(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		_, err := tb.pool.Exec(ctx, `INSERT INTO `+tb.ident.Sanitize()+` (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, resource)
		require.NoError(t, err)
		return pgfence.FencedUpdate(ctx, tb.pool, tb.row(resource), map[string]any{"value": h.Owner}, h)
	})
}

func TestFencedUpsertPassesTheRuleTable(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		return pgfence.FencedUpsert(ctx, tb.pool, tb.row(resource), map[string]any{"value": h.Owner}, h)
	})
}

// Racing holders of one resource on a pool defaulting to SERIALIZABLE
// each get a decision from CheckOwnTx (nil or a stale token), never a
// serialization failure, and the guard ends at the highest token. Its
// READ COMMITTED transaction and its retry of 40001 both serve this; the
// test does not tell which of the two gave a decision.
func TestCheckOwnTxDecidesUnderASerializableDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := shared.PoolAt(t, "serializable")
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- b.guard.CheckOwnTx(t.Context(), pool, "race", fence.Holder{Scope: "s", Token: fence.Token(i + 1), Owner: "o"})
		}()
	}
	accepted := 0
	for range n {
		err := <-errs
		if err == nil {
			accepted++
			continue
		}
		require.ErrorIs(t, err, fence.ErrStaleToken)
	}
	require.Positive(t, accepted)
	tok, _, err := b.guard.Current(t.Context(), b.pool, "race", "s")
	require.NoError(t, err)
	require.Equal(t, fence.Token(n), tok)
}

// CheckOwnTx and PruneSlotScopes refuse, with ErrInvalidOptions and
// before any write, a connection inside a transaction begun by hand (and
// a pgx.Tx): their own COMMIT would commit the caller's transaction. The
// caller's transaction stays open and its rollback undoes its own write.
func TestOwnTransactionsRefuseAConnectionInsideATransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	require.NoError(t, b.guard.Check(ctx, conn, "intx", fence.Holder{Scope: "s", Token: 7, Owner: "a"}), "Check writes in the caller's transaction")
	err = b.guard.CheckOwnTx(ctx, conn, "intx", fence.Holder{Scope: "s", Token: 8, Owner: "a"})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
	_, err = b.guard.PruneSlotScopes(ctx, conn, "intx", "unit", time.Now().Add(-2*time.Hour))
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
	require.Equal(t, byte('T'), conn.Conn().PgConn().TxStatus(), "the caller's transaction is still open")
	_, err = conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
	tok, _, err := b.guard.Current(ctx, b.pool, "intx", "s")
	require.NoError(t, err)
	require.Equal(t, fence.None, tok, "the caller's rollback undid its Check")
}
