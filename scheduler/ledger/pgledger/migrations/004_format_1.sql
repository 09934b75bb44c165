-- 004_format_1.sql: mark the tables as stored format 1 of scheduler/ledger/pgledger
-- (docs/compatibility.md). The comment is holdfast's: the store checks it
-- on first use and refuses any other (fence.ErrUnknownFormat).
COMMENT ON TABLE {{schema}}.job_runs IS 'holdfast scheduler/ledger/pgledger format 1';
