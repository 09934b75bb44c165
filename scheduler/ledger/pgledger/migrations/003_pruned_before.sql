-- The latest cutoff Prune used on each pair (ledger.State.Pruned): the
-- records of done slots before it may be gone, so a plan that looks behind
-- the pair's last slot (a found reset's gap) leaves those slots alone.
-- NULL until the first Prune.
ALTER TABLE {{schema}}.job_fences ADD COLUMN IF NOT EXISTS pruned_before timestamptz;
