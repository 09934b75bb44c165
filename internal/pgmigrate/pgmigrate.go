// Package pgmigrate builds the migration script of a holdfast Postgres
// store: every embedded migrations/*.sql file, in name order, with its
// placeholders replaced, behind one advisory lock per schema. Sent as one
// simple-protocol query, Postgres runs it as one implicit transaction (or
// inside the caller's), so stores migrating into one schema at once take
// turns: CREATE SCHEMA IF NOT EXISTS races otherwise.
package pgmigrate

import (
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/holdfast-go/holdfast/internal/formatver"
)

// formatCheck is the directive line of a store's first migration that
// stands for its stored-format check: "-- holdfast:format-check <store>
// <table>", the table schema-qualified (placeholders already replaced).
var formatCheck = regexp.MustCompile(`(?m)^-- holdfast:format-check (\S+) (\S+)$`)

// expand writes out the directives of a migration's text: a format-check
// line becomes formatver.MigrationCheck's statement.
func expand(text string) string {
	return formatCheck.ReplaceAllStringFunc(text, func(line string) string {
		m := formatCheck.FindStringSubmatch(line)
		return formatver.MigrationCheck(m[1], m[2])
	})
}

// OwnTransaction goes before Script's text when the script runs as a
// transaction of its own (one simple-protocol query, an implicit
// transaction): it sets that transaction to READ COMMITTED, the level the
// migrations are designed for, whatever default_transaction_isolation is.
// Under REPEATABLE READ or SERIALIZABLE the transaction's snapshot is taken
// by the advisory lock statement, before the lock is granted, so a script
// that waited for a concurrent migration would read the catalogs as they
// were before it (pgfence's 002 looks at pg_attribute) and redo DDL that
// is already done. Inside a READ COMMITTED transaction it is a no-op; a
// caller's transaction at another level that ran a query refuses it
// ("must be called before any query"), so it is left out there.
const OwnTransaction = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n"

// LockKey is the advisory lock key for migrations into schema: the 64-bit
// FNV-1a hash of "holdfast:migrate:" + schema. Every holdfast store uses
// it, so the key depends on the schema only.
func LockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("holdfast:migrate:" + schema))
	return int64(h.Sum64())
}

// Script returns the lock statement and the migrations of fsys
// ("migrations/*.sql") with placeholders replaced by r. The lock key goes
// in as a literal (a number computed here, never user text): the script
// takes no parameters.
func Script(fsys fs.ReadFileFS, schema string, r *strings.Replacer) (string, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return "", fmt.Errorf("list migrations: %w", err)
	}
	var b strings.Builder
	b.WriteString("SELECT pg_advisory_xact_lock(" + strconv.FormatInt(LockKey(schema), 10) + ");\n")
	for _, name := range names { // fs.Glob returns names sorted
		text, err := fsys.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("read migration %s: %w", name, err)
		}
		b.WriteString(expand(r.Replace(string(text))))
		b.WriteString("\n")
	}
	return b.String(), nil
}
