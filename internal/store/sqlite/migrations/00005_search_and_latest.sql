-- filter[search] reads a trigram index instead of every finding of the
-- tenant, and GET /findings/latest reads only the findings of each
-- provider's latest scan (docs/decisions/0012-search-index-and-latest-view.md).
--
-- findings_search is an FTS5 table with the trigram tokenizer over the four
-- searched columns. It keeps no copy of the text (content=findings): it
-- indexes the findings row of the same rowid. case_sensitive 0 folds case,
-- so a lookup finds every row LIKE would match (and a few more, since it
-- folds non-ASCII letters too); the store tests each candidate with the
-- LIKE it always used, so what a search means does not change. It keeps
-- neither positions (detail none) nor column sizes (columnsize 0): the
-- store needs only which rows hold a trigram, and each costs ingestion.
--
-- WriteBatch maintains it in the transaction that writes the findings, one
-- statement per batch, rather than a trigger per row: FTS5 writes its
-- pending entries to disk at every statement that follows a write to it,
-- so a trigger on the per-finding upsert made a segment per finding and
-- spent most of the ingestion merging them. A deletion (none is made today)
-- is kept in step by the trigger below, one statement for all rows.
--
-- findings has no INTEGER PRIMARY KEY, so its rowid is implicit. SQLite
-- keeps it through updates, upserts and incremental vacuum (what the store
-- runs); a hand-run full VACUUM may renumber rows, after which
--   INSERT INTO findings_search (findings_search) VALUES ('rebuild');
-- rebuilds the index from the findings.
--
-- latest_scans holds, per tenant and provider, the scan written by the
-- ingestion that completed last; FinishRun replaces it in the transaction
-- that records a successful outcome. scans_ingestion finds the scans an
-- ingestion wrote.

-- +goose Up
CREATE VIRTUAL TABLE findings_search USING fts5 (
    uid, title, check_id, resource_uid,
    content = 'findings', content_rowid = 'rowid',
    tokenize = 'trigram case_sensitive 0', detail = 'none', columnsize = 0
);
INSERT INTO findings_search (findings_search) VALUES ('rebuild');

-- +goose StatementBegin
CREATE TRIGGER findings_search_delete AFTER DELETE ON findings BEGIN
    INSERT INTO findings_search (findings_search, rowid, uid, title, check_id, resource_uid)
    VALUES ('delete', old.rowid, old.uid, old.title, old.check_id, old.resource_uid);
END;
-- +goose StatementEnd

CREATE TABLE latest_scans (
    tenant        TEXT    NOT NULL,
    provider_type TEXT    NOT NULL,
    provider_uid  TEXT    NOT NULL,
    scan_id       TEXT    NOT NULL,
    ingestion_id  TEXT    NOT NULL,
    completed_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, provider_type, provider_uid)
);
CREATE INDEX scans_ingestion ON scans (tenant, ingestion_id);

-- Existing data: per provider, the scan last written by the ingestion that
-- completed last (ties: the later scan, then the greater id).
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at)
SELECT tenant, provider_type, provider_uid, id, ingestion_id, finished_at FROM (
    SELECT s.tenant, s.provider_type, s.provider_uid, s.id, s.ingestion_id, r.finished_at,
        row_number() OVER (PARTITION BY s.tenant, s.provider_type, s.provider_uid
            ORDER BY r.finished_at DESC, s.inserted_at DESC, s.id DESC) AS n
    FROM scans s JOIN runs r ON r.tenant = s.tenant AND r.ingestion_id = s.ingestion_id
    WHERE r.status = 'succeeded'
) WHERE n = 1;

-- +goose Down
DROP INDEX scans_ingestion;
DROP TABLE latest_scans;
DROP TRIGGER findings_search_delete;
DROP TABLE findings_search;
