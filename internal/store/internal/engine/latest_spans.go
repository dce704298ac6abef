package engine

import (
	"strconv"

	"github.com/posture-dev/posture/internal/store"
)

// Pages of the latest findings in an order other than insertion time
// (PostgreSQL; docs/decisions/0019-latest-pages-by-span.md).
//
// The sort indexes hold the whole history. Walking one testing each
// finding's scan reads, in an ascending order, the history before the
// first latest finding: a check's earlier findings (282 ms a page at ten
// million findings), every earlier event time (690 ms at a million).
// Reading every latest finding and sorting them is flat in the history
// but costs the whole current state (380 ms for 250,000). Instead, each
// latest scan's findings are bounded in the order's index, and only
// those ranges are read.
//
// By check or severity: the index, (tenant, check_id, inserted_at, uid)
// or (tenant, severity_id, inserted_at, uid), holds each value's findings
// in insertion order, and every finding of a scan was inserted between
// the first and the last of them, two reads of findings_scan (tenant,
// scan_id, inserted_at). Within one value, the latest findings therefore
// lie in the ranges (value, the scans' insertion spans), which hold
// besides them only what other scans of the tenant wrote at the same
// time. The values are found one after the other, each from the previous
// one by one index descent (a skip scan), and only as many as the page
// needs: each value's latest findings are counted, up to the page's end,
// until the page is full. The page is then sorted from at most that many
// findings per value, so it does not depend on the order in which the
// statement's loops happen to return rows.
//
// By event time: scan_event_times bounds each scan's event times, and
// findings_time (tenant, event_time, uid) is read within the latest
// scans' bounds.
//
// Either way, the ranges of scans written together, or reporting the same
// hours, are merged, so that each finding is read once.

// mergedSpans is the CTE "spans": the ranges (lo, hi) of the CTE
// "latest" (one row per latest scan), merged where they overlap, so that
// no finding is read twice.
const mergedSpans = `spans AS MATERIALIZED (
  SELECT min(lo) AS lo, max(hi) AS hi FROM (
    SELECT lo, hi, count(*) FILTER (WHERE lo > reach) OVER (ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS span FROM (
      SELECT lo, hi, max(hi) OVER (ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
      FROM latest WHERE lo IS NOT NULL) AS reaches) AS spans
  GROUP BY span
)`

// latestSpanPage renders a page of the latest findings read within the
// latest scans' spans, when q is one: in an order whose sort index holds
// it up to id, by check, severity or event time, either way, with no
// filter whose own index bounds the rows better (a scan, an ingestion)
// and no search the trigram index answers.
func latestSpanPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) (Statement, bool) {
	if !q.Latest || d.LatestFindings == nil || q.ScanID != "" || q.IngestionID != "" || (q.Search != "" && indexedSearch(q)) {
		return Statement{}, false
	}
	if _, ok := indexKey(parts); !ok {
		return Statement{}, false
	}
	switch parts[0].col {
	case "check_id", "severity_id":
		return latestKeyedPage(d, tenant, q, parts, limit, offset), true
	case "event_time":
		return latestTimedPage(d, tenant, q, parts, limit, offset), true
	}
	return Statement{}, false
}

// spanConditions starts a span page's statement: its arguments, the
// tenant's placeholder, the condition every finding read must meet (q's
// filters and cursor, not the latest scans'), the offset (none after a
// cursor) and the page's end.
func spanConditions(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) (a *Args, t, cond string, skip, end int) {
	a = NewArgs(d)
	t = a.Add(tenant)
	rest := q
	rest.Latest = false
	cond = FindingWhere(a, tenant, rest)
	if q.After != nil {
		cond += " AND (" + a.keyset(parts, *q.After) + ")"
		offset = 0
	}
	return a, t, cond, offset, offset + limit
}

// latestKeyedPage renders a page by check or severity (see above). need
// is the page's end: the findings a value may contribute.
func latestKeyedPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) Statement {
	a, t, cond, offset, end := spanConditions(d, tenant, q, parts, limit, offset)
	col, desc := parts[0].col, parts[0].desc
	var start string
	if q.After != nil {
		var v any = q.After.CheckID
		if col == "severity_id" {
			v = q.After.SeverityID
		}
		start = " AND " + col + " " + beyond(parts[0], false) + "= " + a.Add(v)
	}
	if q.CheckID != "" && col == "check_id" {
		// One value: the others would each be counted in vain.
		start += " AND check_id = " + a.Add(q.CheckID)
	}
	need := strconv.Itoa(end)
	first := "min"
	if desc {
		first = "max"
	}
	// next is the value after prev in the order (the first when prev is
	// empty), read from the order's index alone.
	next := func(prev string) string {
		w := "tenant = " + t + start
		if prev != "" {
			w += " AND " + col + " " + beyond(parts[0], false) + " " + prev
		}
		return "(SELECT " + first + "(" + col + ") FROM findings WHERE " + w + ")"
	}
	// rows reads value v's latest findings matching q, at most need of
	// them from each span, in the span's index order.
	rows := func(v, cols string) string {
		return "SELECT f.* FROM spans CROSS JOIN LATERAL (SELECT " + cols + " FROM findings WHERE tenant = " + t +
			" AND " + col + " = " + v + " AND inserted_at BETWEEN spans.lo AND spans.hi AND scan_id = ANY (ARRAY(SELECT scan_id FROM latest)) AND " +
			cond + " ORDER BY " + orderBy(parts[1:3], nil) + " LIMIT " + need + ") AS f"
	}
	counted := func(v string) string {
		return "(SELECT count(*) FROM (" + rows(v, "1 AS one") + " LIMIT " + need + ") AS counted)"
	}
	sql := `WITH RECURSIVE latest AS MATERIALIZED (
  SELECT l.scan_id,
    (SELECT min(inserted_at) FROM findings WHERE tenant = ` + t + ` AND scan_id = l.scan_id) AS lo,
    (SELECT max(inserted_at) FROM findings WHERE tenant = ` + t + ` AND scan_id = l.scan_id) AS hi
  FROM (SELECT DISTINCT scan_id FROM latest_scans WHERE tenant = ` + t + `) AS l
), ` + mergedSpans + `, keys(k, n) AS (
  SELECT k, ` + counted("first.k") + ` FROM (SELECT ` + next("") + ` AS k) AS first WHERE k IS NOT NULL
  UNION ALL
  SELECT k, n + ` + counted("following.k") + ` FROM (SELECT ` + next("keys.k") + ` AS k, n FROM keys WHERE n < ` + need + `) AS following WHERE k IS NOT NULL
)
SELECT ` + FindingColumns + ` FROM keys CROSS JOIN LATERAL (` + rows("keys.k", "findings.*") + ` ORDER BY ` + orderBy(parts[1:], nil) +
		` LIMIT ` + need + `) AS findings ORDER BY ` + orderBy(parts, nil) + ` LIMIT ` + strconv.Itoa(limit)
	if offset > 0 {
		sql += ` OFFSET ` + strconv.Itoa(offset)
	}
	return Statement{SQL: sql, Args: a.Vals}
}

// latestTimedPage renders a page by event time. A finding's event time
// is its scanner's, not the store's, so the latest findings' place in
// findings_time (tenant, event_time, uid) is bounded by what
// scan_event_times keeps of each scan: the earliest and the latest event
// time it has held. Each merged range of those bounds gives at most the
// page's end of its findings in the order, and the page is sorted from
// them.
func latestTimedPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) Statement {
	a, t, cond, offset, end := spanConditions(d, tenant, q, parts, limit, offset)
	need := strconv.Itoa(end)
	sql := `WITH latest AS MATERIALIZED (
  SELECT l.scan_id, b.first_event AS lo, b.last_event AS hi
  FROM (SELECT DISTINCT scan_id FROM latest_scans WHERE tenant = ` + t + `) AS l
  JOIN ` + ScanEventTimesTable + ` AS b ON b.tenant = ` + t + ` AND b.scan_id = l.scan_id
), ` + mergedSpans + `
SELECT ` + FindingColumns + ` FROM spans CROSS JOIN LATERAL (SELECT * FROM findings WHERE tenant = ` + t +
		` AND event_time BETWEEN spans.lo AND spans.hi AND scan_id = ANY (ARRAY(SELECT scan_id FROM latest)) AND ` + cond +
		` ORDER BY ` + orderBy(parts[:2], nil) + ` LIMIT ` + need + `) AS findings ORDER BY ` + orderBy(parts, nil) + ` LIMIT ` + strconv.Itoa(limit)
	if offset > 0 {
		sql += ` OFFSET ` + strconv.Itoa(offset)
	}
	return Statement{SQL: sql, Args: a.Vals}
}

// ScanEventTimesTable keeps, per tenant and scan, bounds of the event
// times of the scan's findings, which only ever widen (PostgreSQL; see
// its migration 00015).
const ScanEventTimesTable = "scan_event_times"
