package pglease

import "github.com/holdfast-go/holdfast/internal/pgtx"

// queries are the backend's statements on one table (schema-qualified and
// quoted). Every time is clock_timestamp(), the database's clock at the
// moment of evaluation, so a statement run late in a transaction does not
// see an old now().
type queries struct {
	acquire, renew, release string
}

func newQueries(table string) queries {
	return queries{
		// $1 name, $2 owner, $3 ttl in ms, $4 holder label. Returns whether this statement
		// took the lease, the row's token and, when held by another, its
		// remaining ms. The row is taken only when free or expired, its
		// token raised in the same statement. A held row is updated to
		// itself, so that RETURNING reads its latest committed version
		// (a try racing a grant that committed after this statement's
		// snapshot still learns the holder's TTL), at the price of a dead
		// row version (a HOT update) per failed try. now is read once:
		// every column decides on the same instant. The remaining TTL is
		// read on the clock of RETURNING, after any wait for a racing
		// grant: against now, which came before that grant's own clock
		// reading, it exceeded the holder's TTL (by a ms, seen in CI);
		// at least 1 ms, as the row was held at now. The token is
		// max(last token + 1, the database clock in µs), as on Redis: a
		// row deleted (or a table restored from an old backup) does not
		// bring tokens back below those issued before. It writes (and
		// returns a row) only at READ COMMITTED (pgtx.AtReadCommitted), so
		// it can be sent on its own (see Backend.alone).
		acquire: `WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t)
INSERT INTO ` + table + ` AS l (name, owner, token, expires_at, holder)
SELECT $1, $2, (extract(epoch FROM now.t) * 1000000)::bigint, now.t + $3::bigint * interval '1 millisecond', $4 FROM now
 WHERE ` + pgtx.AtReadCommitted + `
ON CONFLICT (name) DO UPDATE SET
	owner      = CASE WHEN l.expires_at <= (SELECT t FROM now) THEN excluded.owner ELSE l.owner END,
	holder     = CASE WHEN l.expires_at <= (SELECT t FROM now) THEN excluded.holder ELSE l.holder END,
	token      = CASE WHEN l.expires_at <= (SELECT t FROM now) THEN greatest(l.token + 1, excluded.token) ELSE l.token END,
	expires_at = CASE WHEN l.expires_at <= (SELECT t FROM now) THEN excluded.expires_at ELSE l.expires_at END
RETURNING l.owner = $2, l.token,
	greatest(ceil(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000), 1)::bigint`,

		// $1 names, $2 owners, $3 ttls in ms, one element per lease.
		// Returns the (name, owner) of each lease renewed; none at another
		// level than READ COMMITTED.
		renew: `UPDATE ` + table + ` AS l
SET expires_at = clock_timestamp() + b.ttl * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS b(name, owner, ttl)
WHERE l.name = b.name AND l.owner = b.owner AND l.expires_at > clock_timestamp()
  AND ` + pgtx.AtReadCommitted + `
RETURNING l.name, l.owner`,

		// $1 name, $2 owner. One row affected when released (none at
		// another level than READ COMMITTED).
		release: `UPDATE ` + table + `
SET owner = '', expires_at = '-infinity'
WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp() AND ` + pgtx.AtReadCommitted,
	}
}
