-- Every documented read of findings is served by an index (the query plan
-- tests in internal_test.go hold this):
--
-- * findings_facets covers the low-cardinality columns, so grouped counts
--   (GET /findings/counts) read the index alone, never the rows. It
--   replaces (tenant, status_code) and (tenant, provider_type,
--   provider_uid), which are its prefixes.
-- * sort=check_id and sort=uid walk an index in order instead of sorting
--   every matching row; uid is the tie-breaker of every sort, so the check
--   index carries it.
--
-- The number of indexes ingestion maintains stays the same (seven).
--
-- Without statistics SQLite guesses that "tenant = ?" selects about ten
-- rows, so it sorts a tenant's findings rather than read an index in the
-- requested order, and picks any tenant-led index for it: every page costs
-- as much as sorting the whole tenant. The store never runs ANALYZE (it
-- would have to run again as tables grow), so the statistics are written
-- here instead, as SQLite documents for fixing plans ("Manual Control Of
-- Query Plans Using SQLITE_STAT Tables"): a table of a million findings,
-- a hundred thousand per tenant, few values per facet. Only their ratios
-- matter, and they hold for any size; an ANALYZE run by hand replaces them
-- with measured ones.

-- +goose Up
CREATE INDEX findings_facets ON findings (tenant, status_code, provider_type, provider_uid, severity, region, check_id);
CREATE INDEX findings_check_order ON findings (tenant, check_id, uid);
CREATE INDEX findings_uid ON findings (tenant, uid);
DROP INDEX findings_status_code;
DROP INDEX findings_provider;
DROP INDEX findings_check;

ANALYZE sqlite_schema; -- creates sqlite_stat1 if it does not exist
DELETE FROM sqlite_stat1 WHERE tbl = 'findings';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('findings', NULL, '1000000'),
    ('findings', 'sqlite_autoindex_findings_1', '1000000 1'),
    ('findings', 'sqlite_autoindex_findings_2', '1000000 100000 2000 1'),
    ('findings', 'findings_default_order', '1000000 100000 20000 1'),
    ('findings', 'findings_ingestion', '1000000 100000 5000'),
    ('findings', 'findings_time', '1000000 100000 10'),
    ('findings', 'findings_inserted', '1000000 100000 2000'),
    ('findings', 'findings_facets', '1000000 100000 35000 15000 2000 400 100 2'),
    ('findings', 'findings_check_order', '1000000 100000 200 2'),
    ('findings', 'findings_uid', '1000000 100000 2');

-- +goose Down
DELETE FROM sqlite_stat1 WHERE tbl = 'findings';
CREATE INDEX findings_status_code ON findings (tenant, status_code);
CREATE INDEX findings_provider ON findings (tenant, provider_type, provider_uid);
CREATE INDEX findings_check ON findings (tenant, check_id);
DROP INDEX findings_uid;
DROP INDEX findings_check_order;
DROP INDEX findings_facets;
