package engine

import (
	"strconv"
	"strings"
	"time"
)

// Dialect is what differs in the query text of the engines.
type Dialect struct {
	// Param renders the n-th (1-based) bind parameter.
	Param func(n int) string
	// ILike is the case-insensitive LIKE operator.
	ILike string
	// Time is how a timestamp column's value is bound.
	Time func(time.Time) any
	// IndexedBy names the index to read with: SQLite's planner, which
	// costs a sort of every row under a LIMIT below an index read in order
	// when that index gives only the leading sort column, needs to be told;
	// PostgreSQL's needs no hint (nil).
	IndexedBy func(index string) string
	// SearchIndex renders a condition that narrows the rows to
	// candidates for containing probe (a SearchProbe, at least
	// store.MinSearchLength characters) from the trigram index; the LIKE
	// conditions on the whole term still decide.
	SearchIndex func(a *Args, probe string) string
	// Unindexed, when set, renders a column of an ORDER BY so that no
	// index gives its order. PostgreSQL's planner, which takes no hints,
	// is steered with it (see ownInsertionOrder); SQLite's is named the
	// index instead (IndexedBy).
	Unindexed func(col string) string
	// Unestimated, when set, renders a condition so that the planner does
	// not estimate it from statistics and takes it to keep half the rows.
	// A search tests each column after the index lookup of the same text
	// (searchConds): estimated apart, the two multiply into a share of the
	// findings far below the true one, and PostgreSQL then reads every
	// match of a common word to sort them rather than walking its order's
	// index until a page is full.
	Unestimated func(cond string) string
	// Unaffined, when set, renders a column read from a CTE so that the
	// value has no type affinity: SQLite seeks an index on the second and
	// later columns of a row value only when the value compared with each
	// has that column's affinity or none, and two columns of one type
	// compare with neither (NUMERIC for integers, BLOB for texts).
	Unaffined func(col string) string
	// SearchCandidatesFrom, when set, renders a FROM clause that reads
	// the findings the trigram index finds for probe one by one, in the
	// index's order, for grouped counts bounded by a count limit: SQLite
	// collects every candidate of a "rowid IN (…)" list (SearchIndex)
	// before it tests the first, a common word's tens of thousands, where
	// a join stops with the limit.
	// newest asks for the newest candidates first (the latest view's).
	SearchCandidatesFrom func(a *Args, probe string, newest bool) string
	// LatestFindings, when set, renders the FROM source of the latest
	// scans' rows of table (findings, or the summary by scan) as a loop
	// over the tenant's latest_scans that reads each scan's rows through
	// the table's (tenant, scan_id) key, under the table's name; the
	// dialect has no hint to name that index with (IndexedBy). perScan
	// ends each scan's statement (see latestFindings).
	LatestFindings func(a *Args, table, tenant, perScan string) string
}

// Postgres and SQLite are the two dialects. SQLite's "?NNN" numbered
// parameters let both share one builder; its LIKE is case-insensitive for
// ASCII only, which is what Search promises there.
var (
	Postgres = Dialect{Param: func(n int) string { return "$" + strconv.Itoa(n) }, ILike: "ILIKE",
		Time: func(t time.Time) any { return t }, SearchIndex: postgresSearch,
		Unindexed:      func(col string) string { return "(" + col + " || '')" },
		Unestimated:    func(cond string) string { return "CASE WHEN " + cond + " THEN true ELSE false END" },
		LatestFindings: latestFindings}
	SQLite = Dialect{Param: func(n int) string { return "?" + strconv.Itoa(n) }, ILike: "LIKE",
		Time: func(t time.Time) any { return t.UnixMicro() }, IndexedBy: func(index string) string { return " INDEXED BY " + index },
		SearchIndex: sqliteSearch, SearchCandidatesFrom: sqliteSearchCandidates,
		Unaffined: func(col string) string { return "+" + col }}
)

// latestFindings is PostgreSQL's source of the latest scans' rows: for
// each of the tenant's latest scans, its rows through the table's key led
// by (tenant, scan_id) (findings_scan for findings). A condition "scan_id
// IN (SELECT … latest_scans)" leaves the plan to the planner, which takes
// each scan for the average one: at a million findings in scans of 62,500
// it took four latest scans of 5,000 for a quarter of the tenant and read
// every finding (a parallel sequential scan, 450 ms for counts by
// severity). perScan ends each scan's statement: " OFFSET
// 0" keeps it from being merged into the statement, so no other condition
// can pick another index for it, and the filters then test the rows it
// reads, whose number is the current state's, whatever the history behind
// it; a page in insertion order passes its conditions, its order and its
// end instead, which findings_scan gives scan by scan (latestPage). A scan
// reported again under another account is the latest of two providers:
// DISTINCT reads it once.
func latestFindings(a *Args, table, tenant, perScan string) string {
	t := a.Add(tenant)
	return "(SELECT f.* FROM (SELECT DISTINCT scan_id FROM latest_scans WHERE tenant = " + t + ") AS l CROSS JOIN LATERAL (SELECT * FROM " + table + " WHERE tenant = " + t +
		" AND scan_id = l.scan_id" + perScan + ") AS f) AS " + table
}

// Args collects bind parameters while a statement is built.
type Args struct {
	d    Dialect
	Vals []any
}

// NewArgs starts a parameter list for dialect d.
func NewArgs(d Dialect) *Args { return &Args{d: d} }

// Add appends v and returns its placeholder.
func (a *Args) Add(v any) string {
	a.Vals = append(a.Vals, v)
	return a.d.Param(len(a.Vals))
}

func (a *Args) in(col string, vals []string, norm func(string) string) string {
	ps := make([]string, len(vals))
	for i, v := range vals {
		ps[i] = a.Add(norm(v))
	}
	return col + " IN (" + strings.Join(ps, ", ") + ")"
}
