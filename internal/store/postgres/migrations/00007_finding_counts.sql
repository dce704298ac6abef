-- finding_counts is the finding summary: per tenant, the number of findings
-- of each combination of the grouping dimensions (GET /findings/counts'
-- group_by, which are also the summary filters). Counts and the
-- pagination count of a listing filtered on these columns alone read it,
-- so they cost the number of groups rather than the number of findings.
--
-- Statement-level triggers keep it exact: they run at the end of the
-- statement (COPY, upsert, UPDATE, DELETE) that changed findings, inside
-- its transaction, with the rows it inserted, or the old and new versions
-- of those it rewrote (transition tables), and apply one delta per group:
-- a 2,000-finding batch touches a summary row once, not 2,000 times. A
-- rewrite that leaves every dimension as it was (re-ingesting the same
-- report; giving findings back after a failed ingestion, which changes only
-- ingestion_id) nets to nothing and writes nothing. The deltas are applied
-- in key order, so concurrent batches lock summary rows in the same order;
-- the two triggers of one upsert (its inserts, then its updates) can still
-- meet another's in opposite order, a deadlock the store retries.
-- A group whose findings all went elsewhere keeps a row at 0 that reads
-- skip: the table never holds more rows than combinations ever seen.
--
-- The version leaves a gap for concurrent work on the schema; the store
-- applies missing versions out of order (each is independent of the
-- others).

-- +goose Up
CREATE TABLE finding_counts (
    tenant        text   COLLATE "C" NOT NULL,
    status_code   text   COLLATE "C" NOT NULL,
    provider_type text   COLLATE "C" NOT NULL,
    provider_uid  text   COLLATE "C" NOT NULL,
    severity      text   COLLATE "C" NOT NULL,
    region        text   COLLATE "C" NOT NULL,
    check_id      text   COLLATE "C" NOT NULL,
    n             bigint NOT NULL,
    PRIMARY KEY (tenant, status_code, provider_type, provider_uid, severity, region, check_id)
);

-- Writes to findings wait while the table is summarised, so the summary
-- starts equal to the findings it counts.
LOCK TABLE findings IN SHARE MODE;

INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id;

-- +goose StatementBegin
CREATE FUNCTION finding_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
    SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
    FROM inserted
    GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id
    ORDER BY tenant, status_code, provider_type, provider_uid, severity, region, check_id
    ON CONFLICT (tenant, status_code, provider_type, provider_uid, severity, region, check_id)
    DO UPDATE SET n = finding_counts.n + excluded.n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION finding_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
    SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, sum(d)
    FROM (
        SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, -1 AS d FROM old_rows
        UNION ALL
        SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, 1 FROM new_rows
    ) AS delta
    GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id
    HAVING sum(d) <> 0
    ORDER BY tenant, status_code, provider_type, provider_uid, severity, region, check_id
    ON CONFLICT (tenant, status_code, provider_type, provider_uid, severity, region, check_id)
    DO UPDATE SET n = finding_counts.n + excluded.n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION finding_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE finding_counts c SET n = c.n - d.n
    FROM (
        SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*) AS n
        FROM deleted
        GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id
    ) AS d
    WHERE c.tenant = d.tenant AND c.status_code = d.status_code AND c.provider_type = d.provider_type
        AND c.provider_uid = d.provider_uid AND c.severity = d.severity AND c.region = d.region
        AND c.check_id = d.check_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER finding_counts_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION finding_counts_insert();
CREATE TRIGGER finding_counts_update AFTER UPDATE ON findings
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION finding_counts_update();
CREATE TRIGGER finding_counts_delete AFTER DELETE ON findings
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION finding_counts_delete();

-- +goose Down
DROP TRIGGER finding_counts_delete ON findings;
DROP TRIGGER finding_counts_update ON findings;
DROP TRIGGER finding_counts_insert ON findings;
DROP FUNCTION finding_counts_delete();
DROP FUNCTION finding_counts_update();
DROP FUNCTION finding_counts_insert();
DROP TABLE finding_counts;
