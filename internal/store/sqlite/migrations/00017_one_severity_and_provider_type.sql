-- Stored rows are brought to today's rules of what a record's indexed
-- columns hold (ocsf.Severity, ocsf.ProviderType; docs/decisions/0022-one-severity.md):
--
-- - severity and severity_id are one pair: a stored severity that is one of
--   OCSF's captions decides both (critical with severity_id 1, as the
--   scanner's example report labels it, becomes critical with 5); any other
--   label (earlier releases kept a vendor's, lower-cased) becomes the
--   caption of severity_id.
-- - provider_type is the type a Provider records: lower-cased, characters
--   other than a-z and 0-9 dropped, unknown when none is left (earlier
--   releases only lower-cased it, so "google cloud" becomes "googlecloud").
--   An empty type, the column's default, names no scanner and stays empty.
--
-- Findings, scans and latest scans are rewritten where a rule changes them;
-- two latest scans of one account that now share its type keep the one
-- completed last. The finding summaries (00006, 00012) and the scans'
-- bounds (00013) are then rebuilt from the findings, so that they count
-- the findings as they now read. The raw records are not touched.
--
-- The upgrade reads every finding and rewrites those that change, in time
-- that grows with their number (docs/install.md, upgrading).

-- +goose Up
CREATE TEMP TABLE severity_captions (caption TEXT PRIMARY KEY, id INTEGER NOT NULL UNIQUE);
INSERT INTO severity_captions (caption, id) VALUES
    ('unknown', 0), ('informational', 1), ('low', 2), ('medium', 3), ('high', 4), ('critical', 5), ('fatal', 6), ('other', 99);

-- Each pair the findings hold, once, with the pair it becomes; lower()
-- folds ASCII only, as the captions need.
CREATE TEMP TABLE severity_changes (
    old_severity TEXT    NOT NULL,
    old_id       INTEGER NOT NULL,
    severity     TEXT    NOT NULL,
    severity_id  INTEGER NOT NULL,
    PRIMARY KEY (old_severity, old_id)
);
INSERT INTO severity_changes (old_severity, old_id, severity, severity_id)
SELECT p.severity, p.severity_id, c.caption, c.id
FROM (SELECT DISTINCT severity, severity_id FROM findings) p
JOIN severity_captions c ON c.caption = coalesce(
    (SELECT k.caption FROM severity_captions k WHERE k.caption = lower(trim(p.severity))),
    (SELECT k.caption FROM severity_captions k WHERE k.id = p.severity_id))
WHERE p.severity <> c.caption OR p.severity_id <> c.id;

-- Each type findings, scans and latest scans hold, once, with the type it
-- becomes, built a character at a time (SQLite has no regular
-- expressions). Go lower-cases two letters outside ASCII to ASCII (U+0130
-- to i, the Kelvin sign U+212A to k), and so does this.
CREATE TEMP TABLE provider_type_changes (old_type TEXT PRIMARY KEY, provider_type TEXT NOT NULL);
INSERT INTO provider_type_changes (old_type, provider_type)
WITH RECURSIVE
    types (old_type) AS (
        SELECT provider_type FROM findings
        UNION SELECT provider_type FROM scans
        UNION SELECT provider_type FROM latest_scans),
    walk (old_type, i, kept) AS (
        SELECT old_type, 1, '' FROM types WHERE old_type <> ''
        UNION ALL
        SELECT old_type, i + 1, kept || CASE
            WHEN lower(substr(old_type, i, 1)) BETWEEN 'a' AND 'z' THEN lower(substr(old_type, i, 1))
            WHEN substr(old_type, i, 1) BETWEEN '0' AND '9' THEN substr(old_type, i, 1)
            WHEN substr(old_type, i, 1) = char(304) THEN 'i'
            WHEN substr(old_type, i, 1) = char(8490) THEN 'k'
            ELSE '' END
        FROM walk WHERE i <= length(old_type))
SELECT old_type, CASE kept WHEN '' THEN 'unknown' ELSE kept END FROM walk
WHERE i = length(old_type) + 1 AND old_type <> CASE kept WHEN '' THEN 'unknown' ELSE kept END;

UPDATE findings SET
    severity = coalesce((SELECT c.severity FROM severity_changes c WHERE c.old_severity = findings.severity AND c.old_id = findings.severity_id), severity),
    severity_id = coalesce((SELECT c.severity_id FROM severity_changes c WHERE c.old_severity = findings.severity AND c.old_id = findings.severity_id), severity_id),
    provider_type = coalesce((SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = findings.provider_type), provider_type)
WHERE (severity, severity_id) IN (SELECT old_severity, old_id FROM severity_changes)
    OR provider_type IN (SELECT old_type FROM provider_type_changes);

UPDATE scans SET provider_type = (SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = scans.provider_type)
WHERE provider_type IN (SELECT old_type FROM provider_type_changes);

-- Of the latest scans that become one account's, the one completed last
-- stays (ties: the greater scan id), as FinishRun would have kept it.
DELETE FROM latest_scans
WHERE EXISTS (
    SELECT 1 FROM latest_scans o
    WHERE o.tenant = latest_scans.tenant AND o.provider_uid = latest_scans.provider_uid
        AND coalesce((SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = o.provider_type), o.provider_type)
            = coalesce((SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = latest_scans.provider_type), latest_scans.provider_type)
        AND (o.completed_at, o.scan_id) > (latest_scans.completed_at, latest_scans.scan_id));
UPDATE latest_scans SET provider_type = (SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = latest_scans.provider_type)
WHERE provider_type IN (SELECT old_type FROM provider_type_changes);

DELETE FROM finding_counts;
INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id;

DELETE FROM scan_finding_counts;
INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id;

DELETE FROM scan_bounds;
INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
SELECT tenant, scan_id, min(inserted_at), max(inserted_at), min(event_time), max(event_time)
FROM findings GROUP BY tenant, scan_id;

DROP TABLE provider_type_changes;
DROP TABLE severity_changes;
DROP TABLE severity_captions;

-- +goose Down
-- The rules' inputs are in the raw records; the old labels and types are
-- not kept, and today's read as well under the earlier release.
SELECT 1;
