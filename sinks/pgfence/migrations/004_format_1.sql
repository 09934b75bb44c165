-- 004_format_1.sql: mark the tables as stored format 1 of sinks/pgfence
-- (docs/compatibility.md). The comment is holdfast's: the store checks it
-- on first use and refuses any other (fence.ErrUnknownFormat).
COMMENT ON TABLE {{schema}}.{{table}} IS 'holdfast sinks/pgfence format 1';
