-- finding_counts is the finding summary: per tenant, the number of findings
-- of each combination of the grouping dimensions (GET /findings/counts'
-- group_by, which are also the summary filters). Counts and the
-- pagination count of a listing filtered on these columns alone read it,
-- so they cost the number of groups rather than the number of findings.
--
-- The triggers keep it exact: they run inside the statement that inserts,
-- rewrites or deletes a finding, so the summary commits or rolls back with
-- it. A rewrite that leaves every dimension as it was (re-ingesting the same
-- report; giving findings back after a failed ingestion, which changes only
-- ingestion_id) does not touch it. A group whose findings all went
-- elsewhere keeps a row at 0 that reads skip: the table never holds more
-- rows than combinations ever seen.
--
-- The version leaves a gap for concurrent work on the schema; the store
-- applies missing versions out of order (each is independent of the
-- others).

-- +goose Up
CREATE TABLE finding_counts (
    tenant        TEXT    NOT NULL,
    status_code   TEXT    NOT NULL,
    provider_type TEXT    NOT NULL,
    provider_uid  TEXT    NOT NULL,
    severity      TEXT    NOT NULL,
    region        TEXT    NOT NULL,
    check_id      TEXT    NOT NULL,
    n             INTEGER NOT NULL,
    PRIMARY KEY (tenant, status_code, provider_type, provider_uid, severity, region, check_id)
) WITHOUT ROWID;

INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id;

-- +goose StatementBegin
CREATE TRIGGER finding_counts_insert AFTER INSERT ON findings
BEGIN
    INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
    VALUES (NEW.tenant, NEW.status_code, NEW.provider_type, NEW.provider_uid, NEW.severity, NEW.region, NEW.check_id, 1)
    ON CONFLICT (tenant, status_code, provider_type, provider_uid, severity, region, check_id) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER finding_counts_update
AFTER UPDATE OF tenant, status_code, provider_type, provider_uid, severity, region, check_id ON findings
WHEN OLD.tenant IS NOT NEW.tenant OR OLD.status_code IS NOT NEW.status_code
    OR OLD.provider_type IS NOT NEW.provider_type OR OLD.provider_uid IS NOT NEW.provider_uid
    OR OLD.severity IS NOT NEW.severity OR OLD.region IS NOT NEW.region OR OLD.check_id IS NOT NEW.check_id
BEGIN
    UPDATE finding_counts SET n = n - 1
    WHERE tenant = OLD.tenant AND status_code = OLD.status_code AND provider_type = OLD.provider_type
        AND provider_uid = OLD.provider_uid AND severity = OLD.severity AND region = OLD.region
        AND check_id = OLD.check_id;
    INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
    VALUES (NEW.tenant, NEW.status_code, NEW.provider_type, NEW.provider_uid, NEW.severity, NEW.region, NEW.check_id, 1)
    ON CONFLICT (tenant, status_code, provider_type, provider_uid, severity, region, check_id) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER finding_counts_delete AFTER DELETE ON findings
BEGIN
    UPDATE finding_counts SET n = n - 1
    WHERE tenant = OLD.tenant AND status_code = OLD.status_code AND provider_type = OLD.provider_type
        AND provider_uid = OLD.provider_uid AND severity = OLD.severity AND region = OLD.region
        AND check_id = OLD.check_id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER finding_counts_delete;
DROP TRIGGER finding_counts_update;
DROP TRIGGER finding_counts_insert;
DROP TABLE finding_counts;
