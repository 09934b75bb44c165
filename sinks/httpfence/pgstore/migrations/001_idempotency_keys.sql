-- The stored format (docs/compatibility.md). The
-- comment of {{schema}}.idempotency_keys names the format of every table of
-- sinks/httpfence/pgstore; a table marked with another one (a newer build's, another
-- store's) is refused before any migration touches it, with SQLSTATE
-- HF001 and the comment found as DETAIL. A missing table or one with no
-- comment passes: the last migration file marks it. It runs first; the
-- directive line below stands for the statement (formatver.MigrationCheck),
-- written out by Migrate and Migrations.
-- holdfast:format-check sinks/httpfence/pgstore {{schema}}.idempotency_keys

-- 001_idempotency_keys.sql: the idempotency record table of PostgresStore.
--
-- {{schema}} stands for the quoted schema identifier. Migrate runs every file
-- in name order, in one transaction, after taking the advisory lock that all
-- holdfast stores use for the schema. Every statement must be idempotent:
-- there is no version table, a file runs again on every Migrate.

CREATE SCHEMA IF NOT EXISTS {{schema}};

-- One row per idempotency key (already scoped by the middleware). In flight
-- while lock_id is set; completed once status is set. A row whose expires_at
-- has passed is dead: Begin takes it over, DeleteExpired removes it.
CREATE TABLE IF NOT EXISTS {{schema}}.idempotency_keys (
    key         text        PRIMARY KEY,
    fingerprint text        NOT NULL,
    lock_id     text,
    status      integer,
    header      jsonb,
    body        bytea,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CHECK ((lock_id IS NULL) = (status IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS idempotency_keys_expires_at
    ON {{schema}}.idempotency_keys (expires_at);
