// Package formatver checks the stored format of a holdfast store on first
// use (docs/compatibility.md): every store keeps a marker naming its package
// and its format version, "holdfast <store> format <n>", and refuses with a
// *fence.FormatError any marker that is not its own, before it reads or
// writes anything else.
//
//   - Redis: the string key Key(prefix), "<prefix>format", written on first
//     use when missing (a script: read and create in one step). No store's
//     data key is "<prefix>format": their keys carry a '{' right after the
//     prefix (or a fixed word other than "format"), and prefixes hold no
//     braces, so the marker of one prefix is no other prefix's data key.
//   - PostgreSQL: the comment of the store's main table, set by the
//     store's last migration file and checked at the top of its first
//     (under the migration lock) and by the store on first use.
//
// A store with no marker yet (a new prefix, a table made before markers, a
// Redis that lost its data) is taken as the current format: holdfast had no
// release before format 1.
package formatver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
)

// Version is the stored format every holdfast store reads and writes.
const Version = 1

// Suffix follows a Redis store's prefix in its marker key.
const Suffix = "format"

// Marker is the marker of store (a package path below the module, e.g.
// "lease/redislease") at Version: "holdfast lease/redislease format 1".
func Marker(store string) string {
	return "holdfast " + store + " format " + strconv.Itoa(Version)
}

// Key is the marker key of a Redis store whose keys start with prefix.
func Key(prefix string) string { return prefix + Suffix }

// Gate runs a store's check until it succeeds once, then never again. The
// zero Gate is ready. Failed checks (a network error, a refusal) are not
// remembered: the next use checks again.
type Gate struct {
	ok atomic.Bool
	mu sync.Mutex
}

// Check returns nil at once after a successful check; otherwise it runs
// check (one caller at a time) and returns its error.
func (g *Gate) Check(ctx context.Context, check func(context.Context) error) error {
	if g.ok.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ok.Load() {
		return nil
	}
	if err := check(ctx); err != nil {
		if errors.Is(err, errNoTable) {
			return nil // nothing to misread yet: check again at the next use
		}
		return err
	}
	g.ok.Store(true)
	return nil
}

// errNoTable is CheckComment's answer for a table that does not exist
// yet: the store may go on (its own statements report the missing
// table), but Gate does not remember the pass, so once another build
// creates and marks the table, the store's next use checks its marker.
var errNoTable = errors.New("formatver: no table yet")

// Passed reports whether a check succeeded.
func (g *Gate) Passed() bool { return g.ok.Load() }

var markScript = luascript.New(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
	redis.call('SET', KEYS[1], ARGV[1])
	return ARGV[1]
end
if t ~= 'string' then
	return '(a Redis ' .. t .. ')'
end
return redis.call('GET', KEYS[1])
`)

// Redis reads the marker key Key(prefix) on rdb, creating it with
// Marker(store) when missing, and returns a *fence.FormatError when it
// holds anything else. On a Cluster or Ring the key lives on one shard.
func Redis(ctx context.Context, rdb luascript.Processor, store, prefix string) error {
	return checkMarker(ctx, rdb, markScript, store, prefix, Marker(store))
}

var readScript = luascript.New(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
	return false
end
if t ~= 'string' then
	return '(a Redis ' .. t .. ')'
end
return redis.call('GET', KEYS[1])
`)

// RedisRead is Redis for a store's reads (an operator's view): it writes
// nothing, so a missing marker passes without being created. A read
// pointed at the wrong prefix (the CLI's --prefix) then cannot leave a
// marker there that the store of that prefix would refuse.
func RedisRead(ctx context.Context, rdb luascript.Processor, store, prefix string) error {
	return checkMarker(ctx, rdb, readScript, store, prefix)
}

// checkMarker runs script (markScript or readScript) on the marker key of
// prefix and compares what it found with Marker(store); no marker (the
// read script's nil) passes.
func checkMarker(ctx context.Context, rdb luascript.Processor, script *luascript.Script, store, prefix string, args ...any) error {
	key, want := Key(prefix), Marker(store)
	found, err := script.Run(ctx, rdb, []string{key}, args...).Text()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: check the stored format at %q: %w", store, key, redispolicy.MemoryFull(err))
	}
	if found != want {
		return &fence.FormatError{Store: store, Where: "Redis key " + strconv.Quote(key), Found: found, Want: want}
	}
	return nil
}

// CommentSQL reads the comment of the table named by $1 (schema-qualified,
// as to_regclass takes it: quoted identifiers): NULL for a missing table,
// an empty string for one with no comment. Stores run it their own way (a
// statement, a batch, the caller's transaction) and pass the result to
// CheckComment.
const CommentSQL = `SELECT CASE WHEN to_regclass($1) IS NULL THEN NULL ELSE coalesce(obj_description(to_regclass($1), 'pg_class'), '') END`

// CheckComment returns a *fence.FormatError when found (CommentSQL's
// result for table) is not Marker(store). A table with no comment ("")
// passes: its migrations mark it. A missing table (nil) passes too, the
// store's own statements reporting it, but is not remembered by Gate: a
// store used before its table exists checks again at its next use (a
// fresh user's trial: a Guard used before another build made and marked
// its table format 2 went on to use it).
func CheckComment(store, table string, found *string) error {
	if found == nil {
		return errNoTable
	}
	if *found == "" || *found == Marker(store) {
		return nil
	}
	return &fence.FormatError{Store: store, Where: "the comment of table " + table, Found: *found, Want: Marker(store)}
}

// MigrationCheck is the statement at the top of a store's first migration
// file that refuses, under the migration lock and before any DDL, a table
// whose comment names another format (SQLSTATE SQLState, the comment found
// as DETAIL; pgformat.FromMigrate reads it). A missing table or one with
// no comment passes: the store's last migration file marks it. table is
// schema-qualified and quoted; both names are holdfast's own (identifiers
// checked by the stores), never user text with quotes.
func MigrationCheck(store, table string) string {
	want := Marker(store)
	return `DO $$
DECLARE
    found text := obj_description(to_regclass('` + table + `'), 'pg_class');
BEGIN
    IF found IS NOT NULL AND found <> '` + want + `' THEN
        RAISE EXCEPTION USING
            ERRCODE = '` + SQLState + `',
            MESSAGE = 'holdfast ` + store + `: ` + table + ` holds another stored format',
            DETAIL = found;
    END IF;
END
$$;`
}

// SQLState is the SQLSTATE of the exception the format check at the
// top of a store's 001 migration raises (its DETAIL is the comment it found).
const SQLState = "HF001"
