-- Deep numbered pages, and a scan's or a check's findings in insertion
-- order (docs/decisions/0015-deep-numbered-pages.md):
--
-- * findings_time and findings_inserted end in uid, as the other sort
--   indexes do, so that every sort index gives its order up to id. A
--   numbered page then skips its offset over the index's entries alone
--   (an index-only scan) and seeks the page's first finding by (key,
--   uid), and a cursor or a page in the middle of a batch (whose findings
--   share inserted_at) no longer sorts the batch by uid.
-- * findings_scan carries inserted_at, so filter[scan] in the API's
--   default order (newest first) reads the scan's findings in order. With
--   (tenant, scan_id) alone the planner walked findings_inserted backwards
--   over the whole tenant, testing each finding for the scan, which for
--   an old scan is every finding written since (22.6 s at 10M findings).
--   Since findings_inserted now gives that order up to uid, the store
--   leaves uid out of the indexes' reach for these filters (see
--   engine.ownInsertionOrder), or the planner would walk it again.
-- * findings_check_inserted does the same for filter[check_id], whose
--   findings were read from findings_check_order and sorted.
--
-- The index builds lock writes to findings while they run: seconds per
-- million findings.

-- +goose Up
DROP INDEX findings_time;
CREATE INDEX findings_time ON findings (tenant, event_time, uid);
DROP INDEX findings_inserted;
CREATE INDEX findings_inserted ON findings (tenant, inserted_at, uid);
DROP INDEX findings_scan;
CREATE INDEX findings_scan ON findings (tenant, scan_id, inserted_at);
CREATE INDEX findings_check_inserted ON findings (tenant, check_id, inserted_at);

-- +goose Down
DROP INDEX findings_check_inserted;
DROP INDEX findings_scan;
CREATE INDEX findings_scan ON findings (tenant, scan_id);
DROP INDEX findings_inserted;
CREATE INDEX findings_inserted ON findings (tenant, inserted_at);
DROP INDEX findings_time;
CREATE INDEX findings_time ON findings (tenant, event_time);
