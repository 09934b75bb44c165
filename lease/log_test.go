package lease_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// A JSON handler prints slog.Duration as integer nanoseconds
// ("ttl":5000000000); the lease logs durations as their String form.
func TestLogsDurationsAsDurationStrings(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	var buf bytes.Buffer
	c, err := lease.New(rdb, lease.Options{
		Prefix: redistest.Prefix(t, rdb),
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "settle", 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))

	var acquired map[string]any
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, `"msg":"lease_acquired"`) {
			require.Contains(t, line, `"ttl":"5s"`)
			require.NoError(t, json.Unmarshal([]byte(line), &acquired))
		}
	}
	require.Equal(t, "5s", acquired["ttl"], "log: %s", buf.String())
}

// The owner is a write capability: the lease's log events carry its
// fence.OwnerID and the holder label, never the owner itself.
func TestLogsOwnerIDAndHolderNeverTheOwner(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	var buf bytes.Buffer
	c, err := lease.New(rdb, lease.Options{
		Prefix: redistest.Prefix(t, rdb),
		Holder: "replica-a",
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "settle", 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))

	require.NotContains(t, buf.String(), l.Holder().Owner)
	var acquired map[string]any
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, `"msg":"lease_acquired"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &acquired))
		}
	}
	require.Equal(t, fence.OwnerID(l.Holder().Owner), acquired["owner_id"], "log: %s", buf.String())
	require.Equal(t, "replica-a", acquired["holder"])
	require.NotContains(t, acquired, "owner")
}

// The holder label is the backend's: NewWithBackend takes it from the
// backend (leasedriver.Labeled) and refuses a different one; labels that could
// pass for another in a view are refused.
func TestHolderLabelOptions(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	b, err := redislease.NewBackend(rdb, redislease.Options{Holder: "replica-a"})
	require.NoError(t, err)
	c, err := lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)
	require.Equal(t, "replica-a", leasejoin.Backend(c).(leasedriver.Labeled).HolderLabel(), "the Client's label is its backend's")
	_, err = lease.NewWithBackend(b, lease.Options{Holder: "replica-a"})
	require.NoError(t, err, "the backend's own label")
	_, err = lease.NewWithBackend(b, lease.Options{Holder: "replica-b"})
	require.ErrorIs(t, err, lease.ErrInvalidOptions)

	for _, bad := range []string{" ", "\t", "a\nb", "x\u200by", "x\u202ey", "bad\xff", strings.Repeat("x", leasedriver.MaxHolderLen+1)} {
		require.ErrorIs(t, leasedriver.CheckHolder(bad), lease.ErrInvalidOptions, "%q", bad)
		_, err := lease.New(rdb, lease.Options{Holder: bad})
		require.ErrorIs(t, err, lease.ErrInvalidOptions, "%q", bad)
	}
	for _, good := range []string{"", "replica-a", "pod-7f9c/eu-west-1", "ü€ 𝄞"} {
		require.NoError(t, leasedriver.CheckHolder(good), "%q", good)
	}
}

// A *Lease, and its Context, never format the owner: every fmt verb and
// slog show the name, token and owner id (a fresh user's trial found %v of
// a *Lease printing its fields, the owner among them).
func TestLeaseNeverFormatsItsOwner(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			c, err := lease.New(rdb, lease.Options{Prefix: redistest.Prefix(t, rdb)})
			require.NoError(t, err)
			l, err := c.TryAcquire(t.Context(), "settle", 5*time.Second)
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Release(t.Context())) }()
			owner, id := l.Holder().Owner, fence.OwnerID(l.Holder().Owner)
			require.NotEmpty(t, owner)
			type wrapper struct {
				L *lease.Lease
			}
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X"} {
				for _, v := range []any{l, wrapper{l}, []*lease.Lease{l}, l.Context()} {
					got := fmt.Sprintf(verb, v)
					require.NotContains(t, got, owner, "%s of %T", verb, v)
				}
				require.Contains(t, fmt.Sprintf(verb, l), id, verb)
				require.Contains(t, fmt.Sprintf(verb, l), l.Token().String(), verb)
			}
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "lease", l, "ctx", l.Context())
			require.NotContains(t, buf.String(), owner)
			require.Contains(t, buf.String(), `"lease":{"name":"settle","token":`+l.Token().String()+`,"owner_id":"`+id+`"}`)
		})
	}
}

// TestRedisCommandsNeverShowTheOwner: the text of every command the
// Client sends, as redisotel's tracing hook records it (db.statement) and
// as a logging hook prints it, never holds an owner: acquire (alone,
// waiting, batched), renew and release. The owner is still sent: the
// commands show it as [owner], and a second Client cannot take the leases.
func TestRedisCommandsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			seen := redistest.RecordStatements(rdb)
			prefix := redistest.Prefix(t, rdb)
			c, err := lease.New(rdb, lease.Options{Prefix: prefix})
			require.NoError(t, err)
			other, err := lease.New(rdb, lease.Options{Prefix: prefix})
			require.NoError(t, err)

			one, err := c.TryAcquire(t.Context(), "one", 5*time.Second)
			require.NoError(t, err)
			waited, err := c.Acquire(t.Context(), "waited", 5*time.Second)
			require.NoError(t, err)
			batch, errs := c.TryAcquireAll(t.Context(), []string{"a", "b"}, 5*time.Second)
			require.NoError(t, errors.Join(errs...))
			held := append([]*lease.Lease{one, waited}, batch...)
			for _, l := range held {
				require.NoError(t, l.Renew(t.Context()))
				_, err := other.TryAcquire(t.Context(), l.Name(), time.Second)
				require.ErrorIs(t, err, lease.ErrNotAcquired, "the owner reached Redis: %s is held", l.Name())
			}
			owners := make([]string, len(held))
			for i, l := range held {
				owners[i] = l.Holder().Owner
				require.NoError(t, l.Release(t.Context()))
			}

			for _, owner := range owners {
				require.NotEmpty(t, owner)
			}
			require.Empty(t, seen.Showing(owners...), "a command shows an owner")
			require.Greater(t, seen.Count(), 10)
			require.Contains(t, seen.String(), "[owner]")
		})
	}
}
