package redisledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// setup is one test's Redis client and a Ledger under a prefix of its own.
type setup struct {
	rdb    redis.UniversalClient
	ledger *Ledger
}

// eachBackend runs fn against real Redis and miniredis, in parallel.
func eachBackend(t *testing.T, fn func(t *testing.T, s *setup)) {
	t.Helper()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			l, err := New(rdb, Options{Prefix: redistest.Prefix(t, rdb) + "ledger:"})
			require.NoError(t, err)
			fn(t, &setup{rdb: rdb, ledger: l})
		})
	}
}

// record returns the ledger's record of the slot of (job, partition) at.
func (s *setup) record(t *testing.T, job, partition string, at time.Time) ledger.Record {
	t.Helper()
	rec, found, err := s.ledger.Get(context.Background(), ledger.Slot{Job: job, At: at, Partition: partition})
	require.NoError(t, err)
	require.True(t, found, "no ledger record for %s/%s at %v", job, partition, at)
	return rec
}

// status returns the status of the slot of (job, partition) at, "" when it
// has no record.
func (s *setup) status(job, partition string, at time.Time) ledger.Status {
	rec, found, err := s.ledger.Get(context.Background(), ledger.Slot{Job: job, At: at, Partition: partition})
	if err != nil || !found {
		return ""
	}
	return rec.Status
}

// seed makes the ledger show slot begun and finished by an earlier holder
// (token 1, below any lease token), after a State that starts the horizon.
func (s *setup) seed(t *testing.T, slot ledger.Slot, status ledger.Status) {
	t.Helper()
	ctx := context.Background()
	_, err := s.ledger.State(ctx, slot.Job, slot.Partition, slot.At, time.Now())
	require.NoError(t, err)
	f := ledger.Fence{Scope: slot.Job, Token: 1, Owner: "before-downtime"}
	attempt, _, err := s.ledger.Begin(ctx, slot, f, 3, time.Now())
	require.NoError(t, err)
	require.NoError(t, s.ledger.Finish(ctx, slot, f, attempt, ledger.Outcome{Status: status}, time.Now()))
}

// BeginIfClear begins a slot in one round trip only when State would show
// nothing else to plan; otherwise it changes nothing.
func TestRedisLedgerBeginIfClear(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		l := s.ledger
		base := time.Now().Truncate(time.Second).Add(-time.Hour)
		at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
		since := base.Add(-time.Hour)
		now := time.Now()
		f := ledger.Fence{Scope: "fresh", Token: 1_000, Owner: "a"}
		slot := func(job string, i int) ledger.Slot { return ledger.Slot{Job: job, At: at(i)} }

		// A job the ledger never saw: clear, attempt 1.
		n, left, clear, err := beginIfClear(ctx, l, slot("fresh", 1), f, 3, at(0), since, now)
		require.NoError(t, err)
		require.True(t, clear)
		require.Equal(t, []int{1, 2}, []int{n, left})
		require.Equal(t, ledger.StatusRunning, s.status("fresh", "", at(1)))
		st, err := l.State(ctx, "fresh", "", since, time.Now())
		require.NoError(t, err)
		require.False(t, st.Horizon.IsZero(), "the horizon is set as State sets it")
		requireSameTime(t, at(1), st.Last)

		// The next slot while slot 1 still runs (its holder lost the
		// lease): slot 1 is open, so not clear, and nothing changes.
		n, _, clear, err = beginIfClear(ctx, l, slot("fresh", 2), ledger.Fence{Scope: "fresh", Token: 1_001, Owner: "b"}, 3, at(1), since, now)
		require.NoError(t, err)
		require.False(t, clear)
		require.Zero(t, n)
		require.Equal(t, "", string(s.status("fresh", "", at(2))), "slot 2 untouched")
		require.Equal(t, ledger.StatusRunning, s.status("fresh", "", at(1)))

		// Slot 1 succeeds: slot 2 is clear.
		require.NoError(t, l.Finish(ctx, slot("fresh", 1), f, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now))
		n, _, clear, err = beginIfClear(ctx, l, slot("fresh", 2), f, 3, at(1), since, now)
		require.NoError(t, err)
		require.True(t, clear)
		require.Equal(t, 1, n)
		require.NoError(t, l.Finish(ctx, slot("fresh", 2), f, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now))

		// A gap: slot 3 was never begun, so slot 4 is not clear.
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 4), f, 3, at(3), since, now)
		require.NoError(t, err)
		require.False(t, clear, "slot 3 went unseen")

		// A slot already done: clear, ErrSlotDone.
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 2), f, 3, at(1), since, now)
		require.ErrorIs(t, err, ledger.ErrSlotDone)
		require.True(t, clear)

		// A stale token: clear, *fence.StaleTokenError, nothing begun.
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 3), ledger.Fence{Scope: "fresh", Token: 999, Owner: "old"}, 3, at(2), since, now)
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.True(t, clear)
		require.Equal(t, "", string(s.status("fresh", "", at(3))))

		// Paused: not clear.
		require.NoError(t, l.SetPaused(ctx, "fresh", true))
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 3), f, 3, at(2), since, now)
		require.NoError(t, err)
		require.False(t, clear, "paused")
		require.NoError(t, l.SetPaused(ctx, "fresh", false))

		// A pending slot (an operator's request): not clear.
		require.NoError(t, l.Request(ctx, slot("fresh", 1), "again", now))
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 3), f, 3, at(2), since, now)
		require.NoError(t, err)
		require.False(t, clear, "slot 1 pending")

		// The slot itself waiting for its retry time: not clear; once
		// the time has come: clear, attempt 2.
		g := ledger.Fence{Scope: "retry", Token: 2_000, Owner: "c"}
		_, _, _, err = beginIfClear(ctx, l, slot("retry", 1), g, 3, time.Time{}, since, now)
		require.NoError(t, err)
		retryAt := now.Add(time.Minute).Truncate(time.Millisecond)
		require.NoError(t, l.Finish(ctx, slot("retry", 1), g, 1, ledger.Outcome{Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "x", RetryAt: retryAt}, now))
		_, _, clear, err = beginIfClear(ctx, l, slot("retry", 1), g, 3, at(0), since, now)
		require.NoError(t, err)
		require.False(t, clear, "waiting for its retry")
		n, left, clear, err = beginIfClear(ctx, l, slot("retry", 1), g, 3, at(0), since, retryAt.Add(time.Millisecond))
		require.NoError(t, err)
		require.True(t, clear)
		require.Equal(t, []int{2, 1}, []int{n, left})
	})
}

// A batch of requests is one pipeline; each request gets its own answer,
// and after SCRIPT FLUSH the batch still answers.
func TestRedisLedgerBeginIfClearBatch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		l := s.ledger
		at := time.Now().Truncate(time.Second).Add(-time.Minute).UTC()
		since, now := at.Add(-time.Hour), time.Now()
		f := ledger.Fence{Token: 5_000, Owner: "a"}
		as := func(f ledger.Fence, job string) ledger.Fence { f.Scope = job; return f } // job's unit scope, partition ""
		// "done" succeeded; "stale" was raised by token 6,000; "gap" last
		// saw a slot two seconds back, with the one between unseen.
		for _, job := range []string{"done", "stale", "gap"} {
			s.seed(t, ledger.Slot{Job: job, At: at.Add(-2 * time.Second)}, ledger.StatusSucceeded)
		}
		_, _, err := l.Begin(ctx, ledger.Slot{Job: "done", At: at}, ledger.Fence{Scope: "done", Token: 5_500, Owner: "x"}, 3, now)
		require.NoError(t, err)
		require.NoError(t, l.Finish(ctx, ledger.Slot{Job: "done", At: at}, ledger.Fence{Scope: "done", Token: 5_500, Owner: "x"}, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now))
		require.NoError(t, l.Skip(ctx, ledger.Slot{Job: "stale", At: at.Add(-time.Second)}, ledger.Fence{Scope: "stale", Token: 6_000, Owner: "y"}, ledger.StatusSkipped, "x", now))

		require.NoError(t, s.rdb.ScriptFlush(ctx).Err())
		reqs := []ledger.BeginRequest{
			{Slot: ledger.Slot{Job: "fresh", At: at}, Fence: as(f, "fresh"), MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: ledger.Slot{Job: "done", At: at}, Fence: ledger.Fence{Scope: "done", Token: 5_600, Owner: "a"}, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: ledger.Slot{Job: "stale", At: at}, Fence: as(f, "stale"), MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: ledger.Slot{Job: "gap", At: at}, Fence: as(f, "gap"), MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: ledger.Slot{Job: "perslot", At: at}, Fence: ledger.Fence{Scope: ledger.SlotScope(ledger.Slot{Job: "perslot", At: at}), Token: 5_000, Owner: "a"}, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
		}
		out := l.BeginIfClear(ctx, reqs, now)
		require.Len(t, out, len(reqs))
		require.Equal(t, ledger.BeginResult{Attempt: 1, Left: 2, Clear: true}, out[0], "fresh")
		require.True(t, out[1].Clear, "done")
		require.ErrorIs(t, out[1].Err, ledger.ErrSlotDone)
		require.True(t, out[2].Clear, "stale")
		var stale *fence.StaleTokenError
		require.ErrorAs(t, out[2].Err, &stale)
		require.Equal(t, fence.Token(6_000), stale.Current)
		require.Equal(t, ledger.BeginResult{}, out[3], "gap: not clear")
		require.Equal(t, ledger.BeginResult{}, out[4], "per-slot fences plan")
		require.Equal(t, ledger.StatusRunning, s.status("fresh", "", at))
		require.Equal(t, ledger.Status(""), s.status("gap", "", at))
		require.Equal(t, ledger.Status(""), s.status("stale", "", at))
	})
}

// beginIfClear is one request of BeginIfClear.
func beginIfClear(ctx context.Context, l *Ledger, slot ledger.Slot, f ledger.Fence, maxAttempts int, prev, since, now time.Time) (attempt, left int, clear bool, err error) {
	r := l.BeginIfClear(ctx, []ledger.BeginRequest{{Slot: slot, Fence: f, MaxAttempts: maxAttempts, Prev: prev, Since: since}}, now)[0]
	return r.Attempt, r.Left, r.Clear, r.Err
}

func requireSameTime(t *testing.T, want, got time.Time) {
	t.Helper()
	require.True(t, want.Equal(got), "want %v, got %v", want, got)
}

// Fenced transitions go through the ledger's auto-pipeline: after SCRIPT
// FLUSH each still runs once (EVAL), and concurrent claims' transitions
// all land.
func TestRedisLedgerTransitionsAfterScriptFlushAndUnderLoad(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		at := time.Now().Truncate(time.Second).UTC()
		require.NoError(t, s.rdb.ScriptFlush(ctx).Err())
		f := ledger.Fence{Scope: "flushed", Token: 7_000, Owner: "a"}
		slot := ledger.Slot{Job: "flushed", At: at}
		n, left, err := s.ledger.Begin(ctx, slot, f, 3, time.Now())
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, []int{n, left})
		require.NoError(t, s.ledger.Heartbeat(ctx, slot, f, 1, time.Now()))
		require.NoError(t, s.ledger.Finish(ctx, slot, f, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now()))
		require.Equal(t, ledger.StatusSucceeded, s.status("flushed", "", at))
		rec := s.record(t, "flushed", "", at)
		require.Len(t, rec.Attempts, 1, "each transition ran once")

		const claims = 48
		var wg sync.WaitGroup
		errs := make(chan error, claims)
		for i := range claims {
			wg.Go(func() {
				sl := ledger.Slot{Job: "load", At: at, Partition: fmt.Sprintf("p%02d", i)}
				g := ledger.Fence{Scope: ledger.UnitScope(sl.Job, sl.Partition), Token: fence.Token(8_000 + i), Owner: fmt.Sprintf("o%d", i)}
				n, _, err := s.ledger.Begin(ctx, sl, g, 3, time.Now())
				if err == nil {
					err = s.ledger.Finish(ctx, sl, g, n, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now())
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for i := range claims {
			require.Equal(t, ledger.StatusSucceeded, s.status("load", fmt.Sprintf("p%02d", i), at))
		}
		require.True(t, s.ledger.pipe.Idle())
	})
}

// A Finish the client sends twice (a pipeline re-sent after a lost reply
// or TRYAGAIN) is answered as recorded the second time; a different
// outcome for the ended attempt is still refused.
func TestRedisLedgerFinishSentTwice(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		slot := ledger.Slot{Job: "twice", At: time.Now().Truncate(time.Second).UTC()}
		f := ledger.Fence{Scope: "twice", Token: 9_000, Owner: "a"}
		n, _, err := s.ledger.Begin(ctx, slot, f, 3, time.Now())
		require.NoError(t, err)
		ok := ledger.Outcome{Status: ledger.StatusSucceeded}
		require.NoError(t, s.ledger.Finish(ctx, slot, f, n, ok, time.Now()))
		require.NoError(t, s.ledger.Finish(ctx, slot, f, n, ok, time.Now()), "the same call again")
		err = s.ledger.Finish(ctx, slot, f, n, ledger.Outcome{Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "x"}, time.Now())
		require.ErrorIs(t, err, fence.ErrStaleToken, "another outcome for an ended attempt")
		rec := s.record(t, "twice", "", slot.At)
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Len(t, rec.Attempts, 1)
	})
}
