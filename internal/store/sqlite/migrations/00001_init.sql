-- Timestamps are INTEGER microseconds since the Unix epoch (UTC): they sort
-- and compare as numbers and keep the precision PostgreSQL keeps.

-- +goose Up
CREATE TABLE blobs (
    id         TEXT    PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    size       INTEGER NOT NULL DEFAULT 0,
    sha256     TEXT    NOT NULL DEFAULT '',
    chunks     INTEGER NOT NULL DEFAULT 0,
    -- Chunks are written in short transactions so an upload never holds the
    -- single write lock; readers only see a blob once it is complete.
    complete   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
CREATE INDEX blobs_tenant ON blobs (tenant);
CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE complete = 0;

CREATE TABLE blob_chunks (
    blob_id TEXT    NOT NULL REFERENCES blobs (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    data    BLOB    NOT NULL,
    PRIMARY KEY (blob_id, seq)
) WITHOUT ROWID;

CREATE TABLE runs (
    tenant       TEXT    NOT NULL,
    ingestion_id TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    total        INTEGER NOT NULL DEFAULT 0,
    processed    INTEGER NOT NULL DEFAULT 0,
    invalid      INTEGER NOT NULL DEFAULT 0,
    message      TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    PRIMARY KEY (tenant, ingestion_id)
);

CREATE TABLE ingestion_errors (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant       TEXT    NOT NULL,
    ingestion_id TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    record_index INTEGER,
    finding_uid  TEXT    NOT NULL DEFAULT '',
    code         TEXT    NOT NULL,
    detail       TEXT    NOT NULL DEFAULT '',
    pointer      TEXT    NOT NULL DEFAULT '',
    value        TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX ingestion_errors_list ON ingestion_errors (tenant, ingestion_id, record_index, id);

CREATE TABLE scans (
    tenant        TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    provider_type TEXT    NOT NULL DEFAULT '',
    provider_uid  TEXT    NOT NULL DEFAULT '',
    scan_trigger  TEXT    NOT NULL DEFAULT '',
    ingestion_id  TEXT    NOT NULL DEFAULT '',
    inserted_at   INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX scans_provider ON scans (tenant, provider_type, provider_uid);
CREATE INDEX scans_inserted ON scans (tenant, inserted_at DESC, id);

CREATE TABLE findings (
    id            TEXT    PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    scan_id       TEXT    NOT NULL,
    uid           TEXT    NOT NULL,
    ingestion_id  TEXT    NOT NULL,
    check_id      TEXT    NOT NULL DEFAULT '',
    title         TEXT    NOT NULL DEFAULT '',
    severity      TEXT    NOT NULL DEFAULT '',
    severity_id   INTEGER NOT NULL DEFAULT 0,
    status_code   TEXT    NOT NULL DEFAULT '',
    status        TEXT    NOT NULL DEFAULT '',
    region        TEXT    NOT NULL DEFAULT '',
    provider_type TEXT    NOT NULL DEFAULT '',
    provider_uid  TEXT    NOT NULL DEFAULT '',
    resource_uid  TEXT    NOT NULL DEFAULT '',
    event_time    INTEGER NOT NULL,
    -- The record exactly as uploaded (a BLOB so no byte is re-encoded).
    raw           BLOB    NOT NULL,
    inserted_at   INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (tenant, scan_id, uid)
);
-- The unique key above also serves the scan filter and per-scan counts.
CREATE INDEX findings_default_order ON findings (tenant, severity_id DESC, uid);
CREATE INDEX findings_status_code ON findings (tenant, status_code);
CREATE INDEX findings_provider ON findings (tenant, provider_type, provider_uid);
CREATE INDEX findings_check ON findings (tenant, check_id);
CREATE INDEX findings_ingestion ON findings (tenant, ingestion_id);
CREATE INDEX findings_time ON findings (tenant, event_time);
CREATE INDEX findings_inserted ON findings (tenant, inserted_at);

-- +goose Down
DROP TABLE findings;
DROP TABLE scans;
DROP TABLE ingestion_errors;
DROP TABLE runs;
DROP TABLE blob_chunks;
DROP TABLE blobs;
