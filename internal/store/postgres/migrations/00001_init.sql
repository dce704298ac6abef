-- Identifier columns use the "C" collation: byte order is what the SQLite
-- engine sorts by, it does not depend on the server's locale, and it makes
-- the b-tree comparisons cheaper.

-- +goose Up
CREATE TABLE blobs (
    id         uuid        PRIMARY KEY,
    tenant     text        COLLATE "C" NOT NULL,
    size       bigint      NOT NULL DEFAULT 0,
    sha256     text        NOT NULL DEFAULT '',
    chunks     integer     NOT NULL DEFAULT 0,
    -- Chunks are written in short transactions so an upload never holds a
    -- long transaction open; readers only see a blob once it is complete.
    complete   boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL
);
CREATE INDEX blobs_tenant ON blobs (tenant);
CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE NOT complete;

CREATE TABLE blob_chunks (
    blob_id uuid    NOT NULL REFERENCES blobs (id) ON DELETE CASCADE,
    seq     integer NOT NULL,
    data    bytea   NOT NULL,
    PRIMARY KEY (blob_id, seq)
);

CREATE TABLE runs (
    tenant       text        COLLATE "C" NOT NULL,
    ingestion_id text        COLLATE "C" NOT NULL,
    attempt      integer     NOT NULL,
    status       text        NOT NULL,
    total        integer     NOT NULL DEFAULT 0,
    processed    integer     NOT NULL DEFAULT 0,
    invalid      integer     NOT NULL DEFAULT 0,
    message      text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    PRIMARY KEY (tenant, ingestion_id)
);

CREATE TABLE ingestion_errors (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant       text    COLLATE "C" NOT NULL,
    ingestion_id text    COLLATE "C" NOT NULL,
    attempt      integer NOT NULL,
    record_index integer,
    finding_uid  text    NOT NULL DEFAULT '',
    code         text    NOT NULL,
    detail       text    NOT NULL DEFAULT '',
    pointer      text    NOT NULL DEFAULT '',
    value        text    NOT NULL DEFAULT ''
);
CREATE INDEX ingestion_errors_list ON ingestion_errors (tenant, ingestion_id, record_index NULLS FIRST, id);

CREATE TABLE scans (
    tenant        text        COLLATE "C" NOT NULL,
    id            text        COLLATE "C" NOT NULL,
    provider_type text        COLLATE "C" NOT NULL DEFAULT '',
    provider_uid  text        COLLATE "C" NOT NULL DEFAULT '',
    scan_trigger  text        NOT NULL DEFAULT '',
    ingestion_id  text        COLLATE "C" NOT NULL DEFAULT '',
    inserted_at   timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX scans_provider ON scans (tenant, provider_type, provider_uid);
CREATE INDEX scans_inserted ON scans (tenant, inserted_at DESC, id);

CREATE TABLE findings (
    id            uuid        PRIMARY KEY,
    tenant        text        COLLATE "C" NOT NULL,
    scan_id       text        COLLATE "C" NOT NULL,
    uid           text        COLLATE "C" NOT NULL,
    ingestion_id  text        COLLATE "C" NOT NULL,
    check_id      text        COLLATE "C" NOT NULL DEFAULT '',
    title         text        NOT NULL DEFAULT '',
    severity      text        COLLATE "C" NOT NULL DEFAULT '',
    severity_id   integer     NOT NULL DEFAULT 0,
    status_code   text        COLLATE "C" NOT NULL DEFAULT '',
    status        text        NOT NULL DEFAULT '',
    region        text        COLLATE "C" NOT NULL DEFAULT '',
    provider_type text        COLLATE "C" NOT NULL DEFAULT '',
    provider_uid  text        COLLATE "C" NOT NULL DEFAULT '',
    resource_uid  text        COLLATE "C" NOT NULL DEFAULT '',
    event_time    timestamptz NOT NULL,
    -- The record exactly as uploaded: bytea, because jsonb would re-encode it.
    raw           bytea       NOT NULL,
    inserted_at   timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    CONSTRAINT findings_natural_key UNIQUE (tenant, scan_id, uid)
);
-- The natural key also serves the scan filter and per-scan counts.
CREATE INDEX findings_default_order ON findings (tenant, severity_id DESC, uid);
CREATE INDEX findings_status_code ON findings (tenant, status_code);
CREATE INDEX findings_provider ON findings (tenant, provider_type, provider_uid);
CREATE INDEX findings_check ON findings (tenant, check_id);
CREATE INDEX findings_ingestion ON findings (tenant, ingestion_id);
CREATE INDEX findings_time ON findings (tenant, event_time);
CREATE INDEX findings_inserted ON findings (tenant, inserted_at);

-- lz4 compresses several times faster than the default pglz, which is most
-- of the server's work when ingesting ~3 KB records; servers built without
-- lz4 keep pglz.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE 'ALTER TABLE findings ALTER COLUMN raw SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE blob_chunks ALTER COLUMN data SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE findings;
DROP TABLE scans;
DROP TABLE ingestion_errors;
DROP TABLE runs;
DROP TABLE blob_chunks;
DROP TABLE blobs;
