package pgledger

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/internal/fencerule"
)

// queries holds the ledger's SQL with the schema filled in. Every value is
// a parameter; the only text spliced in is the quoted, validated schema.
type queries struct {
	// raise: $1 job, $2 partition, $3 token, $4 owner, $5 slot or NULL,
	// $6 now (the horizon of a new row).
	// Returns the token when the rule accepts, no row when it refuses:
	// fencerule.Upsert, pgfence's guard statement, so the check and the
	// raise are one atomic step.
	raise      string
	fenceToken string // $1 job, $2 partition
	// ensureFence creates the pair's fence row (token 0: no holder yet,
	// horizon $4, the caller's now, truncated to the second) if missing and returns its
	// horizon; on conflict it locks the row and returns the existing one.
	// Either way it raises last_slot to $3 (NULL: leaves it), and never
	// touches the token.
	ensureFence string // $1 job, $2 partition, $3 slot or NULL, $4 now
	raiseLast   string // $1 job, $2 partition, $3 slot
	// raiseSlot is raise for a slot's own fence (its slot scope):
	// $1 job, $2 partition, $3 slot, $4 token, $5 owner. Returns the token
	// when the rule accepts, no row when it refuses; atomic the same way.
	raiseSlot      string
	slotFenceToken string // $1 job, $2 partition, $3 slot

	runForUpdate string // $1 job, $2 slot, $3 partition
	insertRun    string
	startAttempt string // next attempt on an existing run
	insertAtt    string
	abandonAtt   string
	exhaust      string // $1 id, $2 status, $3 now
	heartbeat    string
	finish       string
	attemptOf    string
	insertSkip   string
	request      string
	insertReq    string
	setPaused    string
	paused       string // $1 job

	// slotClosed: $1 job, $2 partition, $3 slot. True when the slot is
	// before its pair's prune cutoff and has no fence of its own: Prune
	// deleted it with the slot's record, and the slot is closed.
	slotClosed string
	// pruneSlotFences: deletes the slot fences (job_slot_fences) of slots
	// before their pair's cutoff whose record is gone, under the pair
	// rows' locks (a transition of the pair takes its row first).
	pruneSlotFences string

	// prune: $1 cutoff, $2 batch size. Deletes one batch of done runs
	// (their attempts cascade); rows a transition holds are skipped.
	prune string
	// pruneCutoff: $1 cutoff. Raises every pair's pruned_before to it
	// (State.Pruned), before prune deletes anything.
	pruneCutoff string
	// prunePreview: $1 cutoff, $2 limit. The rows prune would delete (the
	// same predicate, prunable), with the count of all.
	prunePreview string

	state  string
	states string // $1 jobs, $2 partitions, $3 sinces (arrays, in order)
	get    string // $1 job, $2 slot, $3 partition
	list   string // $1 job, $2 partition, $3 from, $4 to, $5 limit
}

// prunable is the predicate of a job_runs row r that Prune deletes ($1
// the cutoff): done before the cutoff, and not its pair's last slot.
const prunable = `r.schedule_slot < $1
                 AND (r.status IN ('succeeded', 'skipped', 'missed', 'abandoned')
                      OR (r.status = 'failed' AND r.retry_at IS NULL))
                 AND NOT EXISTS (SELECT 1 FROM {{fences}} f
                                  WHERE f.job_name = r.job_name AND f.partition_key = r.partition_key
                                    AND f.last_slot = r.schedule_slot)`

func newQueries(schema string) queries {
	fences := pgx.Identifier{schema, "job_fences"}.Sanitize()
	slotFences := pgx.Identifier{schema, "job_slot_fences"}.Sanitize()
	r := strings.NewReplacer(
		"{{fences}}", fences,
		"{{slotFences}}", slotFences,
		"{{runs}}", pgx.Identifier{schema, "job_runs"}.Sanitize(),
		"{{attempts}}", pgx.Identifier{schema, "job_run_attempts"}.Sanitize(),
		"{{pauses}}", pgx.Identifier{schema, "job_pauses"}.Sanitize(),
	)
	return queries{
		raise: fencerule.Upsert{
			Table:     fences,
			Columns:   "job_name, partition_key, token, owner, horizon, last_slot, updated_at",
			Values:    "$1, $2, $3, $4, date_trunc('second', $6::timestamptz), $5, now()",
			Conflict:  "job_name, partition_key",
			Set:       "last_slot = GREATEST(f.last_slot, EXCLUDED.last_slot), updated_at = now()",
			Returning: "f.token",
		}.SQL(),
		fenceToken: r.Replace(`SELECT token FROM {{fences}} WHERE job_name = $1 AND partition_key = $2`),
		ensureFence: r.Replace(`INSERT INTO {{fences}} AS f (job_name, partition_key, token, owner, horizon, last_slot)
VALUES ($1, $2, 0, '', date_trunc('second', $4::timestamptz), $3)
ON CONFLICT (job_name, partition_key) DO UPDATE SET last_slot = GREATEST(f.last_slot, EXCLUDED.last_slot)
RETURNING f.horizon`),
		raiseLast: r.Replace(`UPDATE {{fences}} SET last_slot = GREATEST(last_slot, $3)
WHERE job_name = $1 AND partition_key = $2`),
		raiseSlot: fencerule.Upsert{
			Table:     slotFences,
			Columns:   "job_name, partition_key, schedule_slot, token, owner, updated_at",
			Values:    "$1, $2, $3, $4, $5, now()",
			Conflict:  "job_name, partition_key, schedule_slot",
			Set:       "updated_at = now()",
			Returning: "f.token",
		}.SQL(),
		slotFenceToken: r.Replace(`SELECT token FROM {{slotFences}}
WHERE job_name = $1 AND partition_key = $2 AND schedule_slot = $3`),

		slotClosed: r.Replace(`SELECT coalesce(f.pruned_before > $3, false) AND NOT EXISTS (
    SELECT 1 FROM {{slotFences}} s
     WHERE s.job_name = $1 AND s.partition_key = $2 AND s.schedule_slot = $3)
FROM {{fences}} f WHERE f.job_name = $1 AND f.partition_key = $2`),
		pruneSlotFences: r.Replace(`WITH p AS (
    SELECT f.job_name, f.partition_key, f.pruned_before FROM {{fences}} f
     WHERE f.pruned_before IS NOT NULL
       AND EXISTS (SELECT 1 FROM {{slotFences}} s
                    WHERE s.job_name = f.job_name AND s.partition_key = f.partition_key
                      AND s.schedule_slot < f.pruned_before)
       FOR UPDATE OF f)
DELETE FROM {{slotFences}} s USING p
 WHERE s.job_name = p.job_name AND s.partition_key = p.partition_key
   AND s.schedule_slot < p.pruned_before
   AND NOT EXISTS (SELECT 1 FROM {{runs}} r
                    WHERE r.job_name = s.job_name AND r.partition_key = s.partition_key
                      AND r.schedule_slot = s.schedule_slot)`),
		pruneCutoff: r.Replace(`UPDATE {{fences}} SET pruned_before = $1
 WHERE pruned_before IS NULL OR pruned_before < $1`),
		prune: r.Replace(`DELETE FROM {{runs}}
 WHERE id IN (SELECT r.id FROM {{runs}} r
               WHERE ` + prunable + `
               LIMIT $2
               FOR UPDATE OF r SKIP LOCKED)`),
		prunePreview: r.Replace(`SELECT r.job_name, r.schedule_slot, r.partition_key, count(*) OVER ()
FROM {{runs}} r
WHERE ` + prunable + `
ORDER BY r.job_name, r.partition_key, r.schedule_slot
LIMIT $2`),

		runForUpdate: r.Replace(`SELECT id, status, attempt, attempt_base, retry_at IS NOT NULL, owner, fence_token
FROM {{runs}} WHERE job_name = $1 AND schedule_slot = $2 AND partition_key = $3
FOR UPDATE`),
		// $1 job, $2 slot, $3 partition, $4 owner, $5 token, $6 now.
		insertRun: r.Replace(`INSERT INTO {{runs}} AS r (job_name, schedule_slot, partition_key, status, attempt, attempt_base,
    owner, fence_token, heartbeat_at, created_at, updated_at)
VALUES ($1, $2, $3, 'running', 1, 0, $4, $5, $6, $6, $6)
RETURNING id`),
		// $1 id, $2 owner, $3 token, $4 now. Returns the new attempt.
		startAttempt: r.Replace(`UPDATE {{runs}}
   SET status = 'running', attempt = attempt + 1, owner = $2, fence_token = $3,
       heartbeat_at = $4, retry_at = NULL, updated_at = $4
 WHERE id = $1
RETURNING attempt`),
		// $1 id, $2 attempt, $3 owner, $4 token, $5 now, $6 holder label.
		insertAtt: r.Replace(`INSERT INTO {{attempts}} (job_run_id, attempt, owner, fence_token, status, started_at, heartbeat_at, holder)
VALUES ($1, $2, $3, $4, 'running', $5, $5, $6)`),
		// $1 id, $2 attempt, $3 now, $4 error.
		abandonAtt: r.Replace(`UPDATE {{attempts}}
   SET status = 'abandoned', error_class = 'interrupted', error = $4, finished_at = $3
 WHERE job_run_id = $1 AND attempt = $2 AND status = 'running'`),
		exhaust: r.Replace(`UPDATE {{runs}} SET status = $2, retry_at = NULL, updated_at = $3 WHERE id = $1`),
		// $1 job, $2 slot, $3 partition, $4 owner, $5 attempt, $6 now.
		heartbeat: r.Replace(`WITH run AS (
    UPDATE {{runs}} SET heartbeat_at = $6, updated_at = $6
     WHERE job_name = $1 AND schedule_slot = $2 AND partition_key = $3
       AND status = 'running' AND attempt = $5 AND owner = $4
    RETURNING id)
UPDATE {{attempts}} a SET heartbeat_at = $6
  FROM run WHERE a.job_run_id = run.id AND a.attempt = $5
RETURNING a.attempt`),
		// $1 job, $2 slot, $3 partition, $4 owner, $5 attempt, $6 now,
		// $7 status, $8 class, $9 error, $10 retry at or NULL, $11 1 for
		// a deferral (not counted against the budget), else 0.
		finish: r.Replace(`WITH run AS (
    UPDATE {{runs}} SET status = $7, retry_at = $10, updated_at = $6, attempt_base = attempt_base + $11::int
     WHERE job_name = $1 AND schedule_slot = $2 AND partition_key = $3
       AND status = 'running' AND attempt = $5 AND owner = $4
    RETURNING id)
UPDATE {{attempts}} a SET status = $7, error_class = $8, error = $9, finished_at = $6
  FROM run WHERE a.job_run_id = run.id AND a.attempt = $5
RETURNING a.attempt`),
		// $1 job, $2 slot, $3 partition, $4 attempt: the run's state and
		// the attempt's, to tell a repeated Finish from a stale one.
		attemptOf: r.Replace(`SELECT r.status, r.attempt, r.fence_token, a.owner, a.fence_token, a.status
FROM {{runs}} r JOIN {{attempts}} a ON a.job_run_id = r.id AND a.attempt = $4
WHERE r.job_name = $1 AND r.schedule_slot = $2 AND r.partition_key = $3`),
		// $1 job, $2 slot, $3 partition, $4 status, $5 reason, $6 owner,
		// $7 token, $8 now. No row: the slot has a record already.
		insertSkip: r.Replace(`INSERT INTO {{runs}} (job_name, schedule_slot, partition_key, status, attempt, attempt_base,
    reason, owner, fence_token, created_at, updated_at)
VALUES ($1, $2, $3, $4, 0, 0, $5, $6, $7, $8, $8)
ON CONFLICT (job_name, schedule_slot, partition_key) DO NOTHING
RETURNING id`),
		// $1 id, $2 reason, $3 now.
		request: r.Replace(`UPDATE {{runs}}
   SET status = 'pending', attempt_base = attempt, reason = $2, retry_at = NULL, updated_at = $3
 WHERE id = $1`),
		// $1 job, $2 slot, $3 partition, $4 reason, $5 now.
		insertReq: r.Replace(`INSERT INTO {{runs}} (job_name, schedule_slot, partition_key, status, attempt, attempt_base,
    reason, created_at, updated_at)
VALUES ($1, $2, $3, 'pending', 0, 0, $4, $5, $5)`),
		setPaused: r.Replace(`INSERT INTO {{pauses}} AS p (job_name, paused, updated_at) VALUES ($1, $2, now())
ON CONFLICT (job_name) DO UPDATE SET paused = EXCLUDED.paused, updated_at = now()`),

		// $1 job, $2 partition, $3 since. One statement, one snapshot: the
		// first row carries the pair's fence and pause flag, and the open
		// slots if any (NULL slot columns when there is none). Pending slots
		// are open whatever since says (an operator asked for them), and so
		// are running ones: a lease holder reads State only between its own
		// attempts, so any running slot it sees is abandoned, however old.
		paused: r.Replace(`SELECT COALESCE((SELECT paused FROM {{pauses}} WHERE job_name = $1), false)`),
		state: r.Replace(`WITH f AS (
    SELECT horizon, last_slot, token, pruned_before FROM {{fences}} WHERE job_name = $1 AND partition_key = $2)
SELECT (SELECT horizon FROM f), (SELECT last_slot FROM f), (SELECT pruned_before FROM f),
       COALESCE((SELECT paused FROM {{pauses}} WHERE job_name = $1), false),
       r.schedule_slot, r.status, r.retry_at
  FROM (VALUES (1)) AS one (n)
  LEFT JOIN {{runs}} r
    ON r.job_name = $1 AND r.partition_key = $2
   AND (r.status = 'pending'
        OR r.status = 'running'
        OR (r.status = 'failed' AND (r.schedule_slot >= $3 OR r.retry_at >= $3) AND r.retry_at IS NOT NULL))
 ORDER BY r.schedule_slot`),
		// state for many pairs in one statement: the rows of each pair,
		// its index (from 1) first, in the order asked, each pair's first
		// row carrying its fence and pause flag as state's does.
		states: r.Replace(`SELECT q.i, f.horizon, f.last_slot, f.pruned_before, COALESCE(p.paused, false),
       r.schedule_slot, r.status, r.retry_at
  FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS q (job, part, since, i)
  LEFT JOIN {{fences}} f ON f.job_name = q.job AND f.partition_key = q.part
  LEFT JOIN {{pauses}} p ON p.job_name = q.job
  LEFT JOIN {{runs}} r
    ON r.job_name = q.job AND r.partition_key = q.part
   AND (r.status = 'pending'
        OR r.status = 'running'
        OR (r.status = 'failed' AND (r.schedule_slot >= q.since OR r.retry_at >= q.since) AND r.retry_at IS NOT NULL))
 ORDER BY q.i, r.schedule_slot`),
		get: records(r, `job_name = $1 AND schedule_slot = $2 AND partition_key = $3`),
		list: records(r, `job_name = $1 AND partition_key = $2 AND schedule_slot >= $3 AND schedule_slot < $4
     ORDER BY schedule_slot DESC LIMIT $5`),
	}
}

// records is the query of the runs that where selects, newest first, each
// joined with its attempts in order: one statement, so a record and its
// attempts come from one snapshot.
func records(r *strings.Replacer, where string) string {
	return r.Replace(`WITH r AS (
    SELECT id, job_name, schedule_slot, partition_key, status, attempt, retry_at, reason
      FROM {{runs}}
     WHERE ` + where + `)
SELECT r.id, r.job_name, r.schedule_slot, r.partition_key, r.status, r.attempt, r.retry_at, r.reason,
       a.attempt, a.fence_token, a.owner, a.holder, a.status, a.error_class, a.error,
       a.started_at, a.heartbeat_at, a.finished_at
  FROM r LEFT JOIN {{attempts}} a ON a.job_run_id = r.id
 ORDER BY r.schedule_slot DESC, a.attempt`)
}
