-- filter[search] reads a trigram index instead of every finding of the
-- tenant, and GET /findings/latest reads only the findings of each
-- provider's latest scan (docs/decisions/0012-search-index-and-latest-view.md).
--
-- findings_search is an FTS5 table with the trigram tokenizer over the four
-- searched columns. It keeps no copy of the text (content=findings): it
-- indexes the findings row of the same rowid, and the triggers below keep it
-- in step inside the transaction that writes the finding. case_sensitive 0
-- folds case, so a lookup finds every row LIKE would match (and a few more,
-- since it folds non-ASCII letters too); the store tests each candidate with
-- the LIKE it always used, so what a search means does not change. A phrase
-- of trigrams never spans two columns, as a substring of one of them must
-- not either.
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
    tokenize = 'trigram case_sensitive 0', detail = 'none'
);
INSERT INTO findings_search (findings_search) VALUES ('rebuild');

-- +goose StatementBegin
CREATE TRIGGER findings_search_insert AFTER INSERT ON findings BEGIN
    INSERT INTO findings_search (rowid, uid, title, check_id, resource_uid)
    VALUES (new.rowid, new.uid, new.title, new.check_id, new.resource_uid);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER findings_search_delete AFTER DELETE ON findings BEGIN
    INSERT INTO findings_search (findings_search, rowid, uid, title, check_id, resource_uid)
    VALUES ('delete', old.rowid, old.uid, old.title, old.check_id, old.resource_uid);
END;
-- +goose StatementEnd
-- +goose StatementBegin
-- A re-ingested finding whose text did not change (the usual re-scan)
-- costs the index nothing.
CREATE TRIGGER findings_search_update AFTER UPDATE OF uid, title, check_id, resource_uid ON findings
WHEN old.uid IS NOT new.uid OR old.title IS NOT new.title OR old.check_id IS NOT new.check_id
    OR old.resource_uid IS NOT new.resource_uid
BEGIN
    INSERT INTO findings_search (findings_search, rowid, uid, title, check_id, resource_uid)
    VALUES ('delete', old.rowid, old.uid, old.title, old.check_id, old.resource_uid);
    INSERT INTO findings_search (rowid, uid, title, check_id, resource_uid)
    VALUES (new.rowid, new.uid, new.title, new.check_id, new.resource_uid);
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
DROP TRIGGER findings_search_update;
DROP TRIGGER findings_search_delete;
DROP TRIGGER findings_search_insert;
DROP TABLE findings_search;
