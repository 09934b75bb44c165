package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// auditEvent decodes the fence_reset line of stderr.
func auditEvent(t *testing.T, stderr string) map[string]any {
	t.Helper()
	for line := range strings.SplitSeq(stderr, "\n") {
		if strings.Contains(line, `"msg":"fence_reset"`) {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &ev))
			return ev
		}
	}
	t.Fatalf("no fence_reset event in stderr: %s", stderr)
	return nil
}

// fence reset removes a poisoned fence: it needs a reason, refuses while
// the fence is in active use (raised within --idle, its lease held) unless
// --force, logs the audit event without the owner, and the next legitimate
// writer, whose token is below the forged one, is accepted.
func TestFenceReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	legit := fence.Holder{Scope: "push", Token: 1_700_000_000_000_042, Owner: "holder-a"}
	forged := fence.Holder{Scope: "push", Token: 1_900_000_000_000_000, Owner: "evil-owner"}
	next := fence.Holder{Scope: "push", Token: legit.Token + 1, Owner: "holder-b"}
	leaseConn := []string{"--redis", redistest.URL(), "--prefix", prefix + "lease:"}
	taken, err := leases.TryAcquire(ctx, "push", time.Minute) // the lease exists: its counter is kept
	require.NoError(t, err)
	require.NoError(t, taken.Release(ctx))

	t.Run("Postgres", func(t *testing.T) {
		pool := shared.Pool(t)
		schema := shared.Schema(t, "clireset")
		g, err := pgfence.New(pgfence.Options{Schema: schema})
		require.NoError(t, err)
		require.NoError(t, g.Migrate(ctx, pool))
		require.NoError(t, g.Check(ctx, pool, "/v1/payouts", legit))
		require.NoError(t, g.Check(ctx, pool, "/v1/payouts", forged))
		require.ErrorIs(t, g.Check(ctx, pool, "/v1/payouts", next), fence.ErrStaleToken, "poisoned")
		cmd := append([]string{"fence", "reset", "pg", "--pg", pgtest.URL(), "--schema", schema,
			"--resource", "/v1/payouts", "--scope", "push"}, leaseConn...)

		r := cli(t, cmd...)
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "--reason is required")
		r = cli(t, append(cmd, "--reason", "  ")...)
		require.Equal(t, exitUsage, r.code, r.stderr)

		r = cli(t, append(cmd, "--reason", "INC-1")...)
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "active use")

		held, err := leases.TryAcquire(ctx, "push", time.Minute)
		require.NoError(t, err)
		r = cli(t, append(cmd, "--reason", "INC-1", "--idle", "0s")...)
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, `lease "push" is held`)
		require.NoError(t, held.Release(ctx))

		cur, _, err := g.Current(ctx, pool, "/v1/payouts", "push")
		require.NoError(t, err)
		require.Equal(t, forged.Token, cur, "every refusal changed nothing")

		r = cli(t, append(cmd, "--reason", "forged token INC-1", "--idle", "0s", "--actor", "alice")...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []string{"PREVIOUS_TOKEN", forged.Token.String()}, strings.Fields(r.stdout))
		ev := auditEvent(t, r.stderr)
		require.Equal(t, "pg", ev["store"])
		require.Equal(t, "/v1/payouts", ev["resource"])
		require.Equal(t, "push", ev["scope"])
		require.EqualValues(t, forged.Token, ev["previous_token"])
		require.EqualValues(t, held.Token(), ev["lease_token"], "below the removed token: never issued")
		require.Equal(t, "forged token INC-1", ev["reason"])
		require.Equal(t, "alice", ev["actor"])
		require.Equal(t, false, ev["forced"])
		require.Equal(t, true, ev["lease_checked"])
		require.NotContains(t, r.stderr, "evil-owner")
		require.NotContains(t, r.stdout, "evil-owner")

		require.NoError(t, g.Check(ctx, pool, "/v1/payouts", next), "the next legitimate writer proceeds")
		r = cli(t, append(cmd, "--reason", "again", "--idle", "0s", "--expect", "5")...)
		require.Equal(t, exitRefused, r.code, "changed since read: %s", r.stderr)
	})
	t.Run("Redis", func(t *testing.T) {
		key := prefix + "payouts:{1}"
		w, err := redisfence.New(rdb)
		require.NoError(t, err)
		require.NoError(t, w.Set(ctx, key, "a", legit, time.Minute))
		require.NoError(t, w.Set(ctx, key, "evil", forged, time.Minute))
		cmd := append([]string{"fence", "reset", "redis", "--resource", key, "--scope", "push", "--reason", "INC-2"}, leaseConn...)

		held, err := leases.TryAcquire(ctx, "push", time.Minute)
		require.NoError(t, err)
		r := cli(t, cmd...)
		require.Equal(t, exitRefused, r.code, r.stderr)
		r = cli(t, append(cmd, "--force", "-o", "json")...)
		require.Equal(t, exitOK, r.code, r.stderr)
		var out resetJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Equal(t, resetJSON{Kind: "redis", Resource: key, Scope: "push", PreviousToken: forged.Token, Reason: "INC-2", Forced: true, LeaseChecked: true}, out)
		require.Equal(t, true, auditEvent(t, r.stderr)["forced"])
		require.NotContains(t, r.stderr, "evil-owner")
		require.NoError(t, held.Release(ctx))

		require.NoError(t, w.Set(ctx, key, "b", next, time.Minute), "the next legitimate writer proceeds")
		r = cli(t, append([]string{"fence", "reset", "redis", "--resource", key, "--scope", "none", "--reason", "x"}, leaseConn...)...)
		require.Equal(t, exitRefused, r.code, "no lease %q was ever taken: %s", "none", r.stderr)
		r = cli(t, append([]string{"fence", "reset", "redis", "--resource", key, "--scope", "none", "--reason", "x", "--force"}, leaseConn...)...)
		require.Equal(t, exitNotFound, r.code, r.stderr)
	})
}

// The held-lease check is never skipped in silence: with a source that has
// no record of the lease at all (a wrong --prefix, a --lease-schema whose
// pglease table never saw it) the reset is refused, and --force resets
// anyway with lease_checked false in the audit event. The fence is
// untouched by every refusal. A Postgres-only deployment's lease is read
// through --pg (pglease, --lease-schema) when neither --redis nor --admin
// is given (it was a usage error: only --force could reset; a fresh
// user's trial).
func TestFenceResetNeedsTheLeaseCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	pool := shared.Pool(t)
	schema := shared.Schema(t, "clireset2")
	g, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, g.Migrate(ctx, pool))
	forged := fence.Holder{Scope: "push", Token: 1_900_000_000_000_000, Owner: "evil-owner"}
	poison := func() {
		require.NoError(t, g.Check(ctx, pool, "/v1/payouts", forged))
	}
	poison()
	cmd := []string{"fence", "reset", "pg", "--pg", pgtest.URL(), "--schema", schema,
		"--resource", "/v1/payouts", "--scope", "push", "--reason", "INC-3", "--idle", "0s", "--actor", "alice"}
	unchanged := func() {
		t.Helper()
		cur, _, err := g.Current(ctx, pool, "/v1/payouts", "push")
		require.NoError(t, err)
		require.Equal(t, forged.Token, cur, "the refusal changed nothing")
	}

	pgb, err := pglease.New(pool, pglease.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, pgb.Migrate(ctx))
	pgLeases, err := lease.NewWithBackend(pgb, lease.Options{})
	require.NoError(t, err)
	cmd = append(cmd, "--lease-schema", schema)

	r := cli(t, cmd...)
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, `Postgres (pglease) in --lease-schema "`+schema+`" has no record of lease "push"`)
	require.NotContains(t, r.stderr, "fence_reset")
	unchanged()

	held, err := pgLeases.TryAcquire(ctx, "push", time.Minute)
	require.NoError(t, err)
	r = cli(t, cmd...)
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, `lease "push" is held`)
	unchanged()
	require.NoError(t, held.Release(ctx))
	r = cli(t, cmd...)
	require.Equal(t, exitOK, r.code, r.stderr)
	ev := auditEvent(t, r.stderr)
	require.Equal(t, true, ev["lease_checked"])
	require.Equal(t, false, ev["forced"])
	require.EqualValues(t, held.Token(), ev["lease_token"])
	poison()

	wrongPrefix := append(append([]string(nil), cmd...), "--redis", redistest.URL(), "--prefix", prefix+"nolease:")
	r = cli(t, wrongPrefix...)
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, `has no record of lease "push"`)
	require.Contains(t, r.stderr, "--prefix")
	unchanged()

	r = cli(t, append(wrongPrefix, "--force")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	ev = auditEvent(t, r.stderr)
	require.Equal(t, false, ev["lease_checked"])
	require.Equal(t, true, ev["forced"])
	require.NotContains(t, ev, "lease_token")

	poison()
	noRecord := append(append([]string(nil), cmd...), "--lease-schema", schema+"_none")
	r = cli(t, append(noRecord, "--force")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "was not checked (--force)")
	ev = auditEvent(t, r.stderr)
	require.Equal(t, false, ev["lease_checked"])
	require.Equal(t, true, ev["forced"])

	// Control: the right prefix, the lease taken once and released.
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	l, err := leases.TryAcquire(ctx, "push", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	poison()
	r = cli(t, append(cmd, "--redis", redistest.URL(), "--prefix", prefix+"lease:")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	ev = auditEvent(t, r.stderr)
	require.Equal(t, true, ev["lease_checked"])
	require.Equal(t, false, ev["forced"])
	require.EqualValues(t, l.Token(), ev["lease_token"])
}

// Without --actor and $USER the audit event says actor "unknown", with a
// warning; a missing --reason is one line, not buried in the help.
func TestFenceResetActorAndReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := shared.Pool(t)
	schema := shared.Schema(t, "clireset3")
	g, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, g.Migrate(ctx, pool))
	require.NoError(t, g.Check(ctx, pool, "/r", fence.Holder{Scope: "s", Token: 7, Owner: "o"}))
	cmd := []string{"fence", "reset", "pg", "--pg", pgtest.URL(), "--schema", schema, "--resource", "/r", "--scope", "s", "--force"}

	r := cliEnv(t, map[string]string{}, cmd...)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.NotContains(t, r.stderr, "Usage", "the error alone")
	require.Equal(t, "holdfast: --reason is required: say why, for the audit log (holdfast fence reset pg --help)", strings.TrimSpace(r.stderr))

	r = cliEnv(t, map[string]string{"USER": ""}, append(cmd, "--reason", "INC-4")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `no --actor and $USER is empty: the audit event records actor "unknown"`)
	require.Equal(t, "unknown", auditEvent(t, r.stderr)["actor"])
}
