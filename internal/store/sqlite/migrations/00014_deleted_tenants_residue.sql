-- Deleting a tenant's data used to leave rows derived from its findings:
-- the finding summaries' groups, counting zero, and its latest scans,
-- which name accounts and scans. DeleteTenantData now deletes them
-- (engine.TenantTables); this removes what earlier deletions left. A
-- group counting zero says nothing (reads keep groups whose sum is
-- positive), and a latest scan without its scan row is left only by a
-- tenant's deletion: an ingestion's deletion keeps its scans.

-- +goose Up
DELETE FROM finding_counts WHERE n = 0;
DELETE FROM scan_finding_counts WHERE n = 0;
DELETE FROM latest_scans WHERE NOT EXISTS (SELECT 1 FROM scans s WHERE s.tenant = latest_scans.tenant AND s.id = latest_scans.scan_id);

-- +goose Down
SELECT 1;
