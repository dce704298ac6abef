-- scan_bounds bounds, per tenant and scan, the insertion times and the
-- event times of the scan's findings. A page of the latest view in an
-- order other than insertion time reads the order's index within the
-- latest scans' bounds only: walking it testing each finding's scan read
-- the history before the first latest finding in an ascending order
-- (690 ms a page by event time at a million findings), and reading every
-- latest finding to sort them costs the whole current state
-- (docs/decisions/0019-latest-pages-by-span.md).
--
-- The bounds only ever widen: an insert or an update of findings widens
-- its scans' bounds to the rows written, and a delete leaves them as they
-- are. They then always hold every finding of the scan, which is all a
-- read needs of them, and no write ever has to read a scan's other
-- findings to narrow them. DeleteTenantData empties a tenant's rows.

-- +goose Up
CREATE TABLE scan_bounds (
    tenant         text        COLLATE "C" NOT NULL,
    scan_id        text        COLLATE "C" NOT NULL,
    first_inserted timestamptz NOT NULL,
    last_inserted  timestamptz NOT NULL,
    first_event    timestamptz NOT NULL,
    last_event     timestamptz NOT NULL,
    PRIMARY KEY (tenant, scan_id)
);

-- Writes to findings wait while the bounds are read, so that they start
-- holding every finding.
LOCK TABLE findings IN SHARE MODE;

INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
SELECT tenant, scan_id, min(inserted_at), max(inserted_at), min(event_time), max(event_time)
FROM findings GROUP BY tenant, scan_id;

-- +goose StatementBegin
CREATE FUNCTION scan_bounds_widen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
    SELECT tenant, scan_id, min(inserted_at), max(inserted_at), min(event_time), max(event_time)
    FROM written
    GROUP BY tenant, scan_id
    ORDER BY tenant, scan_id
    ON CONFLICT (tenant, scan_id) DO UPDATE
    SET first_inserted = least(scan_bounds.first_inserted, excluded.first_inserted),
        last_inserted = greatest(scan_bounds.last_inserted, excluded.last_inserted),
        first_event = least(scan_bounds.first_event, excluded.first_event),
        last_event = greatest(scan_bounds.last_event, excluded.last_event)
    WHERE excluded.first_inserted < scan_bounds.first_inserted OR excluded.last_inserted > scan_bounds.last_inserted
        OR excluded.first_event < scan_bounds.first_event OR excluded.last_event > scan_bounds.last_event;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER scan_bounds_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION scan_bounds_widen();
CREATE TRIGGER scan_bounds_update AFTER UPDATE ON findings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION scan_bounds_widen();

-- +goose Down
DROP TRIGGER scan_bounds_update ON findings;
DROP TRIGGER scan_bounds_insert ON findings;
DROP FUNCTION scan_bounds_widen();
DROP TABLE scan_bounds;
