-- 003_format_1.sql: mark the tables as stored format 1 of lease/pglease
-- (docs/compatibility.md). The comment is holdfast's: the store checks it
-- on first use and refuses any other (fence.ErrUnknownFormat).
COMMENT ON TABLE {{schema}}.leases IS 'holdfast lease/pglease format 1';
