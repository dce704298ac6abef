-- scan_finding_counts is the finding summary by scan: per tenant and scan,
-- the number of findings of each combination of the grouping dimensions.
-- Counts of the latest view (the latest scans' findings) and of one scan
-- read it, so they cost the groups of those scans rather than their
-- findings (docs/decisions/0018-finding-summary-by-scan.md). Its triggers
-- are finding_counts' (00006) with the scan added. It depends on findings
-- alone: reads join it with latest_scans.

-- +goose Up
CREATE TABLE scan_finding_counts (
    tenant        TEXT    NOT NULL,
    scan_id       TEXT    NOT NULL,
    status_code   TEXT    NOT NULL,
    provider_type TEXT    NOT NULL,
    provider_uid  TEXT    NOT NULL,
    severity      TEXT    NOT NULL,
    region        TEXT    NOT NULL,
    check_id      TEXT    NOT NULL,
    n             INTEGER NOT NULL,
    PRIMARY KEY (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id)
) WITHOUT ROWID;

INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id;

-- +goose StatementBegin
CREATE TRIGGER scan_finding_counts_insert AFTER INSERT ON findings
BEGIN
    INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
    VALUES (NEW.tenant, NEW.scan_id, NEW.status_code, NEW.provider_type, NEW.provider_uid, NEW.severity, NEW.region, NEW.check_id, 1)
    ON CONFLICT (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER scan_finding_counts_update
AFTER UPDATE OF tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id ON findings
WHEN OLD.tenant IS NOT NEW.tenant OR OLD.scan_id IS NOT NEW.scan_id OR OLD.status_code IS NOT NEW.status_code
    OR OLD.provider_type IS NOT NEW.provider_type OR OLD.provider_uid IS NOT NEW.provider_uid
    OR OLD.severity IS NOT NEW.severity OR OLD.region IS NOT NEW.region OR OLD.check_id IS NOT NEW.check_id
BEGIN
    UPDATE scan_finding_counts SET n = n - 1
    WHERE tenant = OLD.tenant AND scan_id = OLD.scan_id AND status_code = OLD.status_code AND provider_type = OLD.provider_type
        AND provider_uid = OLD.provider_uid AND severity = OLD.severity AND region = OLD.region
        AND check_id = OLD.check_id;
    INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
    VALUES (NEW.tenant, NEW.scan_id, NEW.status_code, NEW.provider_type, NEW.provider_uid, NEW.severity, NEW.region, NEW.check_id, 1)
    ON CONFLICT (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER scan_finding_counts_delete AFTER DELETE ON findings
BEGIN
    UPDATE scan_finding_counts SET n = n - 1
    WHERE tenant = OLD.tenant AND scan_id = OLD.scan_id AND status_code = OLD.status_code AND provider_type = OLD.provider_type
        AND provider_uid = OLD.provider_uid AND severity = OLD.severity AND region = OLD.region
        AND check_id = OLD.check_id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER scan_finding_counts_delete;
DROP TRIGGER scan_finding_counts_update;
DROP TRIGGER scan_finding_counts_insert;
DROP TABLE scan_finding_counts;
