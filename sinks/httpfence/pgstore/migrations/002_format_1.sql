-- 002_format_1.sql: mark the tables as stored format 1 of sinks/httpfence/pgstore
-- (docs/compatibility.md). The comment is holdfast's: the store checks it
-- on first use and refuses any other (fence.ErrUnknownFormat).
COMMENT ON TABLE {{schema}}.idempotency_keys IS 'holdfast sinks/httpfence/pgstore format 1';
