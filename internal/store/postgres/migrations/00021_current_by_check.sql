-- The current state by account and check (docs/decisions/0023-current-state-by-check.md): for each
-- account and check, the findings of the newest run of that check, a run
-- being one scan's findings of one account and check. latest_scans no
-- longer holds one scan per account but every scan that wins a check.
--
-- ingestion_scans records the scans each ingestion wrote, which its merge
-- into the current state reads: scans.ingestion_id names only the last
-- writer, so an ingestion that finished after another of the same scan
-- did not find its scans. Existing rows: each scan's last writer.

-- +goose Up
CREATE TABLE ingestion_scans (
    tenant       text COLLATE "C" NOT NULL,
    ingestion_id text COLLATE "C" NOT NULL,
    scan_id      text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, ingestion_id, scan_id)
);
CREATE TABLE check_runs (
    tenant        text COLLATE "C" NOT NULL,
    provider_type text COLLATE "C" NOT NULL,
    provider_uid  text COLLATE "C" NOT NULL,
    check_id      text COLLATE "C" NOT NULL,
    scan_id       text COLLATE "C" NOT NULL,
    run_time      timestamptz NOT NULL,
    seq           bigint NOT NULL,
    PRIMARY KEY (tenant, provider_type, provider_uid, check_id, scan_id)
);
CREATE INDEX check_runs_scan ON check_runs (tenant, scan_id);
CREATE TABLE current_checks (
    tenant           text COLLATE "C" NOT NULL,
    provider_type    text COLLATE "C" NOT NULL,
    provider_uid     text COLLATE "C" NOT NULL,
    check_id         text COLLATE "C" NOT NULL,
    scan_id          text COLLATE "C" NOT NULL,
    previous_scan_id text COLLATE "C",
    touched          bigint NOT NULL,
    PRIMARY KEY (tenant, provider_type, provider_uid, check_id)
);
CREATE INDEX current_checks_touched ON current_checks (tenant, touched);
CREATE INDEX current_checks_scan ON current_checks (tenant, scan_id);
CREATE TABLE finding_deltas (
    tenant        text COLLATE "C" NOT NULL,
    id            uuid   NOT NULL,
    provider_type text COLLATE "C" NOT NULL,
    provider_uid  text COLLATE "C" NOT NULL,
    check_id      text COLLATE "C" NOT NULL,
    delta         text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX finding_deltas_check ON finding_deltas (tenant, provider_type, provider_uid, check_id);
CREATE INDEX finding_deltas_delta ON finding_deltas (tenant, delta);
CREATE TABLE resolved_findings (
    tenant        text COLLATE "C" NOT NULL,
    id            uuid   NOT NULL,
    provider_type text COLLATE "C" NOT NULL,
    provider_uid  text COLLATE "C" NOT NULL,
    check_id      text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX resolved_findings_check ON resolved_findings (tenant, provider_type, provider_uid, check_id);

INSERT INTO ingestion_scans (tenant, ingestion_id, scan_id) SELECT DISTINCT tenant, ingestion_id, id FROM scans;

-- Existing runs, in the order their findings were first inserted; those
-- of ingestions that failed or still run are not merged.
INSERT INTO check_runs (tenant, provider_type, provider_uid, check_id, scan_id, run_time, seq)
SELECT tenant, provider_type, provider_uid, check_id, scan_id, max(event_time),
    row_number() OVER (PARTITION BY tenant ORDER BY min(inserted_at), scan_id, provider_type, provider_uid, check_id)
FROM findings f WHERE NOT EXISTS (
    SELECT 1 FROM runs r WHERE r.tenant = f.tenant AND r.ingestion_id = f.ingestion_id AND r.status <> 'succeeded')
GROUP BY tenant, provider_type, provider_uid, check_id, scan_id;

INSERT INTO current_checks (tenant, provider_type, provider_uid, check_id, scan_id, previous_scan_id, touched)
SELECT tenant, provider_type, provider_uid, check_id, max(CASE WHEN n = 1 THEN scan_id END), max(CASE WHEN n = 2 THEN scan_id END), 1
FROM (SELECT r.*, row_number() OVER (PARTITION BY tenant, provider_type, provider_uid, check_id ORDER BY run_time DESC, seq DESC, scan_id DESC) AS n
      FROM check_runs r) AS ranked
WHERE n <= 2 GROUP BY tenant, provider_type, provider_uid, check_id;

INSERT INTO finding_deltas (tenant, id, provider_type, provider_uid, check_id, delta)
SELECT f.tenant, f.id, f.provider_type, f.provider_uid, f.check_id,
    CASE WHEN NOT EXISTS (
        SELECT 1 FROM findings g WHERE g.tenant = f.tenant AND g.uid = f.uid AND g.provider_type = f.provider_type
            AND g.provider_uid = f.provider_uid AND g.scan_id <> f.scan_id AND g.event_time <= f.event_time)
    THEN 'new' ELSE 'changed' END
FROM findings f
WHERE (f.tenant, f.provider_type, f.provider_uid, f.check_id, f.scan_id) IN (SELECT tenant, provider_type, provider_uid, check_id, scan_id FROM current_checks)
    AND (NOT EXISTS (
        SELECT 1 FROM findings g WHERE g.tenant = f.tenant AND g.uid = f.uid AND g.provider_type = f.provider_type
            AND g.provider_uid = f.provider_uid AND g.scan_id <> f.scan_id AND g.event_time <= f.event_time)
    OR EXISTS (
        SELECT 1 FROM findings p WHERE p.tenant = f.tenant AND p.uid = f.uid AND p.status_code <> f.status_code
            AND p.scan_id = (SELECT c.previous_scan_id FROM current_checks c WHERE c.tenant = f.tenant AND c.provider_type = f.provider_type
                AND c.provider_uid = f.provider_uid AND c.check_id = f.check_id)));

INSERT INTO resolved_findings (tenant, id, provider_type, provider_uid, check_id)
SELECT p.tenant, p.id, p.provider_type, p.provider_uid, p.check_id FROM findings p
WHERE p.status_code = 'FAIL'
    AND (p.tenant, p.provider_type, p.provider_uid, p.check_id, p.scan_id) IN (
        SELECT tenant, provider_type, provider_uid, check_id, previous_scan_id FROM current_checks WHERE previous_scan_id IS NOT NULL)
    AND NOT EXISTS (
        SELECT 1 FROM findings n WHERE n.tenant = p.tenant AND n.uid = p.uid AND n.status_code = 'FAIL'
            AND n.scan_id = (SELECT c.scan_id FROM current_checks c WHERE c.tenant = p.tenant AND c.provider_type = p.provider_type
                AND c.provider_uid = p.provider_uid AND c.check_id = p.check_id));

DROP TABLE latest_scans;
CREATE TABLE latest_scans (
    tenant  text COLLATE "C" NOT NULL,
    scan_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, scan_id)
);
INSERT INTO latest_scans (tenant, scan_id) SELECT DISTINCT tenant, scan_id FROM current_checks;

-- +goose Down
DROP TABLE latest_scans;
CREATE TABLE latest_scans (
    tenant        text COLLATE "C" NOT NULL,
    provider_type text COLLATE "C" NOT NULL,
    provider_uid  text COLLATE "C" NOT NULL,
    scan_id       text COLLATE "C" NOT NULL,
    ingestion_id  text COLLATE "C" NOT NULL,
    completed_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, provider_type, provider_uid)
);
-- Per account, the scan that wins the most recently merged check.
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at)
SELECT c.tenant, c.provider_type, c.provider_uid, min(c.scan_id), min(s.ingestion_id), min(r.run_time)
FROM current_checks c JOIN scans s ON s.tenant = c.tenant AND s.id = c.scan_id
JOIN check_runs r ON r.tenant = c.tenant AND r.provider_type = c.provider_type AND r.provider_uid = c.provider_uid
    AND r.check_id = c.check_id AND r.scan_id = c.scan_id
GROUP BY c.tenant, c.provider_type, c.provider_uid;
DROP TABLE resolved_findings;
DROP TABLE finding_deltas;
DROP TABLE current_checks;
DROP TABLE check_runs;
DROP TABLE ingestion_scans;
