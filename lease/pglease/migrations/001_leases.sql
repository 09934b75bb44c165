-- The stored format (docs/compatibility.md). The
-- comment of {{schema}}.leases names the format of every table of
-- lease/pglease; a table marked with another one (a newer build's, another
-- store's) is refused before any migration touches it, with SQLSTATE
-- HF001 and the comment found as DETAIL. A missing table or one with no
-- comment passes: the last migration file marks it. It runs first; the
-- directive line below stands for the statement (formatver.MigrationCheck),
-- written out by Migrate and Migrations.
-- holdfast:format-check lease/pglease {{schema}}.leases

-- The lease table of lease/pglease: one row per lease name, never deleted,
-- so its token only grows. A free lease has owner '' and expires_at
-- '-infinity'; a held one expires at expires_at on the database clock.
CREATE SCHEMA IF NOT EXISTS {{schema}};

CREATE TABLE IF NOT EXISTS {{schema}}.leases (
	name       text        PRIMARY KEY,
	owner      text        NOT NULL,
	token      bigint      NOT NULL CHECK (token > 0),
	expires_at timestamptz NOT NULL
);
