package engine

import (
	"strconv"

	"github.com/posture-dev/posture/internal/store"
)

// Pages of the latest findings in an order other than insertion time
// (docs/decisions/0019-latest-pages-by-span.md).
//
// The sort indexes hold the whole history. Walking one testing each
// finding's scan reads, in an ascending order, the history before the
// first latest finding: a check's earlier findings (282 ms a page at ten
// million findings on PostgreSQL), every earlier event time (690 ms at a
// million, 3 s on SQLite). Reading every latest finding and sorting them
// is flat in the history but costs the whole current state (380 ms for
// 250,000). Instead, each latest scan's findings are bounded in the
// order's index, and only those ranges are read.
//
// ScanBoundsTable keeps, per scan, the first and last insertion time and
// event time of its findings.
//
// By check or severity: the index, (tenant, check_id, inserted_at, uid)
// or (tenant, severity_id, inserted_at, uid), holds each value's findings
// in insertion order. Within one value, the latest findings therefore
// lie in the ranges (value, the latest scans' insertion spans), which
// hold besides them only what other scans of the tenant wrote at the same
// time. The values are found one after the other, each from the previous
// one by one index descent (a skip scan), and only as many as the page
// needs: each value's latest findings are counted, up to the page's end,
// until the page is full. The page is then sorted from at most that many
// findings per value and span, so it does not depend on the order in
// which the statement's loops happen to return rows.
//
// By event time: a finding's event time is its scanner's, not the
// store's, and findings_time (tenant, event_time, uid) is read within the
// latest scans' event-time bounds.
//
// Either way, the ranges of scans written together, or reporting the same
// hours, are merged, so that each finding is read once.

// ScanBoundsTable keeps, per tenant and scan, bounds of the insertion
// times and event times of the scan's findings, which only ever widen
// (migration 00015 on PostgreSQL, 00013 on SQLite).
const ScanBoundsTable = "scan_bounds"

// latestSpanPage renders a page of the latest findings read within the
// latest scans' spans, when q is one: in an order whose sort index holds
// it up to id, by check, severity or event time, either way, with no
// filter whose own index bounds the rows better (a scan, an ingestion)
// and no search the trigram index answers.
func latestSpanPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) (Statement, bool) {
	if !q.Latest || q.ScanID != "" || q.IngestionID != "" || q.Delta != "" || (q.Search != "" && indexedSearch(q)) {
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

// spanPage is what the two kinds of span page share: the arguments, the
// tenant's placeholder, the condition every finding read must meet (q's
// filters and cursor, not the latest scans'), the offset (none after a
// cursor), the page's end, and the order.
type spanPage struct {
	d                   Dialect
	a                   *Args
	t, cond             string
	limit, offset, need int
	parts               []orderPart
}

func newSpanPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) *spanPage {
	p := &spanPage{d: d, a: NewArgs(d), limit: limit, parts: parts}
	p.t = p.a.Add(tenant)
	rest := q
	rest.Latest = false
	p.cond = FindingWhere(p.a, tenant, rest) + " AND " + currentRun(p.a, tenant)
	if q.After != nil {
		p.cond += " AND (" + p.a.keyset(parts, *q.After) + ")"
		offset = 0
	}
	p.offset, p.need = offset, offset+limit
	return p
}

// spans renders the CTEs "latest", the tenant's latest scans with the
// bounds (lo, hi) of ScanBoundsTable's columns first and last, and
// "spans", those ranges merged where they overlap.
func (p *spanPage) spans(first, last string) string {
	return `latest AS MATERIALIZED (
  SELECT b.scan_id, b.` + first + ` AS lo, b.` + last + ` AS hi
  FROM (SELECT DISTINCT scan_id FROM latest_scans WHERE tenant = ` + p.t + `) AS l
  JOIN ` + ScanBoundsTable + ` AS b ON b.tenant = ` + p.t + ` AND b.scan_id = l.scan_id
), spans AS MATERIALIZED (
  SELECT min(lo) AS lo, max(hi) AS hi FROM (
    SELECT lo, hi, sum(CASE WHEN lo > reach THEN 1 ELSE 0 END) OVER (ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS span FROM (
      SELECT lo, hi, max(hi) OVER (ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
      FROM latest) AS reaches) AS merged
  GROUP BY span
)`
}

// inSpan renders the findings of one span (the row "spans" of the
// statement) that match: the condition match (which bounds them in the
// span), a latest scan's and q's condition, the first need of them in
// order, which runs to the id: the index gives it up to uid, and findings
// of two latest scans can tie on every column but the id (one uid reported
// for two accounts at the same event time), so a LIMIT in the index's
// order alone cut such a run by insertion, listing one finding on two
// pages and never the other. PostgreSQL reads them in a lateral subquery; SQLite,
// which has none, as the rowids of a correlated one, named the index.
func (p *spanPage) inSpan(match, index, order, cols string) string {
	where := "tenant = " + p.t + " AND " + match + " AND " + p.cond
	if p.d.IndexedBy == nil {
		// An IN list of the CTE may become a join, which would read the
		// latest scans' findings through findings_scan, out of order.
		return "CROSS JOIN LATERAL (SELECT " + cols + " FROM findings WHERE " + where + " AND scan_id = ANY (ARRAY(SELECT scan_id FROM latest))" +
			" ORDER BY " + order + " LIMIT " + strconv.Itoa(p.need) + ") AS findings"
	}
	return "CROSS JOIN findings WHERE findings.rowid IN (SELECT rowid FROM findings AS inspan" + p.d.IndexedBy(index) + " WHERE " + where +
		" AND scan_id IN (SELECT scan_id FROM latest) ORDER BY " + order + " LIMIT " + strconv.Itoa(p.need) + ")"
}

// end renders the page's order, limit and offset.
func (p *spanPage) end() string {
	sql := ` ORDER BY ` + orderBy(p.parts, nil) + ` LIMIT ` + strconv.Itoa(p.limit)
	if p.offset > 0 {
		sql += ` OFFSET ` + strconv.Itoa(p.offset)
	}
	return sql
}

// latestKeyedPage renders a page by check or severity (see above).
func latestKeyedPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) Statement {
	p := newSpanPage(d, tenant, q, parts, limit, offset)
	col := parts[0].col
	var start string
	if q.After != nil {
		var v any = q.After.CheckID
		if col == "severity_id" {
			v = q.After.SeverityID
		}
		start = " AND " + col + " " + beyond(parts[0], false) + "= " + p.a.Add(v)
	}
	if q.CheckID != "" && col == "check_id" {
		// One value: the others would each be counted in vain.
		start += " AND check_id = " + p.a.Add(q.CheckID)
	}
	first := "min"
	if parts[0].desc {
		first = "max"
	}
	// next is the value after prev in the order (the first when prev is
	// empty), read from the order's index alone. The recursive step
	// repeats it (one index descent each time): SQLite reads the
	// recursive table only in the step's own FROM, so no subquery can
	// name the value once.
	next := func(prev string) string {
		w := "tenant = " + p.t + start
		if prev != "" {
			w += " AND " + col + " " + beyond(parts[0], false) + " " + prev
		}
		return "(SELECT " + first + "(" + col + ") FROM findings WHERE " + w + ")"
	}
	need := strconv.Itoa(p.need)
	// Within one value, the rest of the order, id included: findings of
	// several latest scans may tie on everything but the id (one uid in
	// two scans written together), and a LIMIT that cut such a run by the
	// index's order rather than the id kept the wrong ones.
	index, order := SortIndex(col), orderBy(parts[1:], nil)
	match := func(v string) string { return col + " = " + v + " AND inserted_at BETWEEN spans.lo AND spans.hi" }
	// counted counts value v's latest findings that match, up to need.
	// Without latest findings, no value is counted at all.
	counted := func(v string) string {
		return "(SELECT count(*) FROM (SELECT 1 FROM spans " + p.inSpan(match(v), index, order, "1 AS one") + " LIMIT " + need + ") AS counted)"
	}
	sql := `WITH RECURSIVE ` + p.spans("first_inserted", "last_inserted") + `, keys(k, n) AS (
  SELECT k, ` + counted("first.k") + ` FROM (SELECT ` + next("") + ` AS k) AS first WHERE k IS NOT NULL AND EXISTS (SELECT 1 FROM spans)
  UNION ALL
  SELECT ` + next("keys.k") + `, n + ` + counted(next("keys.k")) + ` FROM keys WHERE n < ` + need + ` AND ` + next("keys.k") + ` IS NOT NULL
)
SELECT ` + FindingColumns + ` FROM keys CROSS JOIN spans ` + p.inSpan(match("keys.k"), index, order, "*") + p.end()
	return Statement{SQL: sql, Args: p.a.Vals}
}

// latestTimedPage renders a page by event time (see above).
func latestTimedPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) Statement {
	p := newSpanPage(d, tenant, q, parts, limit, offset)
	sql := `WITH ` + p.spans("first_event", "last_event") + `
SELECT ` + FindingColumns + ` FROM spans ` +
		p.inSpan("event_time BETWEEN spans.lo AND spans.hi", SortIndex("event_time"), orderBy(parts, nil), "*") + p.end()
	return Statement{SQL: sql, Args: p.a.Vals}
}

// scanSpanned reports whether a page of q in order parts is read within
// its scan's insertion span (scanSpan): one scan's findings in insertion
// order, with no search the trigram index answers and not of the latest
// view, whose own reads take precedence.
func scanSpanned(q store.FindingQuery, parts []orderPart) bool {
	return q.ScanID != "" && !q.Latest && parts[0].col == "inserted_at" && !(q.Search != "" && indexedSearch(q))
}

// scanSpan renders "the finding was inserted within scan's insertion
// span", its bounds in ScanBoundsTable (none when the scan has no
// findings: the condition is then false).
func scanSpan(a *Args, tenant, scan string) string {
	bound := func(col string) string {
		return "(SELECT " + col + " FROM " + ScanBoundsTable + " WHERE tenant = " + a.Add(tenant) + " AND scan_id = " + a.Add(scan) + ")"
	}
	return "inserted_at BETWEEN " + bound("first_inserted") + " AND " + bound("last_inserted")
}
