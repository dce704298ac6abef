-- scan_bounds bounds, per tenant and scan, the insertion times and the
-- event times of the scan's findings: a page of the latest view in an
-- order other than insertion time reads the order's index within the
-- latest scans' bounds only (docs/decisions/0019-latest-pages-by-span.md).
-- The bounds only ever widen: a row written widens its scan's bounds to
-- it, and a delete leaves them as they are, so they always hold every
-- finding of the scan. DeleteTenantData empties a tenant's rows.

-- +goose Up
CREATE TABLE scan_bounds (
    tenant         TEXT    NOT NULL,
    scan_id        TEXT    NOT NULL,
    first_inserted INTEGER NOT NULL,
    last_inserted  INTEGER NOT NULL,
    first_event    INTEGER NOT NULL,
    last_event     INTEGER NOT NULL,
    PRIMARY KEY (tenant, scan_id)
) WITHOUT ROWID;

INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
SELECT tenant, scan_id, min(inserted_at), max(inserted_at), min(event_time), max(event_time)
FROM findings GROUP BY tenant, scan_id;

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

-- +goose StatementBegin
CREATE TRIGGER scan_bounds_update AFTER UPDATE OF tenant, scan_id, inserted_at, event_time ON findings
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

-- +goose Down
DROP TRIGGER scan_bounds_update;
DROP TRIGGER scan_bounds_insert;
DROP TABLE scan_bounds;
