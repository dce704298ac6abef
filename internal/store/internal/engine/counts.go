package engine

import (
	"slices"
	"strings"

	"github.com/posture-dev/posture/internal/store"
)

// countedFrom is the FROM source and the WHERE condition of a count of q's
// findings that no summary answers (a search, an ingestion). The latest
// findings are counted scan by scan through an index led by (tenant,
// scan_id), and every other condition, a search's too, tests the rows
// read: they are the current state, whose size does not grow with the
// history of scans behind it, where the facets index and the trigram index
// hold that history whole. A page can stop early in an order's index,
// where the latest findings come soon; a count cannot. SQLite is named its
// natural key; PostgreSQL is given a loop over the latest scans
// (Dialect.LatestFindings).
func countedFrom(d Dialect, a *Args, tenant string, q store.FindingQuery) (from, where string) {
	switch {
	case !q.Latest:
		return "findings", FindingWhere(a, tenant, q)
	case d.LatestFindings != nil:
		from = d.LatestFindings(a, "findings", tenant, " OFFSET 0")
		// The loop reads the latest scans' findings only. Their condition
		// repeated made the planner join latest_scans twice and read
		// each scan once per latest scan.
		q.Latest = false
		if q.Search != "" {
			return from, rowTestedWhere(a, tenant, q) + " AND " + currentRun(a, tenant)
		}
		return from, FindingWhere(a, tenant, q) + " AND " + currentRun(a, tenant)
	case q.Search != "" && indexedSearch(q):
		// SQLite's trigram index hands its candidates over one by one,
		// and the count stops at its limit: in the natural key's order
		// (by uid, within a scan) the matches of a common word come in
		// runs far apart, and testing the rows took 460 ms for a page's
		// count at a million findings, against 330 ms for the lookup.
		return "findings", FindingWhere(a, tenant, q)
	case d.IndexedBy != nil:
		from = "findings" + d.IndexedBy(naturalKeyIndex)
	default:
		from = "findings"
	}
	if q.Search != "" {
		return from, rowTestedWhere(a, tenant, q)
	}
	return from, FindingWhere(a, tenant, q)
}

// SummaryTable keeps, per tenant, the number of findings of each
// combination of CountDimensions' values. Triggers on findings keep it in
// step within the statement that changes a finding, so it is exact in every
// transaction's view. Groups whose findings all moved away stay at 0.
const SummaryTable = "finding_counts"

// ScanSummaryTable keeps, per tenant and scan, the number of findings of
// each combination of CountDimensions' values, kept by triggers as
// SummaryTable is. Counts of one scan or of the latest scans read it
// (store.FindingQuery.ScanSummarized).
const ScanSummaryTable = "scan_finding_counts"

// scanSummaryFrom renders the FROM source and the condition of q's counts
// over ScanSummaryTable: the summary dimensions' filters, and the scan or
// the tenant's latest scans, whose groups are read scan by scan as their
// findings are (countedFrom): planned from the estimates, PostgreSQL read
// every scan's groups of the tenant, testing each for the latest scans.
func scanSummaryFrom(d Dialect, a *Args, tenant string, q store.FindingQuery) (from, where string) {
	rest := q
	rest.Latest, rest.Muted = false, store.MutedAny
	from = ScanSummaryTable
	if q.Latest && d.LatestFindings != nil {
		from = d.LatestFindings(a, ScanSummaryTable, tenant, " OFFSET 0")
		return from, FindingWhere(a, tenant, rest) + " AND " + currentRun(a, tenant)
	}
	where = FindingWhere(a, tenant, rest)
	if q.Latest {
		where += " AND scan_id IN (SELECT scan_id FROM latest_scans WHERE tenant = " + a.Add(tenant) + ") AND " + currentRun(a, tenant)
	}
	return from, where
}

// findingCount renders the count of ListFindings: a sum over the summary
// when q.Summarized() (by scan when q.ScanSummarized()), otherwise a count
// of the matching findings that stops at q.CountLimit+1 of them when a
// limit is set, so that a filter matching millions costs what one matching
// ten thousand does.
func findingCount(d Dialect, tenant string, q store.FindingQuery) Statement {
	a := NewArgs(d)
	if q.Muted != store.MutedAny && (q.Summarized() || q.ScanSummarized()) {
		return mutedCount(d, a, tenant, q)
	}
	if q.Summarized() {
		where := FindingWhere(a, tenant, q)
		return Statement{SQL: `SELECT coalesce(sum(n), 0) FROM ` + SummaryTable + ` WHERE ` + where, Args: a.Vals}
	}
	if q.ScanSummarized() {
		from, where := scanSummaryFrom(d, a, tenant, q)
		return Statement{SQL: `SELECT coalesce(sum(n), 0) FROM ` + from + ` WHERE ` + where, Args: a.Vals}
	}
	from, where := countedFrom(d, a, tenant, q)
	if q.CountLimit > 0 {
		return Statement{SQL: `SELECT count(*) FROM (SELECT 1 FROM ` + from + ` WHERE ` + where + ` LIMIT ` + a.Add(q.CountLimit+1) + `) AS matching`,
			Args: a.Vals}
	}
	return Statement{SQL: `SELECT count(*) FROM ` + from + ` WHERE ` + where, Args: a.Vals}
}

// FindingCounts renders FindingCounts' statement: from the summary when
// q.Summarized() or the summary by scan when q.ScanSummarized() (one row
// per group, whatever the number of findings), else FindingCountsScan.
func FindingCounts(d Dialect, tenant string, q store.FindingQuery, by []string) (Statement, error) {
	q = CurrentQuery(q)
	if err := checkDimensions(by); err != nil {
		return Statement{}, err
	}
	a := NewArgs(d)
	var table, where string
	switch {
	case q.Muted != store.MutedAny && (q.Summarized() || q.ScanSummarized()):
		return mutedGroups(d, a, tenant, q, by), nil
	case q.Summarized():
		table, where = SummaryTable, FindingWhere(a, tenant, q)
	case q.ScanSummarized():
		table, where = scanSummaryFrom(d, a, tenant, q)
	default:
		return FindingCountsScan(d, tenant, q, by)
	}
	cols := strings.Join(by, ", ")
	return Statement{SQL: `SELECT ` + cols + `, sum(n) FROM ` + table + ` WHERE ` + where + ` GROUP BY ` + cols +
		` HAVING sum(n) > 0 ORDER BY ` + cols, Args: a.Vals}, nil
}

func checkDimensions(by []string) error {
	if len(by) == 0 {
		return Invalid("count findings by what? want one or more of %s", strings.Join(store.CountDimensions, ", "))
	}
	seen := map[string]bool{}
	for _, b := range by {
		if !slices.Contains(store.CountDimensions, b) {
			return Invalid("cannot count findings by %q: want one or more of %s", b, strings.Join(store.CountDimensions, ", "))
		}
		if seen[b] {
			return Invalid("%q is given twice to count findings by", b)
		}
		seen[b] = true
	}
	return nil
}

// FindingCountsScan groups the findings themselves: one GROUP BY over
// columns the findings_facets index covers, so that it reads the index,
// not the rows. It is what FindingCounts falls back to for filters the
// summary lacks, and what the summary's conformance test compares with.
func FindingCountsScan(d Dialect, tenant string, q store.FindingQuery, by []string) (Statement, error) {
	q = CurrentQuery(q)
	if err := checkDimensions(by); err != nil {
		return Statement{}, err
	}
	a := NewArgs(d)
	cols := strings.Join(by, ", ")
	bounded := q.CountLimit > 0 && !q.Summarized()
	var from, where string
	if bounded && d.SearchCandidatesFrom != nil && indexedSearch(q) {
		from = d.SearchCandidatesFrom(a, SearchProbe(q.Search), q.Latest)
		where = rowTestedWhere(a, tenant, q)
	} else {
		from, where = countedFrom(d, a, tenant, q)
		if d.IndexedBy != nil && q.Summarized() {
			// The grouped and filtered columns are all in findings_facets, so
			// counting reads that index alone; SQLite prefers an index in
			// GROUP BY order that makes it read every row.
			from += d.IndexedBy("findings_facets")
		}
	}
	if bounded {
		// Only the first CountLimit+1 matches found are grouped: the caller
		// reports the groups as lower bounds when their sum passes the
		// limit, as a listing does its count. They are taken in no order:
		// asked for the newest, PostgreSQL walked the tenant newest first
		// at 10M findings (97 ms for a common word) but at 1M read and
		// sorted every match (271 ms), where without an order it tests
		// the index's candidates only until it has the limit's.
		return Statement{SQL: `SELECT ` + cols + `, count(*) FROM (SELECT ` + cols + ` FROM ` + from + ` WHERE ` + where +
			` LIMIT ` + a.Add(q.CountLimit+1) + `) AS matching GROUP BY ` + cols + ` ORDER BY ` + cols, Args: a.Vals}, nil
	}
	return Statement{SQL: `SELECT ` + cols + `, count(*) FROM ` + from + ` WHERE ` + where + ` GROUP BY ` + cols + ` ORDER BY ` + cols,
		Args: a.Vals}, nil
}

// ScanGroups reads the rows of a FindingCounts statement grouped by n
// dimensions: n values, then the count.
func ScanGroups(rows Rows, n int) ([]store.FindingGroup, error) {
	out := []store.FindingGroup{}
	for rows.Next() {
		g := store.FindingGroup{Values: make([]string, n)}
		dest := make([]any, 0, n+1)
		for i := range g.Values {
			dest = append(dest, &g.Values[i])
		}
		if err := rows.Scan(append(dest, &g.Count)...); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// The summaries count every finding, muted or not. A count that leaves
// the muted findings out is the summary's less the muted findings', and a
// count of the muted findings alone is theirs: those are read through the
// tenant's marks, so the count costs the summary's groups and the marks,
// never the findings the summary stands for.

// summarized renders the summary's source and condition for q's filters
// (q.Summarized() or q.ScanSummarized()), whatever q.Muted says.
func summarized(d Dialect, a *Args, tenant string, q store.FindingQuery) (from, where string) {
	q.Muted = store.MutedAny
	if q.Summarized() {
		return SummaryTable, FindingWhere(a, tenant, q)
	}
	return scanSummaryFrom(d, a, tenant, q)
}

// mutedFindings renders the source and condition of the muted findings
// that match q's filters.
func mutedFindings(a *Args, tenant string, q store.FindingQuery) (from, where string) {
	q.Muted = store.MutedOnly
	return "findings", FindingWhere(a, tenant, q)
}

// mutedCount renders findingCount for a summarizable q with a Muted filter.
func mutedCount(d Dialect, a *Args, tenant string, q store.FindingQuery) Statement {
	if q.Muted == store.MutedOnly {
		from, where := mutedFindings(a, tenant, q)
		return Statement{SQL: `SELECT count(*) FROM ` + from + ` WHERE ` + where, Args: a.Vals}
	}
	from, where := summarized(d, a, tenant, q)
	mfrom, mwhere := mutedFindings(a, tenant, q)
	return Statement{SQL: `SELECT (SELECT coalesce(sum(n), 0) FROM ` + from + ` WHERE ` + where + `) - (SELECT count(*) FROM ` + mfrom + ` WHERE ` + mwhere + `)`,
		Args: a.Vals}
}

// mutedGroups renders FindingCounts for a summarizable q with a Muted filter.
func mutedGroups(d Dialect, a *Args, tenant string, q store.FindingQuery, by []string) Statement {
	cols := strings.Join(by, ", ")
	mfrom, mwhere := "", ""
	if q.Muted == store.MutedOnly {
		mfrom, mwhere = mutedFindings(a, tenant, q)
		return Statement{SQL: `SELECT ` + cols + `, count(*) FROM ` + mfrom + ` WHERE ` + mwhere + ` GROUP BY ` + cols + ` ORDER BY ` + cols, Args: a.Vals}
	}
	from, where := summarized(d, a, tenant, q)
	mfrom, mwhere = mutedFindings(a, tenant, q)
	return Statement{SQL: `SELECT ` + cols + `, sum(n) FROM (SELECT ` + cols + `, n FROM ` + from + ` WHERE ` + where +
		` UNION ALL SELECT ` + cols + `, -1 FROM ` + mfrom + ` WHERE ` + mwhere + `) AS g GROUP BY ` + cols + ` HAVING sum(n) > 0 ORDER BY ` + cols,
		Args: a.Vals}
}
