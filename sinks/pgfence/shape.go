package pgfence

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
)

// prepareWrite checks the input of FencedUpdate and FencedUpsert and
// returns the statements for the shape of row and set.
func prepareWrite(row Row, set map[string]any, h fence.Holder) (*shape, error) {
	if err := validateOwner(h.Owner); err != nil {
		return nil, err
	}
	if err := validateScope(h.Scope); err != nil {
		return nil, err
	}
	t := h.Token
	if t == fence.None {
		return nil, fmt.Errorf("pgfence: fenced write of %s: %w", row.resource(), fence.ErrNoToken)
	}
	if uint64(t) > math.MaxInt64 {
		return nil, fmt.Errorf("%w: token %d for %s exceeds the bigint maximum %d", ErrTokenOutOfRange, t, row.resource(), int64(math.MaxInt64))
	}
	if len(row.Table) == 0 || len(row.Table) > len(shapeKey{}.table) {
		return nil, fmt.Errorf("%w: table %q: want 1 to 3 name parts", ErrInvalidIdentifier, []string(row.Table))
	}
	if sh := shapes.lastOf(row, set); sh != nil {
		return sh, nil
	}
	if len(set) > len(shapeKey{}.cols) {
		return newShape(row, slices.Sorted(maps.Keys(set)))
	}
	var key shapeKey
	copy(key.table[:], row.Table)
	key.parts = len(row.Table)
	key.key = row.KeyColumn
	for col := range set {
		key.cols[key.ncols] = col
		key.ncols++
	}
	slices.Sort(key.cols[:key.ncols])
	return shapes.get(key, row)
}

// shape is the SQL of the fenced statements for one table, key column and
// set of columns.
type shape struct {
	table                   pgx.Identifier // a copy of Row.Table
	key                     string         // Row.KeyColumn
	cols                    []string       // the columns of set, sorted: $5, $6, ...
	update, upsert, current string
}

// is reports whether sh is the shape of row and set.
func (sh *shape) is(row Row, set map[string]any) bool {
	if sh.key != row.KeyColumn || len(set) != len(sh.cols) || !slices.Equal(sh.table, row.Table) {
		return false
	}
	for _, col := range sh.cols {
		if _, ok := set[col]; !ok {
			return false
		}
	}
	return true
}

// newShape validates the identifiers and builds the statements.
func newShape(row Row, cols []string) (*shape, error) {
	for _, part := range row.Table {
		if !validIdentifier(part) {
			return nil, fmt.Errorf("%w: table %q: empty part, invalid UTF-8 or NUL byte", ErrInvalidIdentifier, []string(row.Table))
		}
	}
	if !validIdentifier(row.KeyColumn) {
		return nil, fmt.Errorf("%w: key column %q", ErrInvalidIdentifier, row.KeyColumn)
	}
	if isFenceColumn(row.KeyColumn) {
		return nil, fmt.Errorf("%w: key column %q is a fence column", ErrInvalidIdentifier, row.KeyColumn)
	}
	for _, col := range cols {
		switch {
		case !validIdentifier(col):
			return nil, fmt.Errorf("%w: set column %q", ErrInvalidIdentifier, col)
		case col == row.KeyColumn:
			return nil, fmt.Errorf("%w: set column %q is the key column", ErrInvalidIdentifier, col)
		case isFenceColumn(col):
			return nil, fmt.Errorf("%w: set column %q is a fence column, written by pgfence", ErrInvalidIdentifier, col)
		}
	}
	return &shape{
		table: slices.Clone(row.Table), key: row.KeyColumn, cols: cols,
		update: updateSQL(row, cols), upsert: upsertSQL(row, cols), current: currentRowSQL(row),
	}, nil
}

// isFenceColumn reports whether col is one of the columns pgfence writes.
func isFenceColumn(col string) bool {
	return col == TokenColumn || col == OwnerColumn || col == ScopeColumn
}

// args returns the parameters of the statements: $1 the key, $2 the token,
// $3 the owner, $4 the scope, then the values of set in column order.
func (sh *shape) args(row Row, set map[string]any, h fence.Holder) []any {
	args := make([]any, 0, 4+len(sh.cols))
	args = append(args, row.Key, int64(h.Token), ownerarg.Owner(h.Owner), h.Scope)
	for _, col := range sh.cols {
		args = append(args, set[col])
	}
	return args
}

// shapeKey identifies a shape without allocating: up to 3 table name parts
// and up to 8 set columns (sorted). Larger sets are not cached.
type shapeKey struct {
	table [3]string
	parts int
	key   string
	ncols int
	cols  [8]string
}

// maxShapes bounds the cache: a program uses a handful of statement shapes;
// one that builds column sets dynamically should not grow memory forever.
const maxShapes = 1024

// shapeCache memoizes shapes, so a write builds no SQL and pgx finds its
// prepared statement by the same text every time. last is the shape found
// most recently: a program that writes one shape over and over finds it
// with a comparison and one map lookup per set column, without building,
// sorting and hashing a shapeKey (a few hundred ns per write).
type shapeCache struct {
	last atomic.Pointer[shape]
	mu   sync.RWMutex
	m    map[shapeKey]*shape
}

// lastOf returns the most recent shape when it is the shape of row and
// set, nil otherwise.
func (c *shapeCache) lastOf(row Row, set map[string]any) *shape {
	if sh := c.last.Load(); sh != nil && sh.is(row, set) {
		return sh
	}
	return nil
}

var shapes = shapeCache{m: map[shapeKey]*shape{}}

func (c *shapeCache) get(key shapeKey, row Row) (*shape, error) {
	c.mu.RLock()
	sh, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		c.last.Store(sh)
		return sh, nil
	}
	sh, err := newShape(row, slices.Clone(key.cols[:key.ncols]))
	if err != nil {
		return nil, err // invalid shapes are not cached: they never reach SQL
	}
	c.mu.Lock()
	if len(c.m) < maxShapes {
		c.m[key] = sh
	}
	c.mu.Unlock()
	c.last.Store(sh)
	return sh, nil
}

// validIdentifier reports whether s can name a table or column: not empty,
// valid UTF-8 without NUL bytes. Quoting makes every such name safe.
func validIdentifier(s string) bool { return s != "" && validText(s) }

var (
	quotedToken = pgx.Identifier{TokenColumn}.Sanitize()
	quotedOwner = pgx.Identifier{OwnerColumn}.Sanitize()
	quotedScope = pgx.Identifier{ScopeColumn}.Sanitize()
)

// ruleSQL is the acceptance rule on a row's fence columns, for the
// presented token $2, owner $3 and scope $4; prefix qualifies the row's
// columns ("" or "cur."). A row without a token (NULL or 0) accepts any
// holder. A row with one accepts only its own scope (or any, while its
// scope is NULL: written before the column existed), and then by the rule
// itself, fencerule.SQLAccepts, the expression pgfence's guard statement
// (fencerule.Upsert) uses too.
func ruleSQL(prefix string) string {
	tok, own, scope := prefix+quotedToken, prefix+quotedOwner, prefix+quotedScope
	return "(COALESCE(" + tok + ", 0) = 0 OR ((" + scope + " IS NULL OR " + scope + " = $4) AND " +
		fencerule.SQLAccepts(tok, own, "$2", "$3") + "))"
}

// updateSQL builds FencedUpdate's statement (see its documentation).
func updateSQL(row Row, cols []string) string {
	var b strings.Builder
	b.Grow(160 + 24*len(cols))
	b.WriteString("UPDATE ")
	b.WriteString(row.Table.Sanitize())
	b.WriteString(" SET ")
	for i, col := range cols {
		b.WriteString(pgx.Identifier{col}.Sanitize())
		b.WriteString(" = $")
		b.WriteString(strconv.Itoa(i + 5))
		b.WriteString(", ")
	}
	b.WriteString(quotedToken + " = $2, " + quotedOwner + " = $3, " + quotedScope + " = $4 WHERE ")
	b.WriteString(pgx.Identifier{row.KeyColumn}.Sanitize())
	b.WriteString(" = $1 AND " + ruleSQL(""))
	return b.String()
}

// upsertSQL builds FencedUpsert's statement (see its documentation).
func upsertSQL(row Row, cols []string) string {
	key := pgx.Identifier{row.KeyColumn}.Sanitize()
	quoted := make([]string, len(cols))
	for i, col := range cols {
		quoted[i] = pgx.Identifier{col}.Sanitize()
	}
	var b strings.Builder
	b.Grow(320 + 48*len(cols))
	b.WriteString("INSERT INTO ")
	b.WriteString(row.Table.Sanitize())
	b.WriteString(" AS cur (")
	b.WriteString(key)
	for _, q := range quoted {
		b.WriteString(", ")
		b.WriteString(q)
	}
	b.WriteString(", " + quotedToken + ", " + quotedOwner + ", " + quotedScope + ") VALUES ($1")
	for i := range quoted {
		b.WriteString(", $")
		b.WriteString(strconv.Itoa(i + 5))
	}
	b.WriteString(", $2, $3, $4) ON CONFLICT (")
	b.WriteString(key)
	b.WriteString(") DO UPDATE SET ")
	for _, q := range quoted {
		b.WriteString(q + " = EXCLUDED." + q + ", ")
	}
	b.WriteString(quotedToken + " = $2, " + quotedOwner + " = $3, " + quotedScope + " = $4 WHERE " + ruleSQL("cur."))
	return b.String()
}

// currentRowSQL reads the row's fence columns, NULL as none (the scope as
// NULL).
func currentRowSQL(row Row) string {
	return "SELECT COALESCE(" + quotedToken + ", 0), COALESCE(" + quotedOwner + ", ''), " + quotedScope + " FROM " +
		row.Table.Sanitize() + " WHERE " + pgx.Identifier{row.KeyColumn}.Sanitize() + " = $1"
}
