-- New findings are counted into the summaries (00006, 00012) and widen
-- their scans' bounds (00013) once per batch, by WriteBatch, instead of by
-- a trigger per finding (docs/decisions/0021-maintenance-by-batch.md):
-- three row triggers on each insert ran three upserts a finding, and with
-- them every insert kept a statement journal, a copy of each page it first
-- touched. The triggers on updates and deletes stay: a rewrite or a delete
-- is rare, and they keep the summaries and bounds exact for whatever
-- changes or deletes findings. Findings inserted by hand, outside the
-- store, are not counted; the summaries are rebuilt from the findings by
-- the INSERT ... SELECT ... GROUP BY of 00006, 00012 and 00013.

-- +goose Up
DROP TRIGGER finding_counts_insert;
DROP TRIGGER scan_finding_counts_insert;
DROP TRIGGER scan_bounds_insert;

-- +goose Down
-- +goose StatementBegin
CREATE TRIGGER finding_counts_insert AFTER INSERT ON findings
BEGIN
    INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
    VALUES (NEW.tenant, NEW.status_code, NEW.provider_type, NEW.provider_uid, NEW.severity, NEW.region, NEW.check_id, 1)
    ON CONFLICT (tenant, status_code, provider_type, provider_uid, severity, region, check_id) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER scan_finding_counts_insert AFTER INSERT ON findings
BEGIN
    INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
    VALUES (NEW.tenant, NEW.scan_id, NEW.status_code, NEW.provider_type, NEW.provider_uid, NEW.severity, NEW.region, NEW.check_id, 1)
    ON CONFLICT (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER scan_bounds_insert AFTER INSERT ON findings
BEGIN
    INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
    VALUES (NEW.tenant, NEW.scan_id, NEW.inserted_at, NEW.inserted_at, NEW.event_time, NEW.event_time)
    ON CONFLICT (tenant, scan_id) DO UPDATE SET
        first_inserted = min(first_inserted, excluded.first_inserted), last_inserted = max(last_inserted, excluded.last_inserted),
        first_event = min(first_event, excluded.first_event), last_event = max(last_event, excluded.last_event)
    WHERE excluded.first_inserted < first_inserted OR excluded.last_inserted > last_inserted
        OR excluded.first_event < first_event OR excluded.last_event > last_event;
END;
-- +goose StatementEnd
