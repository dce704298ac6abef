-- filter[ingestion] with the default order (-inserted_at) reads the
-- ingestion's findings in that order from one index, instead of sorting
-- them all (an ingestion can hold a large share of a tenant). The
-- statistics of the dropped index go with it, so they are written again
-- (see 00004): an ingestion's findings arrive in batches of a few thousand
-- that share an insertion time.

-- +goose Up
DROP INDEX findings_ingestion;
CREATE INDEX findings_ingestion ON findings (tenant, ingestion_id, inserted_at);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx = 'findings_ingestion';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('findings', 'findings_ingestion', '1000000 100000 5000 2000');

-- +goose Down
DROP INDEX findings_ingestion;
CREATE INDEX findings_ingestion ON findings (tenant, ingestion_id);
DELETE FROM sqlite_stat1 WHERE tbl = 'findings' AND idx = 'findings_ingestion';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('findings', 'findings_ingestion', '1000000 100000 5000');
