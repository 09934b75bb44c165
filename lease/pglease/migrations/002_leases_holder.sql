-- The holder label (pglease.Options.Holder, the replica's name) of the row's
-- last acquisition, shown by views in place of the owner, which is a write
-- capability. '' when it had none.
ALTER TABLE {{schema}}.leases ADD COLUMN IF NOT EXISTS holder text NOT NULL DEFAULT '';
