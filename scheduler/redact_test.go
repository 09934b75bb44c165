package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// errDSN is the error of issue 32: a job that fails dialing its
// database with the password in the URL.
var errDSN = errors.New("dial postgres://user:s3cret@db.internal/payments: refused")

// Issue 32, 3: the password in a failed job's error reached the ledger,
// the operators' reads and every job_run_finished event.
func TestFailedJobErrorIsRedactedBeforeItIsStoredOrLogged(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const maxAttempts = 2
		at := past(1, 0)[0]
		var mu sync.Mutex
		var finished []string // the error attribute of each job_run_finished
		var logged []string   // every attribute of every event
		record := logTo(func(msg string, attrs map[string]string) {
			mu.Lock()
			defer mu.Unlock()
			for k, v := range attrs {
				logged = append(logged, msg+" "+k+"="+v)
			}
			if msg == "job_run_finished" {
				finished = append(finished, attrs["error"])
			}
		})
		job := Job{
			Name: "payments", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
			MaxAttempts: maxAttempts, RetryBackoff: 50 * time.Millisecond,
			Run: func(context.Context, Run) error { return fmt.Errorf("attempt: %w", errDSN) },
		}
		sched := s.replica(t, record)
		require.NoError(t, sched.Register(job))
		claimNow(t, sched, "payments", "", at)
		require.NoError(t, sched.Start(context.Background())) // its dispatcher makes the retry
		testwait.Until(t, 10*time.Second, "every attempt made", func() bool {
			rec := s.record(t, "payments", "", at)
			return rec.Attempt == maxAttempts && rec.Status == ledger.StatusFailed
		})
		require.NoError(t, sched.Stop(context.Background()))

		const want = "attempt: dial postgres://user:***@db.internal/payments: refused"
		stored := s.record(t, "payments", "", at) // the store's own record
		require.Len(t, stored.Attempts, maxAttempts)
		for _, a := range stored.Attempts {
			require.Equal(t, want, a.Error, "the ledger stores the masked error")
		}
		rec, found, err := sched.Record(context.Background(), "payments", "", at)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, want, rec.Attempts[0].Error)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []string{want, want}, finished)
		for _, l := range logged {
			require.NotContains(t, l, "s3cret")
		}
	})
}

// Options.Redact replaces the default; records stored without it (by an
// older build, or a replica that opted out) are masked when read.
func TestRedactIsAnOptionAndAppliesToReads(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		job := Job{
			Name: "payments", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), MaxAttempts: 1,
			Run: func(context.Context, Run) error { return errors.New("token=abc mine=xyz") },
		}
		mine := s.replica(t, func(o *Options) {
			o.Redact = func(t string) string { return strings.ReplaceAll(DefaultRedact(t), "xyz", "[mine]") }
		})
		require.NoError(t, mine.Register(job))
		claimNow(t, mine, "payments", "", at)
		a, _ := s.record(t, "payments", "", at).Latest()
		require.Equal(t, "token=*** mine=[mine]", a.Error)

		// A replica that stores errors as they are (identity Redact).
		at2 := at.Add(-time.Second)
		raw := job
		raw.StartAt, raw.EndAt, raw.Run = at2, at, func(context.Context, Run) error { return errDSN }
		asIs := s.replica(t, func(o *Options) { o.Redact = func(t string) string { return t } })
		require.NoError(t, asIs.Register(raw))
		claimNow(t, asIs, "payments", "", at2)
		a, _ = s.record(t, "payments", "", at2).Latest()
		require.Equal(t, errDSN.Error(), a.Error, "stored as it is")

		reader := s.replica(t) // the default Redact
		require.NoError(t, reader.Register(raw))
		rec, _, err := reader.Record(context.Background(), "payments", "", at2)
		require.NoError(t, err)
		require.Equal(t, "dial postgres://user:***@db.internal/payments: refused", rec.Attempts[0].Error)
		recs, err := reader.Runs(context.Background(), "payments", "", at2, at2.Add(time.Second), 10)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, "dial postgres://user:***@db.internal/payments: refused", recs[0].Attempts[0].Error)
		st, err := reader.JobStatus(context.Background(), "payments")
		require.NoError(t, err)
		require.True(t, st.HasLast)
		for _, a := range st.Last.Attempts {
			require.NotContains(t, a.Error, "s3cret")
		}
	})
}

// The masked text is what the Ledger interface receives, so every store
// (redisledger, pgledger, ledgertest.Memory, a user's) keeps it masked.
func TestLedgerReceivesTheMaskedError(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		w := &watchedLedger{}
		sched := s.replica(t, watched(w))
		require.NoError(t, sched.Register(Job{
			Name: "payments", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), MaxAttempts: 1,
			Run: func(context.Context, Run) error { return Permanent(fmt.Errorf(`config {"api_key":"k3y"}: %w`, errDSN)) },
		}))
		claimNow(t, sched, "payments", "", at)
		calls := w.calls()
		require.Len(t, calls, 1)
		require.Equal(t, ledger.ClassPermanent, calls[0].outcome.Class)
		require.Equal(t, `config {"api_key":"***"}: dial postgres://user:***@db.internal/payments: refused`, calls[0].outcome.Error)
	})
}

// A job that formats its Run, its Holder or its owner into an error must
// not hand the owner (a write capability) to the ledger, the logs and the
// operators' views (found by a fresh user's trial: "settle %v" of
// run.Holder() and "%+v" of the Run reached GET /admin/jobs/{job}/runs and
// job_run_finished). Run and fence.Holder format the owner id, and the
// attempt's owner is replaced by its owner id in the error's text, also
// for a record stored by a build that did not (Record, Runs). Control:
// without maskOwner, the "%s" of Owner reaches the ledger.
func TestFailedJobErrorNeverCarriesTheOwner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		var mu sync.Mutex
		var owner string
		var logged []string
		record := logTo(func(msg string, attrs map[string]string) {
			mu.Lock()
			defer mu.Unlock()
			for k, v := range attrs {
				logged = append(logged, msg+" "+k+"="+v)
			}
		})
		job := Job{
			Name: "payments", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), MaxAttempts: 1,
			Run: func(_ context.Context, r Run) error {
				mu.Lock()
				owner = r.Owner
				mu.Unlock()
				return fmt.Errorf("settle %v, run %+v, %#v, owner %s: bank 503", r.Holder(), r, r, r.Owner)
			},
		}
		sched := s.replica(t, record)
		require.NoError(t, sched.Register(job))
		claimNow(t, sched, "payments", "", at)
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, owner)
		a, _ := s.record(t, "payments", "", at).Latest()
		require.NotContains(t, a.Error, owner, "the ledger's record")
		require.Contains(t, a.Error, "owner owner_id:"+fence.OwnerID(owner)+": bank 503")
		require.Contains(t, a.Error, "OwnerID:"+fence.OwnerID(owner))
		rec, _, err := sched.Record(context.Background(), "payments", "", at)
		require.NoError(t, err)
		require.NotContains(t, rec.Attempts[0].Error, owner, "Record")
		for _, l := range logged {
			require.NotContains(t, l, owner)
		}

		// A record stored with the owner in its error (an older build):
		// masked when read.
		old := ledger.Record{Attempts: []ledger.Attempt{{Owner: owner, Error: "owner " + owner}}}
		require.Equal(t, "owner owner_id:"+fence.OwnerID(owner), sched.redacted(old).Attempts[0].Error)
	})
}

// A Run formatted by fmt (every verb: before Format, %d printed the
// owner) or slog shows its owner id, never its owner.
func TestRunNeverFormatsItsOwner(t *testing.T) {
	t.Parallel()
	r := Run{Slot: ledger.Slot{Job: "settle", At: time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)}, Attempt: 2,
		Token: 1796557722000975, Owner: "c4cf6eb9f6f86911b62410cefdeb973e", Scope: "settle"}
	id := fence.OwnerID(r.Owner)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X"} {
		got := fmt.Sprintf(verb, r)
		require.NotContains(t, got, r.Owner, verb)
		require.Contains(t, got, "OwnerID:"+id, verb)
		require.Contains(t, got, `Job:`, verb)
		require.Contains(t, got, "1796557722000975", verb)
	}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "run", r)
	require.NotContains(t, buf.String(), r.Owner)
	require.Contains(t, buf.String(), `"owner_id":"`+id+`"`)
	require.Contains(t, buf.String(), `"attempt":2`)
	// encoding/json: every field but the owner (it printed the owner: a
	// fresh user's trial).
	b, err := json.Marshal([]any{r, &r})
	require.NoError(t, err)
	require.NotContains(t, string(b), r.Owner)
	require.Equal(t, 2, strings.Count(string(b), `"Owner":"[owner]","OwnerID":"`+id+`"`), string(b))
	require.Contains(t, string(b), `"Job":"settle","At":"2026-03-08T07:00:00Z","Partition":""`)
	require.Contains(t, string(b), `"Attempt":2,"Token":1796557722000975,`)
	require.Contains(t, string(b), `"Scope":"settle"`)
}

// TestRedisCommandsNeverShowARunsOwner: the text of every command the
// scheduler's lease client and ledger send, as redisotel's tracing hook
// records it (db.statement) and as a logging hook prints it, never holds
// an attempt's owner, end to end: triggered slots of a partitioned job, a
// failed attempt's record, its retry and the success. (redisledger's
// TestRedisCommandsNeverShowTheOwner covers each ledger transition.)
func TestRedisCommandsNeverShowARunsOwner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		seen := redistest.RecordStatements(s.rdb)
		var log runLog
		failed := map[string]bool{}
		var mu sync.Mutex
		job := Job{Name: "settle", Spec: yearly, Partitions: []string{"a", "b"}, MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond,
			Run: func(ctx context.Context, run Run) error {
				log.add(run)
				mu.Lock()
				defer mu.Unlock()
				if !failed[run.Slot.Partition] {
					failed[run.Slot.Partition] = true
					return errors.New("downstream unavailable")
				}
				return nil
			}}
		a := s.started(t, job)
		at := map[string]time.Time{}
		for _, p := range job.Partitions {
			slot, err := a.Trigger(context.Background(), "settle", p, "")
			require.NoError(t, err)
			at[p] = slot.At
		}
		testwait.Until(t, 10*time.Second, "both partitions succeeded on their second attempt", func() bool {
			return s.status("settle", "a", at["a"]) == ledger.StatusSucceeded && s.status("settle", "b", at["b"]) == ledger.StatusSucceeded
		})
		require.NoError(t, a.Stop(context.Background()))

		runs := log.all()
		require.Len(t, runs, 4, "two attempts per partition")
		owners := make([]string, len(runs))
		for i, r := range runs {
			require.NotEmpty(t, r.Owner)
			owners[i] = r.Owner
		}
		require.Empty(t, seen.Showing(owners...), "a command shows an owner")
		require.Contains(t, seen.String(), "[owner]")
	})
}
