package fencerule

import (
	_ "embed"
	"strings"
)

// Lua defines holdfast_accepts(stored_token, stored_owner, token, owner)
// and holdfast_token_greater(a, b), the rule on canonical decimal token
// strings, exact over the whole uint64 range (see fence.lua). Put it first
// among a script's parts (luascript.New(fencerule.Lua, ...)).
//
//go:embed fence.lua
var Lua string

// Upsert is the rule as one PostgreSQL statement on a table with a bigint
// token column and a text owner column: INSERT INTO Table AS f (Columns)
// VALUES (Values) ON CONFLICT (Conflict) DO UPDATE SET token, owner (and
// Set) WHERE the rule holds RETURNING Returning. A row comes back iff the
// rule accepted (and the row now holds the token and owner); none when it
// refused.
//
// ON CONFLICT DO UPDATE locks the existing row whether or not the WHERE
// clause holds, and evaluates it against the latest committed version
// after waiting for any concurrent writer. So the check and the raise are
// atomic, and the row lock, held until the transaction ends, serialises
// every writer of one row. A fresh row is accepted: the caller refuses
// token 0 (fence.None) before running it. bigint holds tokens up to
// math.MaxInt64; callers refuse larger ones.
//
// With When set, the row is proposed only when When holds: INSERT ...
// SELECT Values WHERE When, so the statement can sit in a WITH clause
// that decides whether the fence is to be applied at all (no row comes
// back when When is false, as for a refusal).
type Upsert struct {
	Table     string // quoted, schema-qualified name, aliased f
	Columns   string // the inserted columns, token and owner among them
	Values    string // their values
	Conflict  string // the key columns of one fence
	Set       string // further assignments on a raise, or ""
	Returning string // what an accepted write returns
	When      string // a condition on proposing the row at all, or ""
}

// SQL returns the statement.
func (u Upsert) SQL() string {
	set := "token = EXCLUDED.token, owner = EXCLUDED.owner"
	if u.Set != "" {
		set += ", " + u.Set
	}
	values := "VALUES (" + u.Values + ")"
	if u.When != "" {
		values = "SELECT " + u.Values + " WHERE " + u.When
	}
	return strings.Join([]string{
		"INSERT INTO " + u.Table + " AS f (" + u.Columns + ")",
		values,
		"ON CONFLICT (" + u.Conflict + ") DO UPDATE",
		"   SET " + set,
		" WHERE " + SQLAccepts("f.token", "f.owner", "EXCLUDED.token", "EXCLUDED.owner"),
		"RETURNING " + u.Returning,
	}, "\n")
}

// SQLAccepts is the rule as a PostgreSQL boolean expression: a fence
// holding storedToken and storedOwner accepts the presented token and
// owner iff the stored token is below it, or equal to it and the owners
// are equal. Each argument is an SQL expression put into the text as given
// (a column reference such as "f.token", EXCLUDED.token or a parameter
// such as "$2"), so pass only trusted text: quoted identifiers and
// placeholders, never a value. The stored token must not be NULL; a
// caller whose rows may have no token yet decides that case around it
// (pgfence's FencedUpdate). This is the one place the rule is written in
// SQL: Upsert and pgfence's FencedUpdate and FencedUpsert use it.
func SQLAccepts(storedToken, storedOwner, token, owner string) string {
	return "(" + storedToken + " < " + token +
		" OR (" + storedToken + " = " + token + " AND " + storedOwner + " = " + owner + "))"
}
