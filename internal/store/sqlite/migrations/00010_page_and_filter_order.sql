-- Deep numbered pages and a check's findings in insertion order
-- (docs/decisions/0015-deep-numbered-pages.md):
--
-- * findings_time and findings_inserted end in uid, as the other sort
--   indexes do, so that every sort index gives its order up to id. A
--   numbered page then skips its offset over the index's entries alone
--   and seeks the page's first finding by (key, uid), and a cursor or a
--   page in the middle of a batch (whose findings share inserted_at) no
--   longer sorts the batch by uid.
-- * findings_check_inserted reads a check's findings newest first
--   (filter[check_id] in the API's default order) instead of sorting
--   every finding of the check.
--
-- Dropping an index drops its statistics, and a new one has none, so they
-- are written (see 00004): a batch of a few thousand findings shares an
-- insertion time, about ten an event time, and a check's findings are
-- spread over its batches.

-- +goose Up
DROP INDEX findings_time;
CREATE INDEX findings_time ON findings (tenant, event_time, uid);
DROP INDEX findings_inserted;
CREATE INDEX findings_inserted ON findings (tenant, inserted_at, uid);
CREATE INDEX findings_check_inserted ON findings (tenant, check_id, inserted_at);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx IN ('findings_time', 'findings_inserted', 'findings_check_inserted');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('findings', 'findings_time', '1000000 100000 10 1'),
    ('findings', 'findings_inserted', '1000000 100000 2000 1'),
    ('findings', 'findings_check_inserted', '1000000 100000 200 10');

-- +goose Down
DROP INDEX findings_check_inserted;
DROP INDEX findings_inserted;
CREATE INDEX findings_inserted ON findings (tenant, inserted_at);
DROP INDEX findings_time;
CREATE INDEX findings_time ON findings (tenant, event_time);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx IN ('findings_time', 'findings_inserted', 'findings_check_inserted');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('findings', 'findings_time', '1000000 100000 10'),
    ('findings', 'findings_inserted', '1000000 100000 2000');
