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
