-- Every documented read of findings is served by an index (the query plan
-- tests in internal_test.go hold this):
--
-- * region joins findings_facets (before check_id, as
--   docs/decisions/0002-findings-facets-index.md asks of a new
--   low-cardinality column), so grouped counts by any of its columns
--   (GET /findings/counts) are an index-only scan.
-- * sort=check_id and sort=uid walk an index in order instead of sorting
--   every matching row; uid is the tie-breaker of every sort, so the check
--   index carries it.
--
-- Ingestion maintains two more indexes per finding (nine with the primary
-- and natural keys); docs/performance.md has the write benchmark before and
-- after. The index builds lock writes to findings while they run: seconds
-- per million findings.

-- +goose Up
CREATE INDEX findings_facets_region ON findings (tenant, status_code, provider_type, provider_uid, severity, region, check_id);
DROP INDEX findings_facets;
ALTER INDEX findings_facets_region RENAME TO findings_facets;
CREATE INDEX findings_check_order ON findings (tenant, check_id, uid);
CREATE INDEX findings_uid ON findings (tenant, uid);

-- +goose Down
DROP INDEX findings_uid;
DROP INDEX findings_check_order;
CREATE INDEX findings_facets_old ON findings (tenant, status_code, provider_type, provider_uid, severity, check_id);
DROP INDEX findings_facets;
ALTER INDEX findings_facets_old RENAME TO findings_facets;
