-- Ties in every findings order are broken by uid, then id, in the
-- direction of the first sort key, so that each documented sort, either
-- way, is one read of an index: forwards, or backwards for the other
-- direction. The severity index therefore runs one way throughout; read
-- backwards it gives the default order (-severity_id, then uid and id
-- descending). Dropping an index drops its statistics, so they are written
-- again (see 00004).

-- +goose Up
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id, uid);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx = 'findings_default_order';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('findings', 'findings_default_order', '1000000 100000 20000 1');

-- +goose Down
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id DESC, uid);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx = 'findings_default_order';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('findings', 'findings_default_order', '1000000 100000 20000 1');
