-- scan_event_times bounds, per tenant and scan, the event times of the
-- scan's findings. A page of the latest view in event-time order reads
-- findings_time (tenant, event_time, uid) within the latest scans' bounds
-- only: walking it testing each finding's scan read the whole history
-- before the first latest finding in ascending order (690 ms a page at a
-- million findings), and reading every latest finding to sort them costs
-- the whole current state (docs/decisions/0019-latest-pages-by-span.md).
--
-- The bounds only ever widen: an insert or an update of findings widens
-- its scans' bounds to their new event times, and a delete leaves them as
-- they are. They then always hold every event time of the scan's
-- findings, which is all a read needs of them, and no write ever has to
-- read a scan's other findings to narrow them. DeleteTenantData empties a
-- tenant's rows.

-- +goose Up
CREATE TABLE scan_event_times (
    tenant      text        COLLATE "C" NOT NULL,
    scan_id     text        COLLATE "C" NOT NULL,
    first_event timestamptz NOT NULL,
    last_event  timestamptz NOT NULL,
    PRIMARY KEY (tenant, scan_id)
);

-- Writes to findings wait while the bounds are read, so that they start
-- holding every finding.
LOCK TABLE findings IN SHARE MODE;

INSERT INTO scan_event_times (tenant, scan_id, first_event, last_event)
SELECT tenant, scan_id, min(event_time), max(event_time) FROM findings GROUP BY tenant, scan_id;

-- +goose StatementBegin
CREATE FUNCTION scan_event_times_widen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scan_event_times (tenant, scan_id, first_event, last_event)
    SELECT tenant, scan_id, min(event_time), max(event_time)
    FROM written
    GROUP BY tenant, scan_id
    ORDER BY tenant, scan_id
    ON CONFLICT (tenant, scan_id) DO UPDATE
    SET first_event = least(scan_event_times.first_event, excluded.first_event),
        last_event = greatest(scan_event_times.last_event, excluded.last_event)
    WHERE excluded.first_event < scan_event_times.first_event OR excluded.last_event > scan_event_times.last_event;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER scan_event_times_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION scan_event_times_widen();
CREATE TRIGGER scan_event_times_update AFTER UPDATE ON findings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION scan_event_times_widen();

-- +goose Down
DROP TRIGGER scan_event_times_update ON findings;
DROP TRIGGER scan_event_times_insert ON findings;
DROP FUNCTION scan_event_times_widen();
DROP TABLE scan_event_times;
