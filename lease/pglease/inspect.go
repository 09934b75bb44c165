package pglease

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/jackc/pgx/v5"
)

var _ leasedriver.Inspector = (*Backend)(nil)

// inspectQuery is the SELECT of Inspect and List, rows restricted by
// where. The owner is read only to be hashed (fence.OwnerID, scanInfos):
// it is never in an Info. TTL is on the database clock, ms precision.
func (b *Backend) inspectQuery(where string) string {
	table := pgx.Identifier{b.schema, "leases"}.Sanitize()
	return `SELECT name, owner, holder, token,
	CASE WHEN expires_at > clock_timestamp()
		THEN floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint ELSE 0 END AS ttl_ms
FROM ` + table + ` ` + where
}

// Inspect implements leasedriver.Inspector: one SELECT of name's row. A name
// never acquired is not an error (Held false, Token 0); ErrInvalidName
// (lease's) for an empty name. Waiting is always false: Postgres leases
// have no wait flag.
func (b *Backend) Inspect(ctx context.Context, name string) (leasedriver.Info, error) {
	if err := b.ready(ctx); err != nil {
		return leasedriver.Info{}, err
	}
	if name == "" {
		return leasedriver.Info{}, fmt.Errorf("%w: empty name", lease.ErrInvalidName)
	}
	infos, err := b.query(ctx, b.inspectQuery(`WHERE name = $1`), name)
	if err != nil {
		return leasedriver.Info{}, err
	}
	if len(infos) == 0 {
		return leasedriver.Info{Name: name}, nil
	}
	return infos[0], nil
}

// List implements leasedriver.Inspector: the rows whose name matches match (a
// glob as Redis SCAN MATCH reads it: * ? [abc] [^a] [a-z], \ escapes; ""
// for all; read by characters, so ? is one character where Redis reads
// one byte), sorted by name, at most limit (limit < 1:
// lease.ErrInvalidOptions).
func (b *Backend) List(ctx context.Context, match string, limit int) ([]leasedriver.Info, error) {
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: List limit %d, at least 1", lease.ErrInvalidOptions, limit)
	}
	if match == "" {
		match = "*"
	}
	re, err := globRegexp(match)
	if err != nil {
		return nil, fmt.Errorf("%w: List match %q: %v", lease.ErrInvalidOptions, match, err)
	}
	return b.query(ctx, b.inspectQuery(`WHERE name ~ $1 ORDER BY name COLLATE "C" LIMIT $2`), re, limit)
}

// query runs one SELECT of lease rows (pgtx.Batch: one round trip).
func (b *Backend) query(ctx context.Context, sql string, args ...any) ([]leasedriver.Info, error) {
	if err := b.format.Check(ctx, b.checkFormat); err != nil {
		return nil, err
	}
	var out []leasedriver.Info
	err := b.batch(ctx, func(batch *pgx.Batch) {
		batch.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			infos, err := scanInfos(rows)
			out = infos
			return err
		})
	})
	if err != nil {
		// Name the store and the table: "relation does not exist" alone
		// does not say which schema was read.
		return nil, fmt.Errorf("pglease: read leases from %s: %w", b.table, err)
	}
	return out, nil
}

func scanInfos(rows pgx.Rows) ([]leasedriver.Info, error) {
	defer rows.Close()
	var out []leasedriver.Info
	for rows.Next() {
		var info leasedriver.Info
		var owner string
		var token, ttlMS int64
		if err := rows.Scan(&info.Name, &owner, &info.Holder, &token, &ttlMS); err != nil {
			return nil, err
		}
		info.Token = fence.Token(token)
		if owner != "" && ttlMS > 0 {
			info.Held = true
			info.OwnerID = fence.OwnerID(owner)
			info.TTL = time.Duration(ttlMS) * time.Millisecond
		} else {
			info.Holder = ""
		}
		out = append(out, info)
	}
	return out, rows.Err()
}

// globRegexp translates a Redis glob into an anchored POSIX regular
// expression for Postgres' ~ operator. It reads the glob by characters
// (runes), not bytes: a name's non-ASCII character is one character of
// the pattern, and '?' matches one character.
func globRegexp(glob string) (string, error) {
	var b strings.Builder
	b.WriteString("^")
	rs := []rune(glob)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 < len(rs) {
				i++
				b.WriteString(regexp.QuoteMeta(string(rs[i])))
			} else {
				b.WriteString(`\\`)
			}
		case '[':
			end := slices.Index(rs[i+1:], ']')
			if end < 0 {
				return "", errors.New("unclosed [")
			}
			class := string(rs[i+1 : i+1+end])
			if strings.HasPrefix(class, "^") {
				class = "^" + strings.ReplaceAll(class[1:], `\`, `\\`)
			} else {
				class = strings.ReplaceAll(class, `\`, `\\`)
			}
			b.WriteString("[" + class + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String(), nil
}
