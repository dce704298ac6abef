package engine

import (
	"strconv"
	"strings"

	"github.com/posture-dev/posture/internal/store"
)

// bounded reports whether q names a scan, an ingestion or a check, asks
// for the latest scans or searches a text the trigram index can look up:
// each has an index that finds exactly its findings, a bounded set worth
// sorting. Any other filter matches a share of the whole tenant (a
// severity, a region), so the ordered index read until the page is full is
// the better plan.
func bounded(q store.FindingQuery) bool {
	return q.ScanID != "" || q.IngestionID != "" || q.CheckID != "" || q.Latest || q.Delta != "" || (q.Search != "" && indexedSearch(q))
}

// naturalKeyIndex is SQLite's name for the index of findings' UNIQUE
// (tenant, scan_id, uid) constraint.
const naturalKeyIndex = "sqlite_autoindex_findings_2"

// latestIndex is the hint that makes SQLite read the latest findings scan
// by scan through the natural key for a page: it cannot know that
// latest_scans holds one scan per provider, and otherwise walks every
// finding of the tenant through another index, testing each one's scan. A
// search the trigram index can answer is left to that index.
func latestIndex(d Dialect, q store.FindingQuery) string {
	if d.IndexedBy == nil || !q.Latest || (q.Search != "" && indexedSearch(q)) || latestWalk(q) {
		return ""
	}
	return d.IndexedBy(naturalKeyIndex)
}

// latestWalk reports whether SQLite finds a page of the latest findings
// by walking the order's index, testing each finding's scan, rather than
// reading every finding of the latest scans and sorting them: the latest
// scans are the newest of their providers, so in most orders their
// findings come soon, where the sort costs the whole current state (1.5 s
// for 250,000 findings at a million). A filter on a provider, a scan, an
// ingestion or a check, or a search the trigram index answers, bounds the
// rows its own index reads, and a provider's latest scan may be old.
func latestWalk(q store.FindingQuery) bool {
	return q.Latest && q.ScanID == "" && q.IngestionID == "" && q.CheckID == "" && q.ProviderUID == "" && q.Delta == "" &&
		len(q.ProviderType) == 0 && !(q.Search != "" && indexedSearch(q))
}

// ShortPageCount is the count a numbered page of rows findings already
// tells: a page shorter than its size (and not empty past the first) is the
// last, so offset + rows findings match, which is what the count statement
// would answer, exactly, under a count limit past them (the API's limits
// never end before the requested page). The stores then leave that statement out: for
// a rare search it repeats the trigram index's lookup, half the request. A
// page reached by cursor counts from the first page, which it does not see.
func ShortPageCount(q store.FindingQuery, rows int) (count int, known bool) {
	if q.After != nil {
		return 0, false
	}
	limit, offset := Limit(q.Page)
	if rows >= limit || (rows == 0 && offset > 0) || (q.CountLimit > 0 && offset+rows > q.CountLimit) {
		return 0, false
	}
	return offset + rows, true
}

// FindingList renders the two statements of ListFindings: the count of
// matching findings and the page. Both engines issue exactly these, and the
// query plan tests explain exactly these.
func FindingList(d Dialect, tenant string, q store.FindingQuery) (count, page Statement, err error) {
	q = CurrentQuery(q)
	parts, err := findingOrder(q.Sort)
	if err != nil {
		return Statement{}, Statement{}, err
	}
	count = findingCount(d, tenant, q)
	limit, offset := Limit(q.Page)
	if key, ok := indexKey(parts); ok && offset > 0 && q.After == nil && unfiltered(d, q) {
		return count, seekPage(d, tenant, parts, key, limit, offset), nil
	}
	if q.Latest && d.LatestFindings != nil && parts[0].col == "inserted_at" {
		return count, latestPage(d, tenant, q, parts, limit, offset), nil
	}
	if page, ok := latestSpanPage(d, tenant, q, parts, limit, offset); ok {
		return count, page, nil
	}
	a := NewArgs(d)
	where := FindingWhere(a, tenant, q)
	from := "findings" + latestIndex(d, q)
	if q.After != nil {
		where += " AND (" + a.keyset(parts, *q.After) + ")"
		offset = 0
	}
	switch {
	case d.IndexedBy != nil && (!bounded(q) || latestWalk(q)):
		// Without statistics on how selective a value is, SQLite sorts
		// every finding of the tenant; reading in order stops at the
		// page. A rare value makes that walk long, but never longer than
		// the sort would have read.
		from += d.IndexedBy(orderIndexes[parts[0].col])
	case d.IndexedBy != nil && scanSpanned(q, parts):
		// SQLite has no index of a scan's findings in insertion order
		// (PostgreSQL's findings_scan): through its natural key it read
		// and sorted every finding of the scan, 200 ms for one of 62,500.
		// The scan's insertion span (ScanBoundsTable) bounds them in
		// findings_inserted instead, beside what other scans wrote then.
		from += d.IndexedBy(orderIndexes["inserted_at"])
		where += " AND " + scanSpan(a, tenant, q.ScanID)
	}
	var render func(string) string
	if d.Unindexed != nil && ownInsertionOrder(q, parts) {
		render = func(col string) string {
			if col == "uid" {
				return d.Unindexed(col)
			}
			return col
		}
	}
	sql := `SELECT ` + FindingColumns + ` FROM ` + from + ` WHERE ` + where + ` ORDER BY ` + orderBy(parts, render) +
		` LIMIT ` + a.Add(limit)
	if offset > 0 {
		sql += ` OFFSET ` + a.Add(offset)
	}
	return count, Statement{SQL: sql, Args: a.Vals}, nil
}

// latestPage renders a page of the latest findings in insertion order
// (Dialect.LatestFindings): each latest scan's first offset+limit findings
// in the order, which findings_scan (tenant, scan_id, inserted_at) gives,
// then the page among them. A page then reads a few findings per scan
// where reading them all and sorting took 50 ms for 20,000.
func latestPage(d Dialect, tenant string, q store.FindingQuery, parts []orderPart, limit, offset int) Statement {
	a := NewArgs(d)
	rest := q
	rest.Latest = false
	var where string
	if q.Search != "" {
		where = rowTestedWhere(a, tenant, rest)
	} else {
		where = FindingWhere(a, tenant, rest)
	}
	where += " AND " + currentRun(a, tenant)
	if q.After != nil {
		where += " AND (" + a.keyset(parts, *q.After) + ")"
		offset = 0
	}
	// With uid hidden from the indexes, as for ownInsertionOrder, the
	// tenant's findings_inserted gives no more of the order than
	// findings_scan does, and the planner no longer walks the tenant's
	// history newest first testing each finding's scan.
	perScan := orderBy(parts, func(col string) string {
		if col == "uid" && d.Unindexed != nil {
			return d.Unindexed(col)
		}
		return col
	})
	order := orderBy(parts, nil)
	from := d.LatestFindings(a, "findings", tenant, " AND "+where+" ORDER BY "+perScan+" LIMIT "+a.Add(offset+limit))
	sql := `SELECT ` + FindingColumns + ` FROM ` + from + ` ORDER BY ` + order + ` LIMIT ` + a.Add(limit)
	if offset > 0 {
		sql += ` OFFSET ` + a.Add(offset)
	}
	return Statement{SQL: sql, Args: a.Vals}
}

// ownInsertionOrder reports whether q filters on a scan, an ingestion or
// a check, whose own index gives their findings in insertion order
// ((tenant, column, inserted_at), a check's then uid), in an order that
// starts with inserted_at. Only uid and id are then left to sort, among the findings
// of a batch. The tenant's findings_inserted gives that order up to uid,
// and PostgreSQL, costing a walk of it by how soon matching findings turn
// up on average, would read it newest first testing each finding: for an
// old scan, every finding written since (22.6 s at 10M findings). With
// uid hidden from the indexes, both leave the same to sort, and the
// filter's own index, which reads no other finding, is the cheaper.
func ownInsertionOrder(q store.FindingQuery, parts []orderPart) bool {
	return (q.ScanID != "" || q.IngestionID != "" || q.CheckID != "") && parts[0].col == "inserted_at"
}

// unfiltered reports whether q lists every finding of the tenant: its
// condition is the tenant's alone (every filter binds a value).
func unfiltered(d Dialect, q store.FindingQuery) bool {
	a := NewArgs(d)
	FindingWhere(a, "", q)
	return len(a.Vals) == 1
}

// indexKey returns the parts of an order that its first column's sort
// index holds, when they are all of the order but id: that column and its
// ties (SortIndexColumns), in one direction. Only id is then left to sort,
// among the findings of one key.
func indexKey(parts []orderPart) ([]orderPart, bool) {
	n := len(parts) - 1 // id ends every order and is in no sort index
	want := SortIndexColumns(parts[0].col)
	if n != len(want) {
		return nil, false
	}
	for i, p := range parts[:n] {
		if p.col != want[i] || p.desc != parts[0].desc {
			return nil, false
		}
	}
	return parts[:n], true
}

// seekPage renders a numbered page past the first of the whole tenant in
// an order its sort index gives up to id (key: the index's columns), so
// that the offset is skipped over index entries, not rows
// (docs/decisions/0015-deep-numbered-pages.md):
//
//   - last: the key of the page's first finding, the one at the offset in
//     the sort index, read from the index alone (none when the tenant has
//     fewer findings: the page is then empty);
//   - start: the page's first finding's position. The findings that share
//     its key (one uid's, in several scans) are ordered by id, and as many
//     of them are skipped as the offset leaves once the keys before the
//     page's (counted from the index alone too) are skipped. The count
//     reads the keys in the order under a LIMIT of the offset, which it
//     never reaches: the bound is the result of a subquery, which the
//     planner takes for a third of the table, and at ten million findings
//     it counted them with parallel workers (93 ms a page instead of a
//     few);
//   - the page: the limit findings from that position on, read as a
//     cursor page reads them, from an index seek to the key.
//
// Positions are compared as row values, which both planners seek an index
// to; the order runs one way throughout, so a row value is exact. The
// page's numbers are literals: PostgreSQL costs a LIMIT or OFFSET it
// cannot read (a bind parameter under a generic plan) as a tenth of the
// rows, and then chose to sort a third of the tenant.
func seekPage(d Dialect, tenant string, parts, key []orderPart, limit, offset int) Statement {
	a := NewArgs(d)
	t := a.Add(tenant)
	index := ""
	if d.IndexedBy != nil {
		index = d.IndexedBy(orderIndexes[key[0].col])
	}
	keyCols, cols := columns(key), columns(parts)
	// A row value read from a CTE, for a row-value comparison to seek an
	// index with (see Dialect.Unaffined).
	rowOf := func(cte string, ps []orderPart) string {
		vals := make([]string, len(ps))
		for i, p := range ps {
			vals[i] = p.col
			if i > 0 && d.Unaffined != nil {
				vals[i] = d.Unaffined(p.col)
			}
		}
		return `(SELECT ` + strings.Join(vals, `, `) + ` FROM ` + cte + `)`
	}
	var sameKey []string
	for _, p := range key {
		sameKey = append(sameKey, p.col+` = (SELECT `+p.col+` FROM last)`)
	}
	o := strconv.Itoa(offset)
	sql := `WITH last AS (SELECT ` + keyCols + ` FROM findings` + index + ` WHERE tenant = ` + t +
		` ORDER BY ` + orderBy(key, nil) + ` LIMIT 1 OFFSET ` + o + `),
start AS (SELECT ` + cols + ` FROM findings WHERE tenant = ` + t + ` AND ` + strings.Join(sameKey, ` AND `) +
		` ORDER BY ` + orderBy(parts, nil) + ` LIMIT 1 OFFSET (` + o + ` - (SELECT count(*) FROM (SELECT 1 FROM findings` + index +
		` WHERE tenant = ` + t + ` AND (` + keyCols + `) ` + beyond(key[0], true) + ` ` + rowOf("last", key) +
		` ORDER BY ` + orderBy(key, nil) + ` LIMIT ` + o + `) AS before)))
SELECT ` + FindingColumns + ` FROM findings` + index + ` WHERE tenant = ` + t +
		` AND (` + cols + `) ` + beyond(parts[0], false) + `= ` + rowOf("start", parts) +
		` ORDER BY ` + orderBy(parts, nil) + ` LIMIT ` + strconv.Itoa(limit)
	return Statement{SQL: sql, Args: a.Vals}
}

// Limit turns a page into LIMIT and OFFSET.
func Limit(p store.Page) (limit, offset int) {
	size := p.Size
	if size <= 0 {
		size = DefaultPageSize
	}
	n := p.Number
	if n < 1 {
		n = 1
	}
	return size, (n - 1) * size
}
