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
-- completed last. The finding summaries (00007, 00014) and the scans'
-- bounds (00015) are then rebuilt from the findings, so that they count
-- the findings as they now read. The raw records are not touched.
--
-- The upgrade reads every finding and rewrites those that change, in time
-- that grows with their number (docs/install.md, upgrading).

-- +goose Up
-- Writers wait until the findings and their summaries agree again; reads
-- go on.
LOCK TABLE findings IN SHARE ROW EXCLUSIVE MODE;

CREATE TEMPORARY TABLE severity_captions (caption text COLLATE "C" PRIMARY KEY, id integer NOT NULL UNIQUE) ON COMMIT DROP;
INSERT INTO severity_captions (caption, id) VALUES
    ('unknown', 0), ('informational', 1), ('low', 2), ('medium', 3), ('high', 4), ('critical', 5), ('fatal', 6), ('other', 99);

-- Each pair the findings hold, once, with the pair it becomes; lower() of a
-- "C" column folds ASCII only, as the captions need.
CREATE TEMPORARY TABLE severity_changes ON COMMIT DROP AS
SELECT p.severity AS old_severity, p.severity_id AS old_id, c.caption AS severity, c.id AS severity_id
FROM (SELECT DISTINCT severity, severity_id FROM findings) p
JOIN severity_captions c ON c.caption = coalesce(
    (SELECT k.caption FROM severity_captions k WHERE k.caption = lower(btrim(p.severity))),
    (SELECT k.caption FROM severity_captions k WHERE k.id = p.severity_id))
WHERE p.severity <> c.caption OR p.severity_id <> c.id;

-- Each type findings, scans and latest scans hold, once, with the type it
-- becomes. Go lower-cases two letters outside ASCII to ASCII (U+0130 to i,
-- the Kelvin sign U+212A to k), which translate() does here first.
CREATE TEMPORARY TABLE provider_type_changes ON COMMIT DROP AS
SELECT old_type, coalesce(nullif(regexp_replace(lower(translate(old_type, chr(304) || chr(8490), 'ik')),
    '[^abcdefghijklmnopqrstuvwxyz0123456789]', '', 'g'), ''), 'unknown') AS provider_type
FROM (
    SELECT DISTINCT provider_type AS old_type FROM findings
    UNION SELECT provider_type FROM scans
    UNION SELECT provider_type FROM latest_scans
) t
WHERE old_type <> '';
DELETE FROM provider_type_changes WHERE old_type = provider_type;

UPDATE findings f SET
    severity = coalesce((SELECT c.severity FROM severity_changes c WHERE c.old_severity = f.severity AND c.old_id = f.severity_id), f.severity),
    severity_id = coalesce((SELECT c.severity_id FROM severity_changes c WHERE c.old_severity = f.severity AND c.old_id = f.severity_id), f.severity_id),
    provider_type = coalesce((SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = f.provider_type), f.provider_type)
WHERE (f.severity, f.severity_id) IN (SELECT old_severity, old_id FROM severity_changes)
    OR f.provider_type IN (SELECT old_type FROM provider_type_changes);

UPDATE scans s SET provider_type = c.provider_type FROM provider_type_changes c WHERE c.old_type = s.provider_type;

-- Of the latest scans that become one account's, the one completed last
-- stays (ties: the greater scan id), as FinishRun would have kept it.
DELETE FROM latest_scans l
WHERE EXISTS (
    SELECT 1 FROM latest_scans o
    WHERE o.tenant = l.tenant AND o.provider_uid = l.provider_uid
        AND coalesce((SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = o.provider_type), o.provider_type)
            = coalesce((SELECT c.provider_type FROM provider_type_changes c WHERE c.old_type = l.provider_type), l.provider_type)
        AND (o.completed_at, o.scan_id) > (l.completed_at, l.scan_id));
UPDATE latest_scans l SET provider_type = c.provider_type FROM provider_type_changes c WHERE c.old_type = l.provider_type;

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

-- +goose Down
-- The rules' inputs are in the raw records; the old labels and types are
-- not kept, and today's read as well under the earlier release.
SELECT 1;
