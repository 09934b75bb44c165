package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// The lease commands read Redis directly: a held lease with its holder
// label, owner id (never the owner, a write capability) and token, a
// released one with its last token, a never-acquired one exits 3.
func TestLeasesFromRedis(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	c, err := lease.New(rdb, lease.Options{Prefix: prefix, Holder: "replica-a"})
	require.NoError(t, err)
	ctx := context.Background()
	held, err := c.TryAcquire(ctx, "report|eu", time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	gone, err := c.TryAcquire(ctx, "report|us", time.Minute)
	require.NoError(t, err)
	require.NoError(t, gone.Release(ctx))
	conn := []string{"--redis", redistest.URL(), "--prefix", prefix}

	out := ok(t, append([]string{"lease", "ls"}, conn...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, []string{"NAME", "HELD", "HOLDER", "OWNER", "ID", "TTL", "TOKEN", "WAITING"}, strings.Fields(lines[0]))
	row := strings.Fields(lines[1])
	require.Equal(t, []string{"report|eu", "yes", "replica-a", fence.OwnerID(held.Holder().Owner)}, row[:4])
	require.Equal(t, []string{held.Token().String(), "no"}, row[5:])
	ttl, err := time.ParseDuration(row[4])
	require.NoError(t, err)
	require.Greater(t, ttl, 50*time.Second)
	require.Equal(t, []string{"report|us", "no", "-", "-", "-", gone.Token().String(), "no"}, strings.Fields(lines[2]))
	require.NotContains(t, out, held.Holder().Owner)

	r := cli(t, append([]string{"lease", "ls"}, conn...)...)
	require.Equal(t, exitOK, r.code)
	require.Empty(t, r.stderr, "all of them listed")
	// At the limit, the output may not be all: it says so (a fresh user's
	// trial listed 1000 of 2003 leases without a word).
	r = cli(t, append([]string{"lease", "ls", "--limit", "1"}, conn...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 2, r.stdout)
	require.Contains(t, r.stderr, "showing the first 1 leases by name; there may be more")

	var page schedhttp.LeasesPage
	okJSON(t, &page, append([]string{"lease", "ls", "--match", "*|eu"}, conn...)...)
	require.Len(t, page.Leases, 1)
	l := page.Leases[0]
	require.Equal(t, schedhttp.LeaseJSON{Name: "report|eu", Held: true, OwnerID: fence.OwnerID(held.Holder().Owner), Holder: "replica-a",
		TTLMS: l.TTLMS, Token: held.Token()}, l)
	out = ok(t, append([]string{"lease", "ls", "-o", "json"}, conn...)...)
	require.NotContains(t, out, held.Holder().Owner)
	out = ok(t, append([]string{"lease", "show", "report|eu"}, conn...)...)
	require.Regexp(t, `(?m)^holder\s+replica-a$`, out)
	require.Regexp(t, `(?m)^owner id\s+`+fence.OwnerID(held.Holder().Owner)+`$`, out)
	require.NotContains(t, out, held.Holder().Owner)

	out = ok(t, append([]string{"fence", "get", "lease", "report|eu"}, conn...)...)
	require.Equal(t, []string{"TOKEN", "OWNER", "ID", held.Token().String(), fence.OwnerID(held.Holder().Owner)}, strings.Fields(out))
	var f fenceJSON
	okJSON(t, &f, append([]string{"fence", "get", "lease", "report|us"}, conn...)...)
	require.Equal(t, fenceJSON{Kind: "lease", Name: "report|us", Token: gone.Token()}, f)

	r = cli(t, append([]string{"lease", "show", "never"}, conn...)...)
	require.Equal(t, exitNotFound, r.code, r.stderr)
	require.Contains(t, r.stderr, `lease "never": never acquired`)
	r = cli(t, append([]string{"fence", "get", "lease", "never"}, conn...)...)
	require.Equal(t, exitNotFound, r.code, r.stderr)

	r = cli(t, "lease", "ls", "--redis", "redis://127.0.0.1:1/0", "--timeout", "10s")
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stderr, "connect")
}

// fence pg and fence redis read the highest token the sinks accepted.
func TestFenceOfSinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := fence.Holder{Scope: "settle|eu", Token: 1_700_000_000_000_042, Owner: "owner-a"}

	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		pool := shared.Pool(t)
		schema := shared.Schema(t, "clifence")
		g, err := pgfence.New(pgfence.Options{Schema: schema})
		require.NoError(t, err)
		require.NoError(t, g.Migrate(ctx, pool))
		require.NoError(t, g.Check(ctx, pool, "account:42", h))
		conn := []string{"--pg", pgtest.URL(), "--schema", schema}

		out := ok(t, append([]string{"fence", "get", "pg", "--resource", "account:42", "--scope", "settle|eu"}, conn...)...)
		require.Equal(t, []string{"TOKEN", "OWNER", "ID", h.Token.String(), fence.OwnerID("owner-a")}, strings.Fields(out))
		var f fenceJSON
		okJSON(t, &f, append([]string{"fence", "get", "pg", "--resource", "account:42", "--scope", "settle|eu"}, conn...)...)
		require.Equal(t, fenceJSON{Kind: "pg", Resource: "account:42", Scope: "settle|eu", Token: h.Token, OwnerID: fence.OwnerID("owner-a")}, f)
		r := cli(t, append([]string{"fence", "get", "pg", "--resource", "account:42", "--scope", "settle|us"}, conn...)...)
		require.Equal(t, exitNotFound, r.code, r.stderr)
		r = cli(t, append([]string{"fence", "get", "pg", "--scope", "settle|us"}, conn...)...)
		require.Equal(t, exitUsage, r.code, r.stderr)
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Real(t)
		key := redistest.Prefix(t, rdb) + "balance:{42}"
		w, err := redisfence.New(rdb)
		require.NoError(t, err)
		require.NoError(t, w.Set(ctx, key, "100", h, time.Minute))

		out := ok(t, "fence", "get", "redis", "--redis", redistest.URL(), "--resource", key, "--scope", "settle|eu")
		require.Equal(t, []string{"TOKEN", "OWNER", "ID", h.Token.String(), fence.OwnerID("owner-a")}, strings.Fields(out))
		r := cli(t, "fence", "get", "redis", "--redis", redistest.URL(), "--resource", key, "--scope", "report")
		require.Equal(t, exitNotFound, r.code, r.stderr)
	})
}

// prune goes through ledger.Pruner: it deletes the done slots before the
// cutoff but the pair's latest (State.Last), and keeps a running one.
func TestPruneRedisLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb) + "ledger:"
	l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
	require.NoError(t, err)
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = l.State(ctx, "settle", "eu", old, old.Add(-time.Minute))
	require.NoError(t, err)
	f := ledger.Fence{Scope: ledger.UnitScope("settle", "eu"), Token: 7, Owner: "owner-a"}
	var slots []ledger.Slot
	for i := range 4 {
		slot := ledger.Slot{Job: "settle", Partition: "eu", At: old.Add(time.Duration(i) * time.Minute)}
		slots = append(slots, slot)
		n, _, err := l.Begin(ctx, slot, f, 3, slot.At)
		require.NoError(t, err)
		if i == 1 { // left running
			continue
		}
		require.NoError(t, l.Finish(ctx, slot, f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, slot.At.Add(time.Second)))
	}
	args := []string{"ledger", "prune", "--redis", redistest.URL(), "--ledger-prefix", prefix, "--before", "720h"}

	var dry pruneJSON
	okJSON(t, &dry, append(args, "--dry-run")...)
	require.True(t, dry.DryRun)
	require.WithinDuration(t, time.Now().Add(-720*time.Hour), dry.Before, time.Minute)
	_, found, err := l.Get(ctx, slots[0])
	require.NoError(t, err)
	require.True(t, found, "a dry run deletes nothing")

	var out pruneJSON
	okJSON(t, &out, args...)
	require.Equal(t, int64(2), out.Deleted, "slots 0 and 2: slot 1 runs, slot 3 is the latest")
	for i, want := range []bool{false, true, false, true} {
		_, found, err := l.Get(ctx, slots[i])
		require.NoError(t, err)
		require.Equal(t, want, found, "slot %d kept", i)
	}
	okJSON(t, &out, args...)
	require.Equal(t, int64(0), out.Deleted, "nothing left to prune")
}

// With --redis-cluster, lease ls lists the leases of every master.
func TestLeasesOnCluster(t *testing.T) {
	cl := redisproc.StartCluster(t, 3)
	rdb := cl.Client(t)
	c, err := lease.New(rdb, lease.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	var want []string
	for i := range 9 {
		name := fmt.Sprintf("job-%d", i)
		l, err := c.TryAcquire(ctx, name, time.Minute)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		want = append(want, name+" "+l.Token().String())
	}
	url := "redis://" + cl.Addrs[0] + "?addr=" + cl.Addrs[1] + "&addr=" + cl.Addrs[2]
	var page schedhttp.LeasesPage
	okJSON(t, &page, "lease", "ls", "--redis", url, "--redis-cluster")
	var got []string
	for _, l := range page.Leases {
		require.True(t, l.Held, l.Name)
		got = append(got, l.Name+" "+l.Token.String())
	}
	require.Equal(t, want, got)
	out := ok(t, "fence", "get", "lease", "job-4", "--redis", url, "--redis-cluster")
	require.Contains(t, out, strings.Fields(want[4])[1])
}
