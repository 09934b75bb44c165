-- The holder label of each attempt (ledger.Attempt.Holder: the replica's
-- name), shown by views in place of the owner, which is a write capability.
-- '' when the replica gave none, and for attempts recorded before this
-- migration.
ALTER TABLE {{schema}}.job_run_attempts ADD COLUMN IF NOT EXISTS holder text NOT NULL DEFAULT '';
