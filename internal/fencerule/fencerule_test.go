package fencerule_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

// raise is the smallest fenced script: the prelude's rule on a hash
// {token, owner}, the shape of the scheduler's ledger fences.
var raise = luascript.New(fencerule.Lua, `
local cur = redis.call('HMGET', KEYS[1], 'token', 'owner')
if holdfast_accepts(cur[1], cur[2], ARGV[1], ARGV[2]) then
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2])
  return {1}
end
return {0, cur[1]}
`)

// luaAccept runs raise as a fenceruletest.Accept, refusing token 0 before
// Redis as every caller of the prelude does. The key of (scope, resource)
// is length-prefixed: "<len(scope)>:<scope>:<resource>" names one pair.
func luaAccept(rdb redis.UniversalClient, prefix string) fenceruletest.Accept {
	return func(ctx context.Context, resource string, h fence.Holder) error {
		if h.Token == fence.None {
			return fence.ErrNoToken
		}
		res, err := raise.Run(ctx, rdb, []string{prefix + strconv.Itoa(len(h.Scope)) + ":" + h.Scope + ":" + resource}, h.Token.String(), h.Owner).Slice()
		if err != nil {
			return err
		}
		if len(res) == 1 {
			return nil
		}
		cur, err := fence.ParseToken(fmt.Sprint(res[1]))
		if err != nil {
			return err
		}
		return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: cur}
	}
}

func TestLuaPassesTheTable(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			prefix := redistest.Prefix(t, rdb)
			fenceruletest.Run(t, "", math.MaxUint64, luaAccept(rdb, prefix))
		})
	}
}

// sqlAccept runs Upsert on a table of its own as a fenceruletest.Accept.
func sqlAccept(t *testing.T) fenceruletest.Accept {
	pool := shared.Pool(t)
	schema := shared.Schema(t, "fencerule_")
	table := pgx.Identifier{schema, "fences"}.Sanitize()
	_, err := pool.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+table+` (resource text, scope text, token bigint NOT NULL, owner text NOT NULL, PRIMARY KEY (resource, scope))`)
	require.NoError(t, err)
	upsert := fencerule.Upsert{
		Table: table, Columns: "resource, scope, token, owner", Values: "$1, $2, $3, $4",
		Conflict: "resource, scope", Returning: "f.token",
	}.SQL()
	return func(ctx context.Context, resource string, h fence.Holder) error {
		if h.Token == fence.None {
			return fence.ErrNoToken
		}
		var raised int64
		err := pool.QueryRow(ctx, upsert, resource, h.Scope, int64(h.Token), h.Owner).Scan(&raised)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var cur int64
		if err := pool.QueryRow(ctx, `SELECT token FROM `+table+` WHERE resource = $1 AND scope = $2`, resource, h.Scope).Scan(&cur); err != nil {
			return err
		}
		return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: fence.Token(cur)}
	}
}

func TestSQLPassesTheTable(t *testing.T) {
	t.Parallel()
	fenceruletest.Run(t, "", math.MaxInt64, sqlAccept(t))
}

func TestSQLAccepts(t *testing.T) {
	t.Parallel()
	require.Equal(t, `(cur."fence_token" < $2 OR (cur."fence_token" = $2 AND cur."fence_owner" = $3))`,
		fencerule.SQLAccepts(`cur."fence_token"`, `cur."fence_owner"`, "$2", "$3"))
}

func TestUpsertSQL(t *testing.T) {
	t.Parallel()
	got := fencerule.Upsert{
		Table: `"s"."t"`, Columns: "k, token, owner, updated_at", Values: "$1, $2, $3, now()",
		Conflict: "k", Set: "updated_at = now()", Returning: "token",
	}.SQL()
	require.Equal(t, `INSERT INTO "s"."t" AS f (k, token, owner, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (k) DO UPDATE
   SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = now()
 WHERE (f.token < EXCLUDED.token OR (f.token = EXCLUDED.token AND f.owner = EXCLUDED.owner))
RETURNING token`, got)
}
