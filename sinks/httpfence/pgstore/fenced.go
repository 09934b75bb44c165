package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/internal/storeutil"
)

var _ idemstore.FencedStore = (*Store)(nil)

// JoinsFence implements idemstore.FencedStore: true for a *Fence working
// through the same db as s (the same pool), whose guard table s can raise
// in its own statement.
func (s *Store) JoinsFence(fs idemstore.FenceStore) bool {
	f, ok := fs.(*Fence)
	return ok && f != nil && f.guard.Table() != nil && f.db == s.db
}

// BeginFenced implements idemstore.FencedStore in one statement (one round
// trip, one commit; sent on its own where the session's default level is
// READ COMMITTED, see pgtx.Lone) for a new key: it reads the key's live record, raises
// the guard of (resource, h.Scope) by the rule of package pgfence unless
// the record is in flight or of another fingerprint (or the guard holds
// h's token and owner already: nothing to write), and claims the key
// (inserting it, or taking a dead record over) only when there was no
// live record and the guard accepted h. A replay of a completed key is
// that statement too: the record read, and the guard raised. A guard
// row it raises stays locked until the statement commits, as with
// pgfence.Guard.Check.
//
// A holder whose token the guard was at when this store last looked (the
// common case: a holder sending many requests) is sent the claim alone
// first: an INSERT gated on the guard holding h, which costs the server
// about what a plain INSERT does (the whole statement cost about twice
// that). Where it claims nothing (the key has a record, the guard has
// moved on since, or the session is at another level) the whole statement
// decides, one round trip more: so such a holder's replay is two
// statements, as Begin's is (guardHints).
//
// A key that another request claims between the read and the claim (the
// insert then finds its row) is looked up again with Begin; the fence was
// raised by then, by a holder it accepted. A holder the guard cannot take
// (see Fence.Accept) is answered as Begin followed by Fence.Accept would
// be, without the joined statement. fs must be a Fence that JoinsFence
// accepts: otherwise the error matches httpfence.ErrInvalidOptions.
func (s *Store) BeginFenced(ctx context.Context, key, fingerprint string, lockTTL time.Duration, fs idemstore.FenceStore, resource string, h fence.Holder) (idemstore.Outcome, error) {
	if ctx == nil {
		return idemstore.Outcome{}, nilContext("BeginFenced")
	}
	if !s.JoinsFence(fs) {
		return idemstore.Outcome{}, fmt.Errorf("%w: BeginFenced needs a pgstore.Fence on the store's database", httpfence.ErrInvalidOptions)
	}
	f := fs.(*Fence)
	if err := storeutil.ValidTTL("lock TTL", lockTTL); err != nil {
		return idemstore.Outcome{}, err
	}
	if err := f.guard.Validate(resource, h); err != nil {
		return s.beginInvalid(ctx, key, fingerprint, lockTTL, f, resource, h)
	}
	if _, _, slotScoped := fence.SplitSlotScope(h.Scope); slotScoped {
		return s.beginSlotScoped(ctx, key, fingerprint, lockTTL, f, resource, h)
	}
	if err := f.guard.CheckFormat(ctx, s.db); err != nil {
		return idemstore.Outcome{}, err
	}
	lock, err := storeutil.NewLock()
	if err != nil {
		return idemstore.Outcome{}, err
	}
	var (
		claimed, accepted bool
		same, inFlight    *bool
		leftMS            *int64
		status            *int32
		header, body      []byte
	)
	args := []any{key, fingerprint, lock, lockTTL.Milliseconds(), resource, h.Scope, int64(h.Token), ownerarg.Owner(h.Owner)}
	dest := []any{&claimed, &accepted, &same, &inFlight, &leftMS, &status, &header, &body}
	hint := guardHint{table: f.guard.Table().Sanitize(), resource: resource, scope: h.Scope}
	sqls := s.fencedSQL(hint.table)
	if s.hints.at(hint, h.Token) && s.lone.Try() {
		// The guard was at h's token when this store last looked: the
		// claim alone, gated on the guard holding h, which costs the
		// server about what a plain INSERT does. Where it claims nothing
		// (the key has a record, the guard moved on, or the session is at
		// another level), the whole statement decides.
		tag, err := s.execLone(ctx, sqls.held, args...)
		if err != nil {
			return idemstore.Outcome{}, fmt.Errorf("httpfence: postgres begin: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return idemstore.Outcome{State: idemstore.StateNew, Lock: lock}, nil
		}
	}
	err = s.gatedRow(ctx, sqls.whole, args, dest...)
	if err == nil {
		if accepted {
			s.hints.set(hint, h.Token)
		} else {
			s.hints.forget(hint)
		}
	}
	switch {
	case err != nil:
		return idemstore.Outcome{}, fmt.Errorf("httpfence: postgres begin: %w", err)
	case claimed:
		return idemstore.Outcome{State: idemstore.StateNew, Lock: lock}, nil
	case same != nil:
		return s.outcome(*same, *inFlight, *leftMS, status, header, body)
	case accepted:
		// Claimed by another request since the read: look again.
		return s.Begin(ctx, key, fingerprint, lockTTL)
	}
	// No live record, and the guard refused h: nothing was claimed.
	var current fence.Token
	err = pgtx.Tx(ctx, s.db, func(tx pgx.Tx) error {
		current, _, err = f.guard.Current(ctx, tx, resource, h.Scope)
		return err
	})
	if err != nil {
		return idemstore.Outcome{}, err
	}
	return idemstore.Outcome{}, &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: current}
}

// beginInvalid answers a holder the guard cannot take as Begin followed by
// Fence.Accept would: the state of a live record in flight or of another
// fingerprint, otherwise Accept's error (a claimed key is abandoned).
func (s *Store) beginInvalid(ctx context.Context, key, fingerprint string, lockTTL time.Duration, f *Fence, resource string, h fence.Holder) (idemstore.Outcome, error) {
	out, err := s.Begin(ctx, key, fingerprint, lockTTL)
	if err != nil {
		return out, err
	}
	switch out.State {
	case idemstore.StateNew:
		if aerr := s.Abandon(ctx, key, out.Lock); aerr != nil {
			return idemstore.Outcome{}, aerr
		}
	case idemstore.StateInFlight, idemstore.StateMismatch:
		return out, nil
	}
	return idemstore.Outcome{}, f.Accept(ctx, resource, h)
}

// beginSlotScoped is BeginFenced for a slot scope (fence.SplitSlotScope):
// its guard row is raised only under the lock of its unit's watermark
// (pgfence.Guard.PruneSlotScopes), which the joined statement does not
// take, so it is Begin followed by Fence.Accept, with the joined
// statement's answers: a new key is claimed only if Accept takes h (else
// abandoned, and Accept's error returned); a completed key is replayed,
// the fence raised when it accepts h (a stale h is no error: the replay
// wins); a key in flight or of another fingerprint is answered as is.
func (s *Store) beginSlotScoped(ctx context.Context, key, fingerprint string, lockTTL time.Duration, f *Fence, resource string, h fence.Holder) (idemstore.Outcome, error) {
	out, err := s.Begin(ctx, key, fingerprint, lockTTL)
	if err != nil {
		return out, err
	}
	switch out.State {
	case idemstore.StateNew:
		if aerr := f.Accept(ctx, resource, h); aerr != nil {
			if err := s.Abandon(ctx, key, out.Lock); err != nil {
				return idemstore.Outcome{}, errors.Join(aerr, err)
			}
			return idemstore.Outcome{}, aerr
		}
	case idemstore.StateCompleted:
		if aerr := f.Accept(ctx, resource, h); aerr != nil && !errors.Is(aerr, fence.ErrStaleToken) {
			return idemstore.Outcome{}, aerr
		}
	}
	return out, nil
}

// fencedStatements are BeginFenced's statements on one guard table: whole
// (fencedBeginSQL) and held (heldClaimSQL), the claim alone for a holder
// the guard was at when the store last looked (guardHints).
type fencedStatements struct{ whole, held string }

// fencedSQL returns BeginFenced's statements for the guard table (quoted),
// built once per table.
func (s *Store) fencedSQL(table string) fencedStatements {
	if q, ok := s.fenced.Load(table); ok {
		return q.(fencedStatements)
	}
	q := fencedStatements{whole: fencedBeginSQL(s.table, table), held: heldClaimSQL(s.table, table)}
	s.fenced.Store(table, q)
	return q
}

// guardHint names one fence: a guard table's row (resource, scope).
type guardHint struct{ table, resource, scope string }

// maxGuardHints bounds guardHints: past it, the hints start again empty.
const maxGuardHints = 4096

// guardHints remembers, per fence, the token the guard was last seen at
// by this store (accepted by BeginFenced): a holder presenting it again,
// the common case of a holder sending many requests, is sent the claim
// alone (heldClaimSQL), which reads the guard but proposes no raise and
// no read of the key's record. It is a hint: the statement checks the
// guard itself, and a stale hint costs one more statement, never a wrong
// answer. No owner is kept. Safe for concurrent use.
type guardHints struct {
	mu sync.Mutex
	m  map[guardHint]fence.Token
}

// at reports whether the guard of k was last seen at token t.
func (g *guardHints) at(k guardHint, t fence.Token) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen, ok := g.m[k]
	return ok && seen == t
}

// set records that the guard of k accepted token t.
func (g *guardHints) set(k guardHint, t fence.Token) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || len(g.m) >= maxGuardHints {
		g.m = make(map[guardHint]fence.Token)
	}
	g.m[k] = t
}

// forget drops the hint of k.
func (g *guardHints) forget(k guardHint) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, k)
}

// fencedBeginSQL is BeginFenced's statement on the record table keys and
// the guard table guard (both quoted). Parameters: $1 key, $2 fingerprint,
// $3 lock, $4 lock TTL in ms, $5 resource, $6 scope, $7 token, $8 owner.
// Its first column says whether it ran at READ COMMITTED; at another
// level it writes nothing (raise and claim are gated on it).
//
//   - cur is the key's live record as the statement's snapshot sees it.
//   - held finds the guard already at h (token and owner): the rule
//     accepts h and raising it would change nothing, so it is not
//     written. The common case, a holder sending many requests, then
//     costs no guard write. h is accepted as of the statement's snapshot;
//     a raise by a newer holder that commits after it comes after h, as
//     it would had h's raise been written.
//   - raise is the guard's rule (fencerule.Upsert), proposed only when the
//     key is new, dead or completed with the same fingerprint, and the
//     guard is not at h already.
//   - accepted: held or raise.
//   - claim inserts the record, or takes a dead one over (the WHERE clause
//     is checked on the latest row version after waiting for a concurrent
//     writer, as in takeoverSQL), only when cur is empty and h was
//     accepted.
//
// Data-modifying WITH clauses run once each, to completion, whatever the
// outer query reads; raise runs before claim, which reads its output.
func fencedBeginSQL(keys, guard string) string {
	raise := fencerule.Upsert{
		Table:     guard,
		Columns:   "resource, scope, token, owner, updated_at",
		Values:    "$5::text, $6::text, $7::bigint, $8::text, now()",
		When:      pgtx.AtReadCommitted + " AND NOT EXISTS (SELECT FROM cur WHERE NOT cur.same OR cur.in_flight) AND NOT EXISTS (SELECT FROM held)",
		Conflict:  "resource, scope",
		Set:       "updated_at = now()",
		Returning: "f.token",
	}.SQL()
	raiseAndAccepted := `, raise AS (
` + raise + `
), accepted AS (
  SELECT FROM raise UNION ALL SELECT FROM held
)`
	return `WITH cur AS (
  SELECT fingerprint = $2 AS same, lock_id IS NOT NULL AS in_flight, ` + lockLeftSQL + ` AS left_ms, status, header, body
    FROM ` + keys + ` WHERE key = $1 AND expires_at > now()
), held AS (
  SELECT FROM ` + guard + ` WHERE resource = $5 AND scope = $6 AND token = $7 AND owner = $8
)` + raiseAndAccepted + `, claim AS (
  INSERT INTO ` + keys + ` AS k (key, fingerprint, lock_id, expires_at)
  SELECT $1, $2, $3, now() + $4::bigint * interval '1 millisecond'
   WHERE ` + pgtx.AtReadCommitted + ` AND NOT EXISTS (SELECT FROM cur) AND EXISTS (SELECT FROM accepted)
  ON CONFLICT (key) DO UPDATE
     SET fingerprint = EXCLUDED.fingerprint, lock_id = EXCLUDED.lock_id, status = NULL, header = NULL, body = NULL,
         created_at = now(), expires_at = EXCLUDED.expires_at
   WHERE k.expires_at <= now()
  RETURNING k.lock_id
)
SELECT ` + pgtx.AtReadCommitted + `, EXISTS (SELECT FROM claim), EXISTS (SELECT FROM accepted), cur.same, cur.in_flight, cur.left_ms, cur.status, cur.header, cur.body
  FROM (VALUES (1)) AS one LEFT JOIN cur ON true`
}

// heldClaimSQL is BeginFenced's statement for a holder the guard is
// expected to hold already (guardHints), on the record table keys and the
// guard table guard (both quoted), with fencedBeginSQL's parameters. It
// inserts the record only where the guard holds h (token and owner) as of
// the statement's snapshot and the statement runs at READ COMMITTED; its
// command tag counts one row when it did, none otherwise (no RETURNING:
// a row description and a row cost the client more than the tag). On a
// conflict it neither writes nor locks (DO NOTHING), and it reads nothing
// else: a key with a record, a dead one included, is left to the whole
// statement. h is accepted as of the snapshot, as by fencedBeginSQL's
// held. The guard is read as the insert's source (one index scan under
// the insert) rather than in an EXISTS test, which measured a few µs more.
func heldClaimSQL(keys, guard string) string {
	return `INSERT INTO ` + keys + ` (key, fingerprint, lock_id, expires_at)
SELECT $1, $2, $3, now() + $4::bigint * interval '1 millisecond'
  FROM ` + guard + ` AS g
 WHERE g.resource = $5 AND g.scope = $6 AND g.token = $7 AND g.owner = $8 AND ` + pgtx.AtReadCommitted + `
ON CONFLICT (key) DO NOTHING`
}
