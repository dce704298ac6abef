-- The sorts by check and by severity break their ties by insertion time
-- before uid (docs/decisions/0017-ties-by-insertion-time.md), so their
-- indexes carry inserted_at before uid: a new finding then goes to the
-- end of its check's and its severity's entries instead of a random
-- place among them, which spares each commit a dirty page per new finding
-- in each. findings_check_order now also gives a check's findings in
-- insertion order, which findings_check_inserted was for.
--
-- Dropping an index drops its statistics, and a new one has none, so they
-- are written (see 00004 and 00010): a batch of a few thousand findings
-- shares an insertion time, a few hundred of them a severity, about ten a
-- check.

-- +goose Up
DROP INDEX findings_check_inserted;
DROP INDEX findings_check_order;
CREATE INDEX findings_check_order ON findings (tenant, check_id, inserted_at, uid);
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id, inserted_at, uid);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx IN ('findings_check_inserted', 'findings_check_order', 'findings_default_order');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('findings', 'findings_check_order', '1000000 100000 200 10 1'),
    ('findings', 'findings_default_order', '1000000 100000 20000 400 1');

-- +goose Down
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id, uid);
DROP INDEX findings_check_order;
CREATE INDEX findings_check_order ON findings (tenant, check_id, uid);
CREATE INDEX findings_check_inserted ON findings (tenant, check_id, inserted_at);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx IN ('findings_check_inserted', 'findings_check_order', 'findings_default_order');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('findings', 'findings_check_order', '1000000 100000 200 2'),
    ('findings', 'findings_default_order', '1000000 100000 20000 1'),
    ('findings', 'findings_check_inserted', '1000000 100000 200 10');
