-- touched_at is when an unfinished upload last wrote a chunk (refreshed at
-- most once a minute), so the periodic sweep removes uploads that stopped
-- making progress, not slow ones that are still running.
--
-- prev_ingestion_id is the ingestion a finding was attributed to before the
-- ingestion now in ingestion_id rewrote it. Should that ingestion fail, the
-- finding goes back to prev_ingestion_id: a failed ingestion never takes
-- over findings it only rewrote (docs/decisions/0005-finding-ingestion-attribution.md).
-- A nullable column without a default is a catalog change only: no rewrite.

-- +goose Up
ALTER TABLE blobs ADD COLUMN touched_at timestamptz;
UPDATE blobs SET touched_at = created_at WHERE NOT complete;
CREATE INDEX blobs_stale ON blobs (touched_at) WHERE NOT complete;
DROP INDEX blobs_incomplete;

ALTER TABLE findings ADD COLUMN prev_ingestion_id text COLLATE "C";

-- +goose Down
ALTER TABLE findings DROP COLUMN prev_ingestion_id;
CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE NOT complete;
DROP INDEX blobs_stale;
ALTER TABLE blobs DROP COLUMN touched_at;
