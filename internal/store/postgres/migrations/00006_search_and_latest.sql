-- filter[search] reads a trigram index instead of every finding of the
-- tenant, and GET /findings/latest reads only the findings of each
-- provider's latest scan (docs/decisions/0012-search-index-and-latest-view.md).
--
-- findings_search is a GIN index of pg_trgm trigrams over the four searched
-- columns. The search stays four ILIKE conditions joined by OR; the planner
-- answers each from the index (a BitmapOr) and rechecks the rows it finds
-- with ILIKE itself, so what a search means does not change. pg_trgm ships
-- with PostgreSQL (contrib) and is a trusted extension: the database's owner
-- may create it without being a superuser. GIN's pending list (fastupdate,
-- on by default) batches the index's updates, which keeps ingestion fast.
--
-- latest_scans holds, per tenant and provider, the scan written by the
-- ingestion that completed last; FinishRun replaces it in the transaction
-- that records a successful outcome. scans_ingestion finds the scans an
-- ingestion wrote.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX findings_search ON findings USING gin (
    uid gin_trgm_ops, title gin_trgm_ops, check_id gin_trgm_ops, resource_uid gin_trgm_ops);

CREATE TABLE latest_scans (
    tenant        text        COLLATE "C" NOT NULL,
    provider_type text        COLLATE "C" NOT NULL,
    provider_uid  text        COLLATE "C" NOT NULL,
    scan_id       text        COLLATE "C" NOT NULL,
    ingestion_id  text        COLLATE "C" NOT NULL,
    completed_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, provider_type, provider_uid)
);
CREATE INDEX scans_ingestion ON scans (tenant, ingestion_id);

-- Existing data: per provider, the scan last written by the ingestion that
-- completed last (ties: the later scan, then the greater id).
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at)
SELECT DISTINCT ON (s.tenant, s.provider_type, s.provider_uid)
    s.tenant, s.provider_type, s.provider_uid, s.id, s.ingestion_id, r.finished_at
FROM scans s JOIN runs r ON r.tenant = s.tenant AND r.ingestion_id = s.ingestion_id
WHERE r.status = 'succeeded'
ORDER BY s.tenant, s.provider_type, s.provider_uid, r.finished_at DESC, s.inserted_at DESC, s.id DESC;

-- +goose Down
DROP INDEX scans_ingestion;
DROP TABLE latest_scans;
DROP INDEX findings_search;
