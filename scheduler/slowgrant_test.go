package scheduler_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// slowGrants is a leasedriver.Backend in memory whose next slow acquisitions
// are refused as a backend refuses a grant that came too late
// (leasedriver.SlowAcquireError), as a loaded Redis makes them. Leases never
// expire: the fake-time tests take milliseconds of real time.
type slowGrants struct {
	slow atomic.Int64 // acquisitions still to refuse as slow

	mu      sync.Mutex
	tokens  map[string]fence.Token
	holders map[string]string
}

func newSlowGrants() *slowGrants {
	return &slowGrants{tokens: map[string]fence.Token{}, holders: map[string]string{}}
}

func (b *slowGrants) Acquire(_ context.Context, name, owner string, ttl time.Duration) (leasedriver.Grant, error) {
	if b.slow.Add(-1) >= 0 {
		return leasedriver.Grant{}, &leasedriver.SlowAcquireError{Name: name, Took: ttl, TTL: ttl}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.holders[name]; ok && h != owner {
		return leasedriver.Grant{Remaining: ttl}, nil
	}
	b.tokens[name]++
	b.holders[name] = owner
	return leasedriver.Grant{Acquired: true, Token: b.tokens[name]}, nil
}

func (b *slowGrants) Renew(_ context.Context, batch []leasedriver.Held) []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := make([]error, len(batch))
	for i, h := range batch {
		if b.holders[h.Name] != h.Owner {
			errs[i] = lease.ErrNotHeld
		}
	}
	return errs
}

func (b *slowGrants) Release(_ context.Context, h leasedriver.Held) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holders[h.Name] != h.Owner {
		return lease.ErrNotHeld
	}
	delete(b.holders, h.Name)
	return nil
}

// events is a slog.Handler that records the job_claim_skipped events as
// "job reason".
type events struct {
	mu      sync.Mutex
	skipped []string
}

func (e *events) Enabled(context.Context, slog.Level) bool { return true }
func (e *events) WithAttrs([]slog.Attr) slog.Handler       { return e }
func (e *events) WithGroup(string) slog.Handler            { return e }
func (e *events) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "job_claim_skipped" {
		return nil
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	e.mu.Lock()
	defer e.mu.Unlock()
	e.skipped = append(e.skipped, attrs["job"]+" "+attrs["reason"])
	return nil
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.skipped...)
}

// A slot whose lease grants come back too late (lease.ErrSlowAcquire:
// refused, no token handed out) is claimed again a second later, as its
// own fire: it runs on time, under MissedSkip too, and each refusal is
// logged (reason slow_grant). A slot refused past its lateness falls to
// the missed-slot policy, which records it: never silently lost.
func TestFakeTimeSlowGrantIsRetried(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 59), func(t *testing.T, r *rig) {
		replica := func(slow int64, job scheduler.Job) *events {
			backend := newSlowGrants()
			backend.slow.Store(slow)
			leases, err := lease.NewWithBackend(backend, lease.Options{})
			require.NoError(t, err)
			ev := &events{}
			r.replicaWith(0, func(c *scheduler.Options) { c.Leases, c.Logger = leases, slog.New(ev) }, job)
			return ev
		}
		onTime, late := newGated(r), newGated(r)
		// The 10:00 fire and its first retry are refused.
		onTimeEvents := replica(2, scheduler.Job{Name: "hourly", Spec: "0 * * * *", Missed: scheduler.MissedSkip, Run: onTime.run})
		// Refused until 10:00:07, past maxLateness (5 s).
		lateEvents := replica(8, scheduler.Job{Name: "refused", Spec: "0 * * * *", Missed: scheduler.MissedSkip, Run: late.run})
		r.tick(12*time.Second, 250*time.Millisecond) // to 10:00:11

		require.Equal(t, []time.Time{utc(10, 0, 0)}, onTime.slots(), "run by the second retry")
		rec := r.record("hourly", utc(10, 0, 0))
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Equal(t, 1, rec.Attempt)
		require.Equal(t, []string{"hourly slow_grant", "hourly slow_grant"}, onTimeEvents.all())

		require.Empty(t, late.slots())
		rec = r.record("refused", utc(10, 0, 0))
		require.Equal(t, ledger.StatusSkipped, rec.Status, "recorded by MissedSkip, not lost")
		require.Equal(t, "missed", rec.Reason)
		require.Len(t, lateEvents.all(), 8)
	})
}
