-- New findings are counted into the summaries (00007, 00014) and widen
-- their scans' bounds (00015) once per batch by WriteBatch, in one
-- statement of the groups the store computed from the batch, instead of by
-- statement triggers on INSERT (docs/decisions/0021-maintenance-by-batch.md).
-- Those triggers' transition table held a copy of every inserted row, raw
-- record included, and each of the three read it whole and grouped it
-- again. The triggers on UPDATE and DELETE stay: a rewrite or a delete is
-- rare, and they keep the summaries and bounds exact for whatever changes
-- or deletes findings. Findings inserted by hand, outside the store, are
-- not counted; the summaries are rebuilt from the findings by the
-- INSERT ... SELECT ... GROUP BY of 00007, 00014 and 00015.

-- +goose Up
DROP TRIGGER finding_counts_insert ON findings;
DROP TRIGGER scan_finding_counts_insert ON findings;
DROP TRIGGER scan_bounds_insert ON findings;
DROP FUNCTION finding_counts_insert();
DROP FUNCTION scan_finding_counts_insert();

-- +goose Down
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

CREATE TRIGGER finding_counts_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION finding_counts_insert();
CREATE TRIGGER scan_finding_counts_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION scan_finding_counts_insert();
CREATE TRIGGER scan_bounds_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION scan_bounds_widen();
