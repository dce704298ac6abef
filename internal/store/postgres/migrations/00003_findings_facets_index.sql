-- One narrow index serves the low-cardinality filters and the counts by
-- them, in place of three: (tenant, status_code), (tenant, provider_type,
-- provider_uid) and (tenant, check_id). A tenant's findings share few
-- combinations of these values, so b-tree deduplication keeps the index
-- small (8 MB for a million findings of the benchmark's data), and counting
-- by status, provider or severity, or finding a check's rows, stays about as
-- fast as with the separate indexes (severity, which had none, gets faster).
-- Ingestion maintains two indexes fewer per finding. Measurements:
-- docs/decisions/0002-findings-facets-index.md.

-- +goose Up
CREATE INDEX findings_facets ON findings (tenant, status_code, provider_type, provider_uid, severity, check_id);
DROP INDEX findings_status_code;
DROP INDEX findings_provider;
DROP INDEX findings_check;

-- +goose Down
CREATE INDEX findings_status_code ON findings (tenant, status_code);
CREATE INDEX findings_provider ON findings (tenant, provider_type, provider_uid);
CREATE INDEX findings_check ON findings (tenant, check_id);
DROP INDEX findings_facets;
