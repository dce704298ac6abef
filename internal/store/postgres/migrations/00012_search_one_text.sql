-- findings_search holds one text per finding, the four searched columns
-- joined by spaces (engine.SearchText), instead of the four columns: a
-- GIN index of several columns keeps a trigram once per column it is in,
-- and a scanner's uid repeats its check id and much of its resource uid,
-- so one text has about half the entries (91 against 195 a finding over
-- the scanner fixture). Ingestion writes half as many index entries, the
-- index is half the size (at ten million findings, 6.1 GB was most of
-- what did not fit in memory), and a search looks its text up once
-- instead of once per column. The columns compared in the "C" collation
-- take the database's here, which folds more letters, so the text matches
-- every finding a column does; the store tests each column to decide.
--
-- The upgrade builds the new index over every finding, in time that grows
-- with their number (docs/install.md, upgrading).

-- +goose Up
DROP INDEX findings_search;
CREATE INDEX findings_search ON findings USING gin (
    ((uid COLLATE "default") || ' ' || title || ' ' || (check_id COLLATE "default") || ' ' || (resource_uid COLLATE "default")) gin_trgm_ops);

-- +goose Down
DROP INDEX findings_search;
CREATE INDEX findings_search ON findings USING gin (
    uid gin_trgm_ops, title gin_trgm_ops, check_id gin_trgm_ops, resource_uid gin_trgm_ops);
