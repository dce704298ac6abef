package storetest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// indexedSearch reports whether q's search is long enough for the trigram
// index, so the store must look it up there.
func indexedSearch(q store.FindingQuery) bool {
	return utf8.RuneCountInString(q.Search) >= store.MinSearchLength
}

// sortColumns maps sort keys to the column a keyset page must seek on.
var sortColumns = map[string]string{"time": "event_time", "severity_id": "severity_id", "inserted_at": "inserted_at",
	"check_id": "check_id", "uid": "uid"}

// FirstSortColumn is the column a cursor page of s seeks on: its first
// sort key's (the store's default order starts with severity_id).
func (s QueryShape) FirstSortColumn() string {
	if len(s.Query.Sort) == 0 {
		return "severity_id"
	}
	return sortColumns[strings.TrimPrefix(s.Query.Sort[0], "-")]
}

// PlanProblems judges one statement's plan, as EXPLAIN QUERY PLAN
// (SQLite: its detail column, one line per node) or EXPLAIN (PostgreSQL:
// its text lines) gives it. page says whether the statement is the page of
// a listing (not its count). It returns what is wrong, or nothing.
//
// Wrong is whatever reads every finding, of the table or of the tenant:
//   - a full scan of findings (SQLite "SCAN findings", with or without an
//     index; PostgreSQL "Seq Scan on findings");
//   - for a listing, sorting every row of the tenant (SQLite "USE TEMP
//     B-TREE FOR ORDER BY", PostgreSQL a "Sort" node, when the rows are
//     found by the tenant alone or there is no filter; a sort of the right
//     part of the order, within equal leading values, is fine, and so is
//     sorting the rows an index found by a selective filter);
//   - for grouped counts and a listing's count whose filters the summary
//     covers (FindingQuery.Summarized), reading findings at all rather
//     than the finding summary: those cost the number of groups;
//   - for other grouped counts without a text search, reading the rows
//     rather than an index that covers the grouped and filtered columns;
//   - for a cursor page, not seeking the index to the cursor (no bound on
//     the first sort column in the index condition);
//   - for a search the trigram index can answer, testing the text on rows
//     found otherwise rather than looking it up in findings_search;
//   - looking up in the trigram index a text longer than a search's probe
//     (engine.SearchProbe, its last characters): a whole long text reads
//     the long lists of its common trigrams (PostgreSQL's index
//     conditions show the text; SQLite's plan does not, and the engine's
//     TestSearchLooksUpTheProbe holds its MATCH);
//   - for the latest findings, not reading them from latest_scans and the
//     (tenant, scan_id) key.
func PlanProblems(s QueryShape, page bool, plan []string) []string {
	var problems []string
	text := strings.Join(plan, "\n")
	if regexp.MustCompile(`(?m)^\s*(->\s*)?(SCAN findings\b|Seq Scan on findings\b|Parallel Seq Scan on findings\b)`).MatchString(text) {
		problems = append(problems, "reads every row of findings (full scan)")
	}
	sorts := regexp.MustCompile(`(?m)^\s*(->\s*)?(USE TEMP B-TREE FOR ORDER BY|Sort\s+\()`).MatchString(text)
	tenantOnly := regexp.MustCompile(`(?m)(SEARCH findings USING (COVERING )?INDEX \w+ \(tenant=\?\)$|Index Cond: \(tenant = '[^']*'::text\)$)`).MatchString(text)
	if page && sorts && (s.Ordered || tenantOnly) {
		problems = append(problems, "sorts every finding of the tenant instead of reading an index in order")
	}
	// An ingestion can hold a large share of a tenant: its findings are read
	// in the default order from the ingestion's index, leaving at most the
	// tie-breakers to sort, never the whole ingestion (nor the tenant).
	if page && s.Query.IngestionID != "" && slices.Equal(s.Query.Sort, apiDefaultSort) && !s.Query.Latest {
		if !regexp.MustCompile(`(findings USING (COVERING )?INDEX findings_ingestion|Index (Only )?Scan (Backward )?using findings_ingestion on findings)`).MatchString(text) ||
			regexp.MustCompile(`(?m)(USE TEMP B-TREE FOR ORDER BY|^\s*(->\s*)?Sort\s+\()`).MatchString(text) {
			problems = append(problems, "does not read the ingestion's findings in insertion order from findings_ingestion")
		}
	}
	// The severity and check indexes end in uid, so an unfiltered order on
	// either, either way, leaves only id to sort within equal uids: a sort
	// of whole runs of one severity or check grows with the tenant.
	if col := s.FirstSortColumn(); page && s.Ordered && !s.Query.Latest && (col == "severity_id" || col == "check_id") {
		if regexp.MustCompile(`(?m)USE TEMP B-TREE FOR (RIGHT PART|LAST \d+ TERMS) OF ORDER BY`).MatchString(text) ||
			(strings.Contains(text, "Incremental Sort") && !regexp.MustCompile(`Presorted Key: \w+, uid\b`).MatchString(text)) {
			problems = append(problems, "sorts the runs of equal "+col+" values instead of reading an index that ends in uid in the order's direction")
		}
	}
	counting := s.By != nil || !page
	readsFindings := regexp.MustCompile(`(?m)(\bfindings USING|\bon findings\b|\bSCAN findings\b)`).MatchString(text)
	// Through its key, which starts with the tenant: the tenant's groups, not every tenant's.
	readsSummary := regexp.MustCompile(`(?m)(SEARCH finding_counts USING PRIMARY KEY \(tenant=\?|Index (Only )?Scan using \w+ on finding_counts)`).MatchString(text)
	switch {
	case counting && s.Query.Summarized():
		if readsFindings || !readsSummary {
			problems = append(problems, "counts from the findings, not from the finding summary (finding_counts)")
		}
	case s.By != nil && s.Query.Search == "" && !s.Query.Latest &&
		!regexp.MustCompile(`(?m)(SEARCH findings USING COVERING INDEX|Index Only Scan using \w+ on findings)`).MatchString(text):
		problems = append(problems, "counts from the rows, not from an index covering the grouped columns")
	}
	searchIndex := regexp.MustCompile(`(?m)(SCAN findings_search VIRTUAL TABLE INDEX|Bitmap Index Scan on findings_search\b)`).MatchString(text)
	if indexedSearch(s.Query) && !s.Query.Latest && !searchIndex {
		problems = append(problems, "tests the search text on the rows instead of looking it up in findings_search")
	}
	for _, p := range indexPatterns(text) {
		if utf8.RuneCountInString(p) > engine.SearchProbeLength {
			problems = append(problems, fmt.Sprintf("looks up %q in the trigram index: more than the last %d characters of the search", p, engine.SearchProbeLength))
			break
		}
	}
	if s.Query.Latest && !regexp.MustCompile(`(?m)^\s*(->\s*)?(SEARCH|Index Scan using \w+ on|Index Only Scan using \w+ on|Bitmap Heap Scan on) latest_scans\b`).MatchString(text) {
		problems = append(problems, "does not read latest_scans by its key")
	}
	// The latest findings are found scan by scan, or, for a search, may be
	// the matches the search index found.
	if s.Query.Latest && !(indexedSearch(s.Query) && searchIndex) &&
		!regexp.MustCompile(`(SEARCH findings USING (COVERING )?INDEX sqlite_autoindex_findings_2 \(tenant=\? AND scan_id=\?|Index Cond: \(\(tenant = [^)]*\) AND \(scan_id = )`).MatchString(text) {
		problems = append(problems, "does not read the latest scans' findings by (tenant, scan_id)")
	}
	// A cursor page of the latest findings, or of a search, filters the
	// rows its index found, which are bounded by the current state or by
	// the matches, not by the tenant's history.
	if s.Query.After != nil && page && !s.Query.Latest && !indexedSearch(s.Query) {
		col := regexp.QuoteMeta(s.FirstSortColumn())
		if !regexp.MustCompile(`(SEARCH findings USING (COVERING )?INDEX \w+ \(tenant=\? AND ` + col + `[<>]\?\))|Index Cond: .*\(?` + col + ` [<>]=? `).MatchString(text) {
			problems = append(problems, "does not seek the index to the cursor (no bound on "+s.FirstSortColumn()+" in the index condition)")
		}
	}
	return problems
}

// The ILIKE patterns of PostgreSQL's index conditions, each a string
// literal (a quote in it doubled) of a LIKE pattern (escapes: backslash).
var (
	indexCondExpr    = regexp.MustCompile(`(?m)^\s*Index Cond: .*$`)
	indexPatternExpr = regexp.MustCompile(`~~\* '((?:[^']|'')*)'`)
	likeEscapeExpr   = regexp.MustCompile(`\\(.)`)
)

// indexPatterns lists the texts that plan's index conditions look up with
// ILIKE, without the surrounding wildcards, the string quoting and LIKE's
// escapes: what the trigram index is asked for.
func indexPatterns(plan string) []string {
	var out []string
	for _, cond := range indexCondExpr.FindAllString(plan, -1) {
		for _, m := range indexPatternExpr.FindAllStringSubmatch(cond, -1) {
			p := strings.ReplaceAll(m[1], "''", "'")
			p = strings.TrimSuffix(strings.TrimPrefix(p, "%"), "%")
			out = append(out, likeEscapeExpr.ReplaceAllString(p, "$1"))
		}
	}
	return out
}

// CheckPlans explains, through explain, every statement the store issues
// for each documented query shape in tenant-a of s, and fails t on each
// plan that PlanProblems finds reading every finding. Each engine's test
// supplies only how to ask its database for a plan.
func CheckPlans(t *testing.T, s store.Store, dialect engine.Dialect, explain func(t *testing.T, st engine.Statement) []string) {
	ctx := context.Background()
	type stmt struct {
		st   engine.Statement
		page bool
	}
	for _, shape := range QueryShapes() {
		t.Run(shape.Name, func(t *testing.T) {
			shape, err := shape.Placed(ctx, s, "tenant-a")
			if err != nil {
				t.Fatal(err)
			}
			var stmts []stmt
			if shape.By != nil {
				st, err := engine.FindingCounts(dialect, "tenant-a", shape.Query, shape.By)
				if err != nil {
					t.Fatal(err)
				}
				stmts = append(stmts, stmt{st, false})
			} else {
				count, page, err := engine.FindingList(dialect, "tenant-a", shape.Query)
				if err != nil {
					t.Fatal(err)
				}
				stmts = append(stmts, stmt{count, false}, stmt{page, true})
			}
			for _, x := range stmts {
				plan := explain(t, x.st)
				if p := PlanProblems(shape, x.page, plan); len(p) > 0 {
					t.Errorf("%s\n%s\nplan:\n  %s", strings.Join(p, "; "), x.st.SQL, strings.Join(plan, "\n  "))
				}
			}
		})
	}
}

// WritePlanFindings stores PlanFindings(3000) for tenant-a and tenant-b, the
// table CheckPlans explains its statements over, with their scans: seven
// accounts' scans are the latest (store.FindingQuery.Latest), a few percent
// of the findings, as the current state is of a history of scans.
func WritePlanFindings(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	fs := PlanFindings(3000)
	var scans []store.Scan
	for k := range planScans {
		scans = append(scans, store.Scan{ID: fmt.Sprintf("scan-%d", k), ProviderType: "aws",
			ProviderUID: fmt.Sprintf("%012d", 111111111111*(k%7+1)), Trigger: "imported"})
	}
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		if err := s.StartRun(ctx, tenant, "ing-1", 1, len(fs)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBatch(ctx, tenant, "ing-1", 1, store.Batch{Findings: fs, Scans: scans}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, tenant, "ing-1", 1, store.Outcome{Status: store.RunSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
}
