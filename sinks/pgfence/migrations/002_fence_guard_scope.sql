-- 002_fence_guard_scope.sql: the guard keeps one fence per (resource, scope).
--
-- A token is only comparable with tokens of the same lease, so the guard's
-- key becomes (resource, scope), scope being the lease name the token was
-- issued for (fence.Holder.Scope). Rows written before this migration get
-- scope '' (the scope of a holder that names none). Idempotent like every
-- file here: the column is added if missing, and the one-column primary key
-- of 001 is replaced only while it is still in place.

ALTER TABLE {{schema}}.{{table}} ADD COLUMN IF NOT EXISTS scope text NOT NULL DEFAULT '';

DO $$
DECLARE
    pk name;
BEGIN
    SELECT c.conname INTO pk
      FROM pg_constraint c
     WHERE c.conrelid = '{{schema}}.{{table}}'::regclass
       AND c.contype = 'p'
       AND cardinality(c.conkey) = 1;
    IF pk IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I, ADD PRIMARY KEY (resource, scope)',
                       '{{schema}}.{{table}}'::regclass, pk);
    END IF;
END
$$;
