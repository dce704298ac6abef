-- touched_at is when an unfinished upload last wrote a chunk (refreshed at
-- most once a minute), so the periodic sweep removes uploads that stopped
-- making progress, not slow ones that are still running.
--
-- prev_ingestion_id is the ingestion a finding was attributed to before the
-- ingestion now in ingestion_id rewrote it. Should that ingestion fail, the
-- finding goes back to prev_ingestion_id: a failed ingestion never takes
-- over findings it only rewrote (docs/decisions/0005-finding-ingestion-attribution.md).

-- +goose Up
ALTER TABLE blobs ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0;
UPDATE blobs SET touched_at = created_at;
CREATE INDEX blobs_stale ON blobs (touched_at) WHERE complete = 0;
DROP INDEX blobs_incomplete;

ALTER TABLE findings ADD COLUMN prev_ingestion_id TEXT;

-- +goose Down
ALTER TABLE findings DROP COLUMN prev_ingestion_id;
CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE complete = 0;
DROP INDEX blobs_stale;
ALTER TABLE blobs DROP COLUMN touched_at;
