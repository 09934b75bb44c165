-- The stored format (docs/compatibility.md). The
-- comment of {{schema}}.leases names the format of every table of
-- lease/pglease; a table marked with another one (a newer build's, another
-- store's) is refused before any migration touches it, with SQLSTATE
-- HF001 and the comment found as DETAIL. A missing table or one with no
-- comment passes: the last migration file marks it. It runs first.
DO $$
DECLARE
    found text := obj_description(to_regclass('{{schema}}.leases'), 'pg_class');
BEGIN
    IF found IS NOT NULL AND found <> 'holdfast lease/pglease format 1' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'HF001',
            MESSAGE = 'holdfast lease/pglease: {{schema}}.leases holds another stored format',
            DETAIL = found;
    END IF;
END
$$;

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
