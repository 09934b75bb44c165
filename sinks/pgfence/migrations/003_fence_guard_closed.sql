-- 003_fence_guard_closed.sql: the closed slot scopes of the guard.
--
-- {{closed}} stands for the quoted name "<table>_closed". One row per
-- (resource, unit) for which slot scopes ("<unit>@<unix seconds>",
-- fence.SplitSlotScope) were ever written or pruned: closed_before is the
-- watermark PruneSlotScopes raised (unix seconds, NULL while none), below
-- which every slot scope of unit is closed for resource, its guard rows
-- deleted. A row is only ever raised, never lowered or deleted by pgfence.
--
-- Every slot-scoped Check creates the row when missing and takes a FOR
-- SHARE lock on it before it reads or raises its guard row; PruneSlotScopes
-- raises it (a FOR UPDATE lock: it waits for every such Check to end) before
-- it deletes guard rows. So no Check can pass a watermark it did not see
-- (sinks/pgfence doc.go, "Pruning slot scopes").
CREATE TABLE IF NOT EXISTS {{schema}}.{{closed}} (
    resource      text        NOT NULL,
    unit          text        NOT NULL,
    closed_before bigint,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource, unit)
);
