-- The stored format (docs/compatibility.md). The
-- comment of {{schema}}.job_runs names the format of every table of
-- scheduler/ledger/pgledger; a table marked with another one (a newer build's, another
-- store's) is refused before any migration touches it, with SQLSTATE
-- HF001 and the comment found as DETAIL. A missing table or one with no
-- comment passes: the last migration file marks it. It runs first; the
-- directive line below stands for the statement (formatver.MigrationCheck),
-- written out by Migrate and Migrations.
-- holdfast:format-check scheduler/ledger/pgledger {{schema}}.job_runs

-- 001_ledger.sql: the tables of package pgledger.
--
-- {{schema}} stands for the quoted schema from Config. Migrate runs every
-- file in name order, in one transaction, after taking the advisory lock for
-- the schema (the same key pgfence uses). Every statement must be
-- idempotent: there is no version table, a file runs again on every Migrate.

CREATE SCHEMA IF NOT EXISTS {{schema}};

-- One row per (job, partition): the fence every lease holder's transition is
-- checked against (the highest token accepted and its owner, 0 and '' before
-- the first; a per-slot transition uses job_slot_fences instead), when the
-- ledger's memory of the pair starts, and the latest slot begun, skipped or
-- missed. Every write to the pair's runs locks this row first, so writers of
-- one (job, partition) take turns.
CREATE TABLE IF NOT EXISTS {{schema}}.job_fences (
    job_name      text        NOT NULL,
    partition_key text        NOT NULL,
    token         bigint      NOT NULL CHECK (token >= 0),
    owner         text        NOT NULL,
    horizon       timestamptz NOT NULL,
    last_slot     timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, partition_key)
);

-- One row per slot written under a lease of that one slot
-- (scheduler.Fence.PerSlot, for OverlapAllow, where runs of one (job,
-- partition) overlap, each under its own lease): the slot's own fence, the
-- highest token accepted for it and its owner. A transition with PerSlot
-- checks and raises this row instead of the job_fences token, which it
-- leaves as it is; it still locks the job_fences row first (creating it if
-- missing), so writers of one (job, partition) keep taking turns and
-- horizon and last_slot work as for pair-fenced writes. A row is created
-- only with an accepted token (never 0). A table of its own rather than
-- columns on job_runs: the fence must be checked before the run exists (a
-- refused Begin creates no run), raised by a Skip that leaves an existing
-- record as it is, and survive a retention job deleting job_runs rows
-- (deleting a row here lets a token below it write that slot again: delete
-- only rows of slots whose leases are long gone). Pair-fenced writes never
-- touch this table.
CREATE TABLE IF NOT EXISTS {{schema}}.job_slot_fences (
    job_name      text        NOT NULL,
    partition_key text        NOT NULL,
    schedule_slot timestamptz NOT NULL,
    token         bigint      NOT NULL CHECK (token > 0),
    owner         text        NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, partition_key, schedule_slot)
);

-- One row per slot: its logical run. attempt is the latest attempt's number
-- (0 before the first); attempt_base is attempt as the last Request found
-- it, so attempt - attempt_base attempts were made since. retry_at is set
-- for a failure that may be retried, NULL when it is final. owner and
-- fence_token are those of the latest transition by a lease holder.
CREATE TABLE IF NOT EXISTS {{schema}}.job_runs (
    id            bigserial   PRIMARY KEY,
    job_name      text        NOT NULL,
    schedule_slot timestamptz NOT NULL,
    partition_key text        NOT NULL,
    status        text        NOT NULL CHECK (status IN
                      ('pending', 'running', 'succeeded', 'failed', 'abandoned', 'skipped', 'missed')),
    attempt       int         NOT NULL CHECK (attempt >= 0),
    attempt_base  int         NOT NULL DEFAULT 0 CHECK (attempt_base >= 0 AND attempt_base <= attempt),
    retry_at      timestamptz,
    reason        text        NOT NULL DEFAULT '',
    owner         text        NOT NULL DEFAULT '',
    fence_token   bigint      NOT NULL DEFAULT 0 CHECK (fence_token >= 0),
    heartbeat_at  timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE (job_name, schedule_slot, partition_key)
);

-- State and List read one (job, partition) by slot range; the unique
-- index above leads with the slot, which would scan every partition.
CREATE INDEX IF NOT EXISTS job_runs_partition_slot_idx
    ON {{schema}}.job_runs (job_name, partition_key, schedule_slot);

-- One row per attempt: the audit trail. Rows are only ever added or
-- finished; they go with their job_runs row when Prune deletes it (ON
-- DELETE CASCADE).
CREATE TABLE IF NOT EXISTS {{schema}}.job_run_attempts (
    job_run_id   bigint      NOT NULL REFERENCES {{schema}}.job_runs (id) ON DELETE CASCADE,
    attempt      int         NOT NULL CHECK (attempt >= 1),
    owner        text        NOT NULL,
    fence_token  bigint      NOT NULL CHECK (fence_token > 0),
    status       text        NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'abandoned')),
    error_class  text        NOT NULL DEFAULT '',
    error        text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    finished_at  timestamptz,
    UNIQUE (job_run_id, attempt)
);

-- One row per paused or once-paused job; no row means running.
CREATE TABLE IF NOT EXISTS {{schema}}.job_pauses (
    job_name   text        PRIMARY KEY,
    paused     boolean     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
