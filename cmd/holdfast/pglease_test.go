package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// lease ls/show read Postgres directly too (issue 37): pglease is a
// lease.Inspector, with the holder label and owner id, never the owner.
func TestLeasesFromPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := shared.Schema(t, "holdfast_cli_leases_")
	b, err := pglease.New(shared.Pool(t), pglease.Options{Schema: schema, Holder: "replica-a"})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(ctx))
	const owner = "cli-owner-secret"
	g, err := b.Acquire(ctx, "report|eu", owner, time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	conn := []string{"--pg", pgtest.URL(), "--schema", schema}

	var page schedhttp.LeasesPage
	okJSON(t, &page, append([]string{"lease", "ls"}, conn...)...)
	require.Len(t, page.Leases, 1)
	l := page.Leases[0]
	require.Equal(t, schedhttp.LeaseJSON{Name: "report|eu", Held: true, OwnerID: fence.OwnerID(owner), Holder: "replica-a",
		TTLMS: l.TTLMS, Token: g.Token}, l)
	require.Greater(t, l.TTLMS, int64(50_000))
	out := ok(t, append([]string{"lease", "show", "report|eu"}, conn...)...)
	require.Regexp(t, `(?m)^holder\s+replica-a$`, out)
	require.NotContains(t, out, owner)
	r := cli(t, append([]string{"lease", "show", "never"}, conn...)...)
	require.Equal(t, exitNotFound, r.code, r.stderr)

	// fence get lease reads the same table: the holder's token, its owner
	// id, never the owner; exit 3 for a name never taken.
	var f fenceJSON
	okJSON(t, &f, append([]string{"fence", "get", "lease", "report|eu"}, conn...)...)
	require.Equal(t, fenceJSON{Kind: "lease", Name: "report|eu", Token: g.Token, OwnerID: fence.OwnerID(owner)}, f)
	out = ok(t, append([]string{"fence", "get", "lease", "report|eu"}, conn...)...)
	require.Contains(t, out, g.Token.String())
	require.NotContains(t, out, owner)
	r = cli(t, append([]string{"fence", "get", "lease", "never"}, conn...)...)
	require.Equal(t, exitNotFound, r.code, r.stderr)
}
