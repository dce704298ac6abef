-- filter[ingestion] with the default order (-inserted_at) reads the
-- ingestion's findings in that order from one index. With (tenant,
-- ingestion_id) alone the planner walked findings_inserted backwards over
-- the whole tenant, testing each finding for the ingestion (650 ms at a
-- million findings when the ingestion was the oldest).

-- +goose Up
DROP INDEX findings_ingestion;
CREATE INDEX findings_ingestion ON findings (tenant, ingestion_id, inserted_at);

-- +goose Down
DROP INDEX findings_ingestion;
CREATE INDEX findings_ingestion ON findings (tenant, ingestion_id);
