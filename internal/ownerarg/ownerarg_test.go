package ownerarg_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/extra/rediscmd/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

const owner = "c4cf6eb9f6f86911b62410cefdeb973e"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOwnerPrintsRedacted(t *testing.T) {
	t.Parallel()
	o := ownerarg.Owner(owner)
	type wrapper struct{ O any }
	for _, verb := range []string{"%v", "%+v", "%s", "%q", "%x", "%#v", "%d"} {
		for _, v := range []any{o, wrapper{o}, []any{"evalsha", o}} {
			got := fmt.Sprintf(verb, v)
			require.NotContains(t, got, owner, "%s of %T", verb, v)
			require.NotContains(t, got, fmt.Sprintf("%x", owner), "%s of %T", verb, v)
		}
	}
	require.Equal(t, "[owner]", fmt.Sprint(o))
	require.Equal(t, `"[owner]"`, fmt.Sprintf("%#v", o))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "owner", o)
	require.Contains(t, buf.String(), `"owner":"[owner]"`)
	b, err := o.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, []byte(owner), b)
	b, err = ownerarg.Owner("").MarshalBinary()
	require.NoError(t, err)
	require.Empty(t, b)
}

// An Owner reaches Redis as its bytes (a script sees the same ARGV as for
// a string), and every text form of the command shows [owner].
func TestOwnerIsSentAsItsBytes(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			key := redistest.Prefix(t, rdb) + "owner"
			ctx := t.Context()
			set := redis.NewStatusCmd(ctx, "set", key, ownerarg.Owner(owner))
			require.NoError(t, rdb.Process(ctx, set))
			require.Equal(t, owner, rdb.Get(ctx, key).Val())
			require.NotContains(t, rediscmd.CmdString(set), owner)
			require.NotContains(t, set.String(), owner)
			require.Contains(t, rediscmd.CmdString(set), "[owner]")

			same := redis.NewScript(`return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0`)
			n, err := same.Run(ctx, rdb, []string{key}, ownerarg.Owner(owner)).Int()
			require.NoError(t, err)
			require.Equal(t, 1, n, "the script's ARGV is the owner")
			n, err = same.Run(ctx, rdb, []string{key}, ownerarg.Owner("")).Int()
			require.NoError(t, err)
			require.Equal(t, 0, n)
		})
	}
}

// An Owner and Owners reach PostgreSQL as their values (a text and a
// text[] parameter), with the extended and the simple protocol, and pgx's
// query log shows [owner].
func TestOwnerIsSentAsItsValueToPostgres(t *testing.T) {
	t.Parallel()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			var logged *pgtest.Args
			pool := pgtest.OwnPool(t, func(cfg *pgxpool.Config) {
				cfg.ConnConfig.DefaultQueryExecMode = mode
				logged = pgtest.RecordArgs(cfg)
			})
			var got string
			var gotAll []string
			var same bool
			err := pool.QueryRow(t.Context(), `SELECT $1::text, $2::text[], $1::text = $3::text`,
				ownerarg.Owner(owner), ownerarg.Owners{owner, "b"}, owner).Scan(&got, &gotAll, &same)
			require.NoError(t, err)
			require.Equal(t, owner, got)
			require.Equal(t, []string{owner, "b"}, gotAll)
			require.True(t, same)
			require.Equal(t, 1, logged.Count())
			require.Contains(t, logged.String(), "[owner]")
			line := logged.Showing(owner)
			require.NotEmpty(t, line, "the plain string argument shows: the log is read")
			require.NotContains(t, strings.Replace(line, owner, "", 1), owner, "only the plain string shows")
		})
	}
}
