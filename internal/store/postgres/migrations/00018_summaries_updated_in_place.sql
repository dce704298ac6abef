-- The finding summaries (00007, 00014) and the scans' bounds (00015) are
-- rewritten by every batch of an ingestion: a batch of 2,000 scanner
-- findings adds to about 1,500 groups of each summary. A rewrite is a new
-- row version, and on a full page it goes to another page and takes a new
-- entry in the table's key index, whose uniqueness check and clean-up of
-- the old entries then cost more than the rest of the upsert (profiled:
-- about a quarter of the server's time of an ingestion went to the
-- summaries' triggers, half of it in their indexes). With room left on
-- each page, a rewrite stays on its page and the index is not touched
-- (a heap-only tuple), and the page's dead versions are pruned when it
-- fills again (docs/decisions/0021-maintenance-by-batch.md).
--
-- The setting applies to pages written from now on; the tables are small
-- (one row per group, not per finding), so the rows move to such pages as
-- they are rewritten.

-- +goose Up
ALTER TABLE finding_counts SET (fillfactor = 30);
ALTER TABLE scan_finding_counts SET (fillfactor = 30);
ALTER TABLE scan_bounds SET (fillfactor = 30);

-- +goose Down
ALTER TABLE finding_counts RESET (fillfactor);
ALTER TABLE scan_finding_counts RESET (fillfactor);
ALTER TABLE scan_bounds RESET (fillfactor);
