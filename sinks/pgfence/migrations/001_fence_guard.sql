-- The stored format (docs/compatibility.md). The
-- comment of {{schema}}.{{table}} names the format of every table of
-- sinks/pgfence; a table marked with another one (a newer build's, another
-- store's) is refused before any migration touches it, with SQLSTATE
-- HF001 and the comment found as DETAIL. A missing table or one with no
-- comment passes: the last migration file marks it. It runs first; the
-- directive line below stands for the statement (formatver.MigrationCheck),
-- written out by Migrate and Migrations.
-- holdfast:format-check sinks/pgfence {{schema}}.{{table}}

-- 001_fence_guard.sql: the guard table of package pgfence.
--
-- {{schema}} and {{table}} stand for the quoted identifiers from Config.
-- Migrate runs every file in name order, in one transaction, after taking
-- an advisory lock for the schema. Every statement must be idempotent: there
-- is no version table, a file runs again on every Migrate.

CREATE SCHEMA IF NOT EXISTS {{schema}};

-- One row per resource (per (resource, scope) from 002 on): the highest
-- token accepted for it and the owner that presented it. A row is only ever
-- raised, never lowered or deleted by pgfence.
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}} (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL CHECK (token > 0),
    owner      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
