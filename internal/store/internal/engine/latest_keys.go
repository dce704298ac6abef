package engine

import (
	"strconv"

	"github.com/posture-dev/posture/internal/store"
)

// A page of the latest findings sorted by check or severity (PostgreSQL).
//
// The order's index, (tenant, check_id, inserted_at, uid) or (tenant,
// severity_id, inserted_at, uid), holds each value's findings in insertion
// order, so a check's latest findings come after all its earlier ones:
// walking the index testing each finding's scan read a check's whole
// history before the first latest one (282 ms a page at ten million
// findings, 838 ms at a million for the ascending event-time order, which
// has no such cure and is not served here). Reading every latest finding
// and sorting them is flat in the history but costs the whole current
// state (380 ms for 250,000).
//
// Every finding of a scan was inserted between the first and the last of
// them, two reads of findings_scan (tenant, scan_id, inserted_at). Within
// one value of the sort column, the latest findings therefore lie in the
// index ranges (value, the scans' insertion spans), which hold besides
// them only what other scans of the tenant wrote at the same time. The
// spans of scans written together (one report of several accounts) are
// merged, so that each range is read once. The values themselves are
// found one after the other, each from the previous one by one index
// descent (a skip scan), and only as many as the page needs: each value's
// latest findings are counted, up to the page's end, until the page is
// full. The page is then sorted from at most that many findings per
// value, so it does not depend on the order in which the statement's
// loops happen to return rows.

// spanKeyed reports whether a page of q in order parts is read value by
// value over the latest scans' insertion spans (latestKeyedPage): the
// latest findings in an order whose index holds insertion time right after
// the sort column, either way, with no filter whose own index bounds the
// rows better (a scan, an ingestion) and no search the trigram index
// answers.
func spanKeyed(d Dialect, q store.FindingQuery, parts []orderPart) bool {
	if !q.Latest || d.LatestFindings == nil || q.ScanID != "" || q.IngestionID != "" || (q.Search != "" && indexedSearch(q)) {
		return false
	}
	if col := parts[0].col; col != "check_id" && col != "severity_id" {
		return false
	}
	_, ok := indexKey(parts)
	return ok
}

// latestKeyedPage renders the page of spanKeyed q (see above). need is
// the page's end: the findings a value may contribute.
func latestKeyedPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) Statement {
	a := NewArgs(d)
	t := a.Add(tenant)
	rest := q
	rest.Latest = false
	cond := FindingWhere(a, tenant, rest)
	col, desc := parts[0].col, parts[0].desc
	var start string
	if q.After != nil {
		cond += " AND (" + a.keyset(parts, *q.After) + ")"
		offset = 0
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
	need := strconv.Itoa(offset + limit)
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
), spans AS MATERIALIZED (
  SELECT min(lo) AS lo, max(hi) AS hi FROM (
    SELECT lo, hi, count(*) FILTER (WHERE lo > reach) OVER (ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS span FROM (
      SELECT lo, hi, max(hi) OVER (ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
      FROM latest WHERE lo IS NOT NULL) AS reaches) AS spans
  GROUP BY span
), keys(k, n) AS (
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
