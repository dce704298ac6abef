-- scan_finding_counts is the finding summary by scan: per tenant and scan,
-- the number of findings of each combination of the grouping dimensions.
-- Counts of the latest view (the latest scans' findings) and of one scan
-- read it, so they cost the groups of those scans rather than their
-- findings: the MCP overview reads the latest view by default, and a large
-- current state (250,000 findings) took 350 ms a count through the
-- findings (docs/decisions/0018-finding-summary-by-scan.md).
--
-- It is kept as finding_counts is (00007): statement-level triggers apply
-- one delta per group at the end of each statement that changes findings,
-- in key order, inside its transaction. It depends on findings alone, not
-- on which scans are the latest: reads join it with latest_scans, so an
-- ingestion that completes and one that writes into the latest scan never
-- have to agree on it.

-- +goose Up
CREATE TABLE scan_finding_counts (
    tenant        text   COLLATE "C" NOT NULL,
    scan_id       text   COLLATE "C" NOT NULL,
    status_code   text   COLLATE "C" NOT NULL,
    provider_type text   COLLATE "C" NOT NULL,
    provider_uid  text   COLLATE "C" NOT NULL,
    severity      text   COLLATE "C" NOT NULL,
    region        text   COLLATE "C" NOT NULL,
    check_id      text   COLLATE "C" NOT NULL,
    n             bigint NOT NULL,
    PRIMARY KEY (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id)
);

-- Writes to findings wait while the table is summarised, so the summary
-- starts equal to the findings it counts.
LOCK TABLE findings IN SHARE MODE;

INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id;

-- +goose StatementBegin
CREATE FUNCTION scan_finding_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
    SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
    FROM inserted
    GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id
    ORDER BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id
    ON CONFLICT (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id)
    DO UPDATE SET n = scan_finding_counts.n + excluded.n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION scan_finding_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
    SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, sum(d)
    FROM (
        SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, -1 AS d FROM old_rows
        UNION ALL
        SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, 1 FROM new_rows
    ) AS delta
    GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id
    HAVING sum(d) <> 0
    ORDER BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id
    ON CONFLICT (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id)
    DO UPDATE SET n = scan_finding_counts.n + excluded.n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION scan_finding_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE scan_finding_counts c SET n = c.n - d.n
    FROM (
        SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*) AS n
        FROM deleted
        GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id
    ) AS d
    WHERE c.tenant = d.tenant AND c.scan_id = d.scan_id AND c.status_code = d.status_code AND c.provider_type = d.provider_type
        AND c.provider_uid = d.provider_uid AND c.severity = d.severity AND c.region = d.region
        AND c.check_id = d.check_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER scan_finding_counts_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION scan_finding_counts_insert();
CREATE TRIGGER scan_finding_counts_update AFTER UPDATE ON findings
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION scan_finding_counts_update();
CREATE TRIGGER scan_finding_counts_delete AFTER DELETE ON findings
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION scan_finding_counts_delete();

-- +goose Down
DROP TRIGGER scan_finding_counts_delete ON findings;
DROP TRIGGER scan_finding_counts_update ON findings;
DROP TRIGGER scan_finding_counts_insert ON findings;
DROP FUNCTION scan_finding_counts_delete();
DROP FUNCTION scan_finding_counts_update();
DROP FUNCTION scan_finding_counts_insert();
DROP TABLE scan_finding_counts;
