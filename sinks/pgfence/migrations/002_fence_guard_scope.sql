-- 002_fence_guard_scope.sql: the guard keeps one fence per (resource, scope).
--
-- A token is only comparable with tokens of the same lease, so the guard's
-- key becomes (resource, scope), scope being the lease name the token was
-- issued for (fence.Holder.Scope). Rows written before this migration get
-- scope '' (the scope of a holder that names none). Idempotent like every
-- file here: the column is added if missing, and the one-column primary key
-- of 001 is replaced only while it is still in place.
--
-- Both steps look in the catalogs first and run ALTER TABLE only when there
-- is something to do. ALTER TABLE takes an ACCESS EXCLUSIVE lock even when
-- ADD COLUMN IF NOT EXISTS finds the column there, and that lock waits for
-- every open transaction holding a guard row; while it waits, every new
-- Check queues behind it. Migrate runs at every replica's start, so the
-- lock is taken once, by the run that upgrades the table, and never again.

DO $$
DECLARE
    guard regclass := '{{schema}}.{{table}}'::regclass;
    pk name;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = guard AND attname = 'scope' AND NOT attisdropped) THEN
        EXECUTE format('ALTER TABLE %s ADD COLUMN scope text NOT NULL DEFAULT %L', guard, '');
    END IF;

    SELECT c.conname INTO pk
      FROM pg_constraint c
     WHERE c.conrelid = guard
       AND c.contype = 'p'
       AND cardinality(c.conkey) = 1;
    IF pk IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I, ADD PRIMARY KEY (resource, scope)', guard, pk);
    END IF;
END
$$;
