-- A finding's id is derived from its natural key (store.FindingID hashes
-- tenant, scan id and uid), so the primary key already makes the natural key
-- unique. The separate UNIQUE (tenant, scan_id, uid) index was the most
-- expensive one to maintain on ingestion: every insert compared long,
-- prefix-sharing uids to check uniqueness. Upserts now resolve conflicts on
-- id, and a narrow (tenant, scan_id) index, which b-tree deduplication keeps
-- small, serves the scan filter and the per-scan counts.

-- +goose Up
CREATE INDEX findings_scan ON findings (tenant, scan_id);
ALTER TABLE findings DROP CONSTRAINT findings_natural_key;

-- +goose Down
ALTER TABLE findings ADD CONSTRAINT findings_natural_key UNIQUE (tenant, scan_id, uid);
DROP INDEX findings_scan;
