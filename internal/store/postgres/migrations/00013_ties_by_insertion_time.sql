-- The sorts by check and by severity break their ties by insertion time
-- before uid (docs/decisions/0017-ties-by-insertion-time.md), so their
-- indexes carry inserted_at before uid: a new finding then goes to the
-- end of its check's and its severity's entries instead of a random
-- place among them. findings_check_order now also gives a check's
-- findings in insertion order, which findings_check_inserted was for.
--
-- The index builds lock writes to findings while they run: seconds per
-- million findings.

-- +goose Up
DROP INDEX findings_check_inserted;
DROP INDEX findings_check_order;
CREATE INDEX findings_check_order ON findings (tenant, check_id, inserted_at, uid);
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id, inserted_at, uid);

-- +goose Down
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id, uid);
DROP INDEX findings_check_order;
CREATE INDEX findings_check_order ON findings (tenant, check_id, uid);
CREATE INDEX findings_check_inserted ON findings (tenant, check_id, inserted_at);
