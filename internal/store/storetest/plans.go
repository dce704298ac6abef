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

// spanColumns are, for each order a page of the latest findings reads
// within the latest scans' spans, the time the spans are of.
var spanColumns = map[string]string{"check_id": "inserted_at", "severity_id": "inserted_at", "event_time": "event_time"}

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
//   - for a cursor page, and a numbered page past the first of an
//     unfiltered listing, not seeking the index to the page's first
//     finding (no bound on the sort index's columns in the index
//     condition of the rows read);
//   - for a numbered page past the first of an unfiltered listing, skipping
//     the offset over rows (reading the tenant's rows, found by the tenant
//     alone) rather than over the entries of the sort's index alone;
//   - for an unfiltered order, sorting the findings that share a value of
//     the first sort key (a severity, a batch's insertion time) by their
//     tie-breakers: every sort index holds them, up to uid;
//   - for a scan, an ingestion or a check in the default order, not
//     reading its own findings from its index, or for a scan on SQLite
//     within its insertion span (and, for an ingestion or a check,
//     sorting them all rather than reading them in insertion order);
//   - for a search the trigram index can answer, testing the text on rows
//     found otherwise rather than looking it up in findings_search;
//   - looking up in the trigram index a text longer than a search's probe
//     (engine.SearchProbe, its last characters): a whole long text reads
//     the long lists of its common trigrams (PostgreSQL's index
//     conditions show the text; SQLite's plan does not, and the engine's
//     TestSearchLooksUpTheProbe holds its MATCH);
//   - for the latest findings, not reading them from latest_scans and the
//     (tenant, scan_id) key, or, for a count, looking a search up in the
//     trigram index, which holds the whole history's matches;
//   - for the resolved findings (delta resolved), not reading them from
//     resolved_findings by its key and each finding by its id: the set is
//     the failing findings of the runs the current ones replaced, bounded
//     by the current state, not by the history;
//   - for a page of the latest findings by check, severity or event time,
//     not reading them within the latest scans' spans of insertion or
//     event time (the history before them otherwise comes first).
func PlanProblems(s QueryShape, page bool, plan []string) []string {
	var problems []string
	text := strings.Join(plan, "\n")
	if regexp.MustCompile(`(?m)^\s*(->\s*)?(SCAN findings\b|Seq Scan on findings\b|Parallel Seq Scan on findings\b)`).MatchString(text) {
		problems = append(problems, "reads every row of findings (full scan)")
	}
	sorts := sortsRows(plan)
	// Read within the latest scans' spans of insertion or event time
	// (engine.latestSpanPage): the rows of the spans, not the tenant's.
	spanCol := spanColumns[s.FirstSortColumn()]
	spanRead := spanCol != "" && (regexp.MustCompile(`(?m)Index Scan (Backward )?using \w+ on findings\b.*\n\s+Index Cond: \(.*\(`+spanCol+` >= \w+\.lo\) AND \(`+spanCol+` <= \w+\.hi\)\)$`).MatchString(text) ||
		regexp.MustCompile(`SEARCH inspan USING INDEX \w+ \(tenant=\?( AND \w+=\?)* AND `+spanCol+`>\? AND `+spanCol+`<\?\)`).MatchString(text))
	// Found by the tenant alone: an index condition on the tenant only, or
	// a bitmap of the tenant's rows not ANDed with a selective one.
	tenantOnly := regexp.MustCompile(`(?m)(SEARCH findings USING (COVERING )?INDEX \w+ \(tenant=\?\)$|(Index|Index Only|Bitmap Heap) Scan .*on findings\b.*\n\s+(Index|Recheck) Cond: \(tenant = '[^']*'::text\)$)`).MatchString(text)
	if page && sorts && (s.Ordered || (tenantOnly && !spanRead)) {
		problems = append(problems, "sorts every finding of the tenant instead of reading an index in order")
	}
	// An ingestion or a check can hold a large share of a tenant: its
	// findings are read in the default order from its own index, leaving
	// at most the tie-breakers to sort, never all of them (nor the tenant).
	if page && slices.Equal(s.Query.Sort, apiDefaultSort) && !s.Query.Latest {
		for _, f := range []struct{ value, what, index string }{
			{s.Query.IngestionID, "the ingestion's", "findings_ingestion"},
			{s.Query.CheckID, "the check's", "findings_check_order"},
		} {
			if f.value == "" {
				continue
			}
			if !regexp.MustCompile(`(findings USING (COVERING )?INDEX `+f.index+`\b|Index (Only )?Scan (Backward )?using `+f.index+` on findings)`).MatchString(text) || sorts {
				problems = append(problems, "does not read "+f.what+" findings in insertion order from "+f.index)
			}
		}
	}
	// An old scan's findings lie at the far end of the tenant's insertion
	// order: walking it newest first, testing each finding for the scan,
	// reads every finding written since. They are read from an index led
	// by (tenant, scan_id) instead (PostgreSQL's findings_scan, which gives
	// them in insertion order), or on SQLite, which has no such index, from
	// findings_inserted within the scan's insertion span (engine.scanSpan).
	if page && s.Query.ScanID != "" && slices.Equal(s.Query.Sort, apiDefaultSort) && !s.Query.Latest {
		byScan := regexp.MustCompile(`(SEARCH findings USING (COVERING )?INDEX \w+ \(tenant=\? AND scan_id=\?|Index Cond: \(\(tenant = '[^']*'::text\) AND \(scan_id = )`).MatchString(text) &&
			!strings.Contains(text, "findings_inserted")
		inSpan := regexp.MustCompile(`SEARCH findings USING INDEX findings_inserted \(tenant=\? AND inserted_at>\? AND inserted_at<\?\)`).MatchString(text)
		if !byScan && !inSpan {
			problems = append(problems, "does not read the scan's findings from an index on (tenant, scan_id) or within the scan's insertion span")
		}
	}
	// Every sort index holds its column's tie-breakers up to uid, so an
	// unfiltered order, either way, leaves only id to sort within equal
	// uids: a sort of whole runs of one value (a severity, a check, a
	// batch's insertion time) by the tie-breakers grows with the tenant.
	if col := s.FirstSortColumn(); page && s.Ordered && !s.Query.Latest {
		if regexp.MustCompile(`(?m)USE TEMP B-TREE FOR (RIGHT PART|LAST \d+ TERMS) OF ORDER BY`).MatchString(text) || !presortedToUID(text) {
			problems = append(problems, "sorts the runs of equal "+col+" values instead of reading an index that holds the tie-breakers in the order's direction")
		}
	}
	// A numbered page past the first skips its offset. Over rows, each
	// skipped finding is a read of its row, so a deep page reads thousands;
	// over the entries of the sort's index alone it reads keys, and the page
	// then seeks its first finding's key.
	if page && s.Ordered && s.Query.After == nil && s.Query.Page.Number > 1 {
		index := engine.SortIndex(s.FirstSortColumn())
		if !regexp.MustCompile(`(SEARCH findings USING COVERING INDEX `+index+` \(tenant=\?\)|Index Only Scan (Backward )?using `+index+` on findings)`).MatchString(text) ||
			readsTenantRows(text) {
			problems = append(problems, "skips the offset over the tenant's rows instead of over the entries of "+index+" alone")
		}
	}
	counting := s.By != nil || !page
	readsFindings := regexp.MustCompile(`(?m)(\bfindings USING|\bon findings\b|\bSCAN findings\b)`).MatchString(text)
	// Through its key, which starts with the tenant: the tenant's groups, not every tenant's.
	readsSummary := regexp.MustCompile(`(?m)(SEARCH finding_counts USING PRIMARY KEY \(tenant=\?|Index (Only )?Scan using \w+ on finding_counts)`).MatchString(text)
	// The summary by scan, through its key: the tenant's and the scans' groups.
	readsScanSummary := regexp.MustCompile(`(?m)(SEARCH scan_finding_counts USING PRIMARY KEY \(tenant=\? AND scan_id=\?|Index (Only )?Scan using \w+ on scan_finding_counts\b.*\n\s+Index Cond: \(\(tenant = '[^']*'::text( COLLATE "C")?\) AND \(scan_id = )`).MatchString(text)
	scanSummarized := counting && s.Query.ScanSummarized()
	// Muted findings are read through the tenant's marks (finding_mutes'
	// key) and each one's row by id: the count costs the marks, and one
	// that leaves them out also the summary's groups.
	mutedThroughMarks := regexp.MustCompile(`(?m)(SEARCH (finding_mutes|\w+) USING (COVERING )?INDEX sqlite_autoindex_finding_mutes_1 \(tenant=\?|Index (Only )?Scan using finding_mutes_pkey on finding_mutes)`).MatchString(text) &&
		regexp.MustCompile(`(?m)(SEARCH findings USING INDEX sqlite_autoindex_findings_1 \(id=\?\)|Index Scan using findings_pkey on findings)`).MatchString(text)
	mutedSummarized := counting && s.Query.Muted != store.MutedAny && (s.Query.Summarized() || s.Query.ScanSummarized())
	switch {
	case mutedSummarized:
		if !mutedThroughMarks {
			problems = append(problems, "counts the muted findings without reading them through their marks (finding_mutes) and their ids")
		}
		if s.Query.Muted == store.MutedExcluded && !readsSummary && !readsScanSummary {
			problems = append(problems, "counts the unmuted findings without the finding summary")
		}
	case counting && s.Query.Summarized():
		if readsFindings || !readsSummary {
			problems = append(problems, "counts from the findings, not from the finding summary (finding_counts)")
		}
	case scanSummarized:
		if readsFindings || !readsScanSummary {
			problems = append(problems, "counts from the findings, not from the finding summary by scan (scan_finding_counts)")
		}
	case s.By != nil && s.Query.Search == "" && !s.Query.Latest && s.Query.ScanID == "" &&
		!regexp.MustCompile(`(?m)(SEARCH findings USING COVERING INDEX|Index Only Scan using \w+ on findings)`).MatchString(text):
		problems = append(problems, "counts from the rows, not from an index covering the grouped columns")
	}
	searchIndex := regexp.MustCompile(`(?m)(SCAN findings_search VIRTUAL TABLE INDEX|Bitmap Index Scan on findings_search\b)`).MatchString(text)
	if indexedSearch(s.Query) && !s.Query.Latest && !searchIndex {
		problems = append(problems, "tests the search text on the rows instead of looking it up in findings_search")
	}
	// Grouped counts bounded by a limit stop at it only if the candidates
	// come one by one: SQLite collects an IN list's whole first.
	if s.By != nil && s.Query.CountLimit > 0 && indexedSearch(s.Query) &&
		regexp.MustCompile(`(?m)LIST SUBQUERY \d+\n\s*SCAN findings_search VIRTUAL TABLE`).MatchString(text) {
		problems = append(problems, "collects every candidate of the search into a list before the count's limit applies")
	}
	for _, p := range indexPatterns(text) {
		if utf8.RuneCountInString(p) > engine.SearchProbeLength {
			problems = append(problems, fmt.Sprintf("looks up %q in the trigram index: more than the last %d characters of the search", p, engine.SearchProbeLength))
			break
		}
	}
	// The resolved findings are not the latest scans': they are read from
	// their own table, and each finding by its id.
	resolved := s.Query.Latest && s.Query.Delta == engine.DeltaResolved
	if resolved && !regexp.MustCompile(`(SEARCH resolved_findings USING (COVERING )?INDEX \w+ \(tenant=\?|Index (Only )?Scan using \w+ on resolved_findings\b.*\n\s+Index Cond: \(tenant = )`).MatchString(text) {
		problems = append(problems, "does not read the resolved findings from resolved_findings by its key")
	}
	if resolved && !regexp.MustCompile(`(SEARCH findings USING INDEX \w+ \(id=\?\)|Index Scan using findings_pkey on findings\b.*\n\s+Index Cond: \(id = )`).MatchString(text) {
		problems = append(problems, "does not read each resolved finding by its id")
	}
	if s.Query.Latest && !resolved && !regexp.MustCompile(`(?m)^\s*(->\s*)?(SEARCH|Index Scan using \w+ on|Index Only Scan using \w+ on|Bitmap Heap Scan on) latest_scans\b`).MatchString(text) {
		problems = append(problems, "does not read latest_scans by its key")
	}
	// The latest findings are found scan by scan, or, for a search, may be
	// the matches the search index found; but a count on PostgreSQL, whose
	// index hands over every scan's matches at once, reads the latest
	// scans' findings and tests the search on them: the current state is
	// bounded, a common word's matches in the whole history are not.
	if s.Query.Latest && counting && regexp.MustCompile(`Bitmap Index Scan on findings_search\b`).MatchString(text) {
		problems = append(problems, "counts the search's matches in findings_search, every scan's, instead of testing the latest scans' findings")
	}
	// SQLite may find a page of them by walking the page's order index,
	// testing each finding's scan (engine.latestWalk): the latest scans'
	// findings are the newest of their providers and come soon.
	walksOrder := page && regexp.MustCompile(`SEARCH findings USING (COVERING )?INDEX `+engine.SortIndex(s.FirstSortColumn())+` \(tenant=\?`).MatchString(text)
	if s.Query.Latest && !resolved && !scanSummarized && !mutedSummarized && !walksOrder && !spanRead && !(indexedSearch(s.Query) && searchIndex && !(counting && regexp.MustCompile(`Bitmap Index Scan on findings_search\b`).MatchString(text))) &&
		!regexp.MustCompile(`(SEARCH findings USING (COVERING )?INDEX sqlite_autoindex_findings_2 \(tenant=\? AND scan_id=\?|Index Cond: \(\(tenant = [^)]*\) AND \(scan_id = )`).MatchString(text) {
		problems = append(problems, "does not read the latest scans' findings by (tenant, scan_id)")
	}
	// A page of the latest findings by check, severity or event time reads
	// the order's index (or a filter's) within the latest scans' spans
	// (engine.latestSpanPage): by check or severity each value's findings
	// come in insertion order, the latest ones after the value's whole
	// history, and an event time is the scanner's, so the latest findings
	// may lie anywhere in findings_time.
	if col := s.FirstSortColumn(); page && s.Query.Latest && spanColumns[col] != "" && s.Query.ScanID == "" &&
		s.Query.IngestionID == "" && !indexedSearch(s.Query) && !spanRead {
		problems = append(problems, "does not read the latest findings within the latest scans' "+spanColumns[col]+" spans")
	}
	// A cursor page, and a numbered page past the first once it has found
	// its first finding's key, read rows from an index seek to that key:
	// the first sort column and its tie-breakers up to uid, which its sort
	// index holds. A seek on the first column alone starts at the first
	// finding of its value (a severity's, a batch's) and reads every one
	// up to the key.
	// A cursor page of the latest findings, or of a search, filters the
	// rows its index found, which are bounded by the current state or by
	// the matches, not by the tenant's history.
	cursor := s.Query.After != nil && !s.Query.Latest && !indexedSearch(s.Query)
	if col := s.FirstSortColumn(); page && (cursor || (s.Ordered && s.Query.Page.Number > 1)) && !seeksKey(col, text) {
		problems = append(problems, "does not seek the index to the page's first finding (no bound on ("+strings.Join(engine.SortIndexColumns(col), ", ")+") in the index condition of the rows read)")
	}
	// PostgreSQL plans parallel workers for what it expects to read much
	// of: a page or count of a bounded number of findings never needs
	// them, and their start alone costs more than such a read.
	if regexp.MustCompile(`(?m)^\s*(->\s*)?Gather\b`).MatchString(text) {
		problems = append(problems, "reads with parallel workers (Gather): the planner expects to read a large share of the findings")
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

// sortLine is a sort of rows: SQLite's temporary b-tree for an ORDER BY,
// PostgreSQL's Sort node (an Incremental Sort, within equal leading
// values, is not one).
var sortLine = regexp.MustCompile(`^\s*(->\s*)?(USE TEMP B-TREE FOR ORDER BY|Sort\s+\()`)

// sortsRows reports whether plan sorts rows other than the findings of one
// uid (see sortsOneUID).
func sortsRows(plan []string) bool {
	for i, line := range plan {
		if sortLine.MatchString(line) && !sortsOneUID(plan, i) {
			return true
		}
	}
	return false
}

var (
	sqliteOneUID = regexp.MustCompile(`SEARCH findings USING (COVERING )?INDEX \w+ \(tenant=\?( AND \w+=\?)* AND uid=\?\)`)
	pgIndexScan  = regexp.MustCompile(`->\s+Index (Only )?Scan (Backward )?using \w+ on findings\b`)
	pgOneUID     = regexp.MustCompile(`Index Cond: .*\(uid = `)
)

// sortsOneUID reports whether the sort at plan[i] orders rows found by
// equality on uid: the findings of one finding in several scans, which
// is how a numbered page orders by id the findings that share its first
// finding's key. Plans are indented by depth: SQLite's sort is a sibling
// of the read it sorts, PostgreSQL's Sort the parent of its input.
func sortsOneUID(plan []string, i int) bool {
	depth := indent(plan[i])
	if strings.Contains(plan[i], "USE TEMP B-TREE") {
		for j := i - 1; j >= 0 && indent(plan[j]) >= depth; j-- {
			if indent(plan[j]) == depth && sqliteOneUID.MatchString(plan[j]) {
				return true
			}
		}
		return false
	}
	for j := i + 1; j < len(plan) && indent(plan[j]) > depth; j++ {
		if !strings.Contains(plan[j], "->") {
			continue
		}
		if !pgIndexScan.MatchString(plan[j]) {
			return false
		}
		for k := j + 1; k < len(plan) && indent(plan[k]) > indent(plan[j]) && !strings.Contains(plan[k], "->"); k++ {
			if pgOneUID.MatchString(plan[k]) {
				return true
			}
		}
		return false
	}
	return false
}

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

var (
	presortedKey = regexp.MustCompile(`(?m)Presorted Key: (.*)$`)
	endsInUID    = regexp.MustCompile(`(^|[ .])uid$`)
)

// presortedToUID reports whether every incremental sort of a PostgreSQL
// plan starts from rows already ordered up to uid, leaving only id.
func presortedToUID(text string) bool {
	for _, keys := range presortedKey.FindAllStringSubmatch(text, -1) {
		if !endsInUID.MatchString(keys[1]) {
			return false
		}
	}
	return true
}

// seeksKey reports whether a plan reads findings' rows from an index seek
// to a position of the order whose first sort column is col: a bound on
// the columns of col's sort index (engine.SortIndexColumns), or on uid
// for the uid order.
func seeksKey(col, text string) bool {
	cols := engine.SortIndexColumns(col)
	sqlite := `\(` + strings.Join(cols, ",") + `\)[<>]\(` + strings.TrimSuffix(strings.Repeat(`\?,`, len(cols)), ",") + `\)`
	pg := `ROW\(` + strings.Join(cols, ", ") + `\) [<>]=? `
	if col == "uid" {
		sqlite, pg = `uid[<>]\?`, `\(uid [<>]=? `
	}
	return regexp.MustCompile(`(SEARCH findings USING INDEX \w+ \(tenant=\? AND ` + sqlite + `\)|Index Scan (Backward )?using \w+ on findings\b.*\n\s+Index Cond: .*` + pg + `)`).MatchString(text)
}

// readsTenantRows reports whether a plan reads findings' rows found by
// the tenant alone: from the tenant's first finding on.
func readsTenantRows(text string) bool {
	return regexp.MustCompile(`(?m)(SEARCH findings USING INDEX \w+ \(tenant=\?\)$|Index Scan (Backward )?using \w+ on findings\b.*\n\s+Index Cond: \(tenant = '[^']*'::text\)$)`).MatchString(text)
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
// of the findings, as the current state is of a history of scans. Before
// them, in an earlier batch, an old scan (oldScan) found the first 1,000
// of the same uids: a large scan at the far end of the insertion order,
// and findings that share a uid (and its severity and time).
func WritePlanFindings(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	fs := PlanFindings(3000)
	var scans []store.Scan
	for k := range planScans {
		scans = append(scans, store.Scan{ID: fmt.Sprintf("scan-%d", k), ProviderType: "aws",
			ProviderUID: fmt.Sprintf("%012d", 111111111111*(k%7+1)), Trigger: "imported"})
	}
	old := PlanFindings(oldScanFindings)
	for i := range old {
		old[i].ScanID = oldScan
	}
	oldScans := []store.Scan{{ID: oldScan, ProviderType: "aws", ProviderUID: scans[0].ProviderUID, Trigger: "imported"}}
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		if err := s.StartRun(ctx, tenant, "ing-1", 1, len(old)+len(fs)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBatch(ctx, tenant, "ing-1", 1, store.Batch{Findings: old, Scans: oldScans}); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBatch(ctx, tenant, "ing-1", 1, store.Batch{Findings: fs, Scans: scans}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, tenant, "ing-1", 1, store.Outcome{Status: store.RunSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	// tenant-a mutes a check, a few findings as mute rules do: the
	// shapes with FindingQuery.Muted read their marks.
	if err := s.PutMuteRule(ctx, "tenant-a", store.MuteRule{Name: "check-3", Generation: 1, Reason: "plans",
		Match: store.MuteMatch{CheckID: "check_3"}}); err != nil {
		t.Fatal(err)
	}
	for p := (store.MuteProgress{}); !p.Done; {
		var err error
		if p, err = s.ApplyMuteRule(ctx, "tenant-a", "check-3", 1000); err != nil {
			t.Fatal(err)
		}
	}
}

// CheckObservationPlans explains, through explain, the statements of
// FindingObservations for a uid of WritePlanFindings that two scans
// reported, and fails unless both find the rows through the (tenant, uid)
// index (engine.ObservationIndex) and neither reads every finding: what a
// finding's page costs must not grow with the tenant.
func CheckObservationPlans(t *testing.T, dialect engine.Dialect, explain func(t *testing.T, st engine.Statement) []string) {
	f := PlanFindings(1)[0]
	count, page := engine.Observations(dialect, "tenant-a", store.ObservationQuery{UID: f.UID, ProviderType: f.ProviderType,
		ProviderUID: f.ProviderUID, Page: store.Page{Number: 2, Size: 10}})
	full := regexp.MustCompile(`(?m)^\s*(->\s*)?(SCAN findings\b|Seq Scan on findings\b|Parallel Seq Scan on findings\b)`)
	// SQLite: "SEARCH findings USING INDEX findings_uid (tenant=? AND
	// uid=?)"; PostgreSQL: an index or bitmap index scan of findings_uid
	// with both columns in its condition.
	byUID := regexp.MustCompile(`SEARCH findings USING INDEX ` + engine.ObservationIndex + ` \(tenant=\? AND uid=\?\)|` +
		`(Index Scan|Bitmap Index Scan) (using|on) ` + engine.ObservationIndex + `\b.*\n.*Index Cond: \(\(tenant = .*\) AND \(uid = .*\)\)`)
	for _, st := range []engine.Statement{count, page} {
		plan := explain(t, st)
		text := strings.Join(plan, "\n")
		if full.MatchString(text) || !byUID.MatchString(text) {
			t.Errorf("observations do not read the uid's entries of %s alone\n%s\nplan:\n  %s", engine.ObservationIndex, st.SQL, strings.Join(plan, "\n  "))
		}
	}
}

// CheckMergePlans asks for the plan of each statement of the merge into the
// current state (engine.CurrentMerge) and fails when one reads every
// finding, or probes a uid's findings (through engine.ObservationIndex)
// twice under one name: a merge must cost the findings it concerns, each
// probed once. SQLite copies a subquery's column into every place the
// outer query reads it, and a probe in that column then runs once for each.
func CheckMergePlans(t *testing.T, dialect engine.Dialect, explain func(t *testing.T, st engine.Statement) []string) {
	// SQLite names a table by its alias, scans it with or without an
	// index, and reads a subquery ("scans", "probed") with SCAN too;
	// PostgreSQL may scan the small tables of the current state, never
	// findings.
	full := regexp.MustCompile(`(?m)^\s*(?:->\s*)?(?:SCAN (\w+)(?:$| USING )|(?:Parallel )?Seq Scan on (findings)\b)`)
	subqueries := map[string]bool{"scans": true, "probed": true}
	// SQLite: "SEARCH g USING INDEX findings_uid (tenant=? AND uid=?)";
	// PostgreSQL: "Index Scan using findings_uid on findings g".
	probe := regexp.MustCompile(`SEARCH (\w+) USING (?:COVERING )?INDEX ` + engine.ObservationIndex + `\b|` +
		`Index (?:Only )?Scan using ` + engine.ObservationIndex + ` on findings (\w+)`)
	for i, st := range engine.CurrentMerge(dialect, "tenant-a", "ingestion-a", 2) {
		plan := explain(t, st)
		text := strings.Join(plan, "\n")
		var problems []string
		for _, m := range full.FindAllStringSubmatch(text, -1) {
			if name := m[1] + m[2]; !subqueries[name] {
				problems = append(problems, "reads every row of "+name)
			}
		}
		seen := map[string]bool{}
		for _, m := range probe.FindAllStringSubmatch(text, -1) {
			alias := m[1] + m[2]
			if seen[alias] {
				problems = append(problems, "probes the uid of "+alias+" twice")
			}
			seen[alias] = true
		}
		for _, p := range problems {
			t.Errorf("merge statement %d %s\n%s\nplan:\n  %s", i, p, st.SQL, strings.Join(plan, "\n  "))
		}
	}
}
