// Package engine holds what the SQLite and PostgreSQL stores share: batch
// preparation, the SQL of finding queries and the blob chunking rules. Keeping
// it in one place is what makes the two engines answer the conformance suite
// identically.
package engine

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/posture-dev/posture/internal/store"
)

// ChunkSize bounds the memory a blob upload or download needs, and keeps each
// chunk well below both engines' row size limits.
const ChunkSize = 1 << 20

// IncompleteBlobTTL is how long an unfinished upload may go without writing
// a chunk before Open deletes it. Uploads that fail are removed at once, and
// the manager sweeps stalled ones far sooner (store.Janitor); this only
// catches what a process that died mid-upload left while no manager ran.
const IncompleteBlobTTL = 24 * time.Hour

// TouchInterval is how often an upload in progress refreshes its blob's
// touched_at: often enough for a sweep measured in minutes, rarely enough to
// cost nothing next to the chunks themselves.
const TouchInterval = time.Minute

// DefaultPageSize applies when Page.Size is 0, matching the REST API default.
const DefaultPageSize = 10

// ReadChunk fills buf from r. It returns io.EOF, possibly with n > 0, only
// when r ended; any other error is r's own. Unlike io.ReadFull it does not
// turn a short read into io.ErrUnexpectedEOF, which a source may return
// itself to say it was cut off (a truncated multipart part does).
func ReadChunk(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Now is the store's clock: UTC and truncated to microseconds, the precision
// both engines keep, so that what a caller is given equals what it reads back.
func Now() time.Time { return Time(time.Now()) }

// Time normalises a timestamp the way both engines store it.
func Time(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Invalid wraps store.ErrInvalidArgument with a message.
func Invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalidArgument, fmt.Sprintf(format, a...))
}

// Batch is a store.Batch checked and normalised for writing.
type Batch struct {
	Findings []store.Finding
	Scans    []store.Scan
	Errors   []store.IngestionError
}

// PrepareBatch validates b, derives ids, normalises the indexed columns and
// drops duplicates (the last occurrence wins), because an upsert statement
// may not touch the same row twice.
func PrepareBatch(tenant, ingestionID string, b store.Batch, now time.Time) (Batch, error) {
	out := Batch{Errors: b.Errors}
	if len(b.Findings) > 0 {
		seen := make(map[string]int, len(b.Findings))
		out.Findings = make([]store.Finding, 0, len(b.Findings))
		for i, f := range b.Findings {
			if f.UID == "" || f.ScanID == "" {
				return Batch{}, Invalid("finding %d: uid and scan id are required", i)
			}
			f.ID = store.FindingID(tenant, f.ScanID, f.UID)
			f.IngestionID = ingestionID
			f.Severity = strings.ToLower(f.Severity)
			f.StatusCode = strings.ToUpper(f.StatusCode)
			f.ProviderType = strings.ToLower(f.ProviderType)
			f.Time = Time(f.Time)
			if f.Raw == nil {
				f.Raw = []byte{}
			}
			f.InsertedAt, f.UpdatedAt = now, now
			if j, ok := seen[f.ID]; ok {
				out.Findings[j] = f
				continue
			}
			seen[f.ID] = len(out.Findings)
			out.Findings = append(out.Findings, f)
		}
		// A fixed row order makes concurrent batches that overlap lock rows in
		// the same order, so they wait for each other instead of deadlocking.
		// The order is the id's (a function of the natural key), which is also
		// the primary key's: inserts walk it in one direction. A permutation
		// is sorted rather than the findings, which are large to swap.
		order := make([]int, len(out.Findings))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(i, j int) int { return strings.Compare(out.Findings[i].ID, out.Findings[j].ID) })
		sorted := make([]store.Finding, len(order))
		for i, j := range order {
			sorted[i] = out.Findings[j]
		}
		out.Findings = sorted
	}
	if len(b.Scans) > 0 {
		seen := make(map[string]int, len(b.Scans))
		for i, s := range b.Scans {
			if s.ID == "" {
				return Batch{}, Invalid("scan %d: id is required", i)
			}
			s.IngestionID = ingestionID
			s.ProviderType = strings.ToLower(s.ProviderType)
			s.FindingCount = 0
			s.InsertedAt, s.UpdatedAt = now, now
			if j, ok := seen[s.ID]; ok {
				out.Scans[j] = s
				continue
			}
			seen[s.ID] = len(out.Scans)
			out.Scans = append(out.Scans, s)
		}
		sort.Slice(out.Scans, func(i, j int) bool { return out.Scans[i].ID < out.Scans[j].ID })
	}
	for i, e := range out.Errors {
		if e.Code == "" {
			return Batch{}, Invalid("error %d: code is required", i)
		}
	}
	return out, nil
}

// ValidOutcome rejects outcomes that would leave a finished run looking
// unfinished.
func ValidOutcome(o store.Outcome) error {
	if o.Status != store.RunSucceeded && o.Status != store.RunFailed {
		return Invalid("run outcome status %q: want %q or %q", o.Status, store.RunSucceeded, store.RunFailed)
	}
	return nil
}

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

// sqliteSearchCandidates drives a statement from findings_search: each
// candidate row the MATCH yields is fetched by its rowid as it comes.
// CROSS JOIN keeps that order of the loops.
func sqliteSearchCandidates(a *Args, probe string, newest bool) string {
	order := ""
	if newest {
		// FTS5 hands its rows over in rowid order either way; rowids grow
		// with insertion, so the latest scans' matches come first. SQLite
		// drops the ORDER BY of a subquery in FROM that has no LIMIT; -1
		// is none.
		order = " ORDER BY rowid DESC LIMIT -1"
	}
	return "(SELECT rowid AS candidate FROM " + sqliteMatch(a, probe) + order + ") AS candidates CROSS JOIN findings ON findings.rowid = candidates.candidate"
}

// sqliteSearch looks probe up in findings_search, the FTS5 trigram index
// of the searched columns: the rows that hold each of probe's trigrams.
// The index keeps no positions (detail=none, a fraction of the size and of
// the ingestion cost), so it cannot ask for the trigrams in a row; the
// LIKE conditions on the whole term that follow do. Each trigram is a
// string in FTS5's query syntax, so no character of probe acts as an
// operator.
func sqliteSearch(a *Args, probe string) string {
	return "rowid IN (SELECT rowid FROM " + sqliteMatch(a, probe) + ")"
}

// sqliteMatch renders the rows of findings_search that hold every trigram
// of probe, for a SELECT of their rowid.
func sqliteMatch(a *Args, probe string) string {
	return "findings_search WHERE findings_search MATCH " + a.Add(trigramQuery(probe))
}

// trigramQuery is FTS5's query for the rows holding every trigram of
// probe.
func trigramQuery(probe string) string {
	rs := []rune(probe)
	seen := map[string]bool{}
	var tokens []string
	for i := 0; i+3 <= len(rs); i++ {
		tri := string(rs[i : i+3])
		if seen[tri] {
			continue
		}
		seen[tri] = true
		tokens = append(tokens, `"`+strings.ReplaceAll(tri, `"`, `""`)+`"`)
	}
	return strings.Join(tokens, " AND ")
}

// SearchText is the one text per finding that PostgreSQL's trigram index
// findings_search holds: the four searched columns joined by spaces
// (migration 00012). One text holds each trigram once, where an index of
// the four columns held it once per column: a scanner's uid repeats its
// check id and much of its resource uid, so a finding has about half the
// index entries (91 against 195 over the scanner fixture), and ingestion
// writes half as many. The identifier columns are compared in the "C"
// collation, which folds ASCII letters only; here they take the
// database's, whose folding is wider, so the text matches every finding
// any column does (and some more, as may a match across two columns); the
// test of each column decides.
const SearchText = `((uid COLLATE "default") || ' ' || title || ' ' || (check_id COLLATE "default") || ' ' || (resource_uid COLLATE "default"))`

// postgresSearch looks probe up in findings_search through SearchText;
// pg_trgm answers ILIKE from the index and rechecks the rows it finds.
func postgresSearch(a *Args, probe string) string {
	return SearchText + ` ILIKE ` + a.Add("%"+EscapeLike(probe)+"%") + ` ESCAPE '\'`
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

// FindingColumns is the column list every finding SELECT uses, in the order
// the engines scan them.
const FindingColumns = "id, uid, scan_id, ingestion_id, check_id, title, severity, severity_id, status_code, status, region, provider_type, provider_uid, resource_uid, event_time, raw, inserted_at, updated_at"

// FindingWhere renders the WHERE condition of q for tenant.
func FindingWhere(a *Args, tenant string, q store.FindingQuery) string {
	conds := []string{"tenant = " + a.Add(tenant)}
	if len(q.Severity) > 0 {
		conds = append(conds, a.in("severity", q.Severity, strings.ToLower))
	}
	if len(q.StatusCode) > 0 {
		conds = append(conds, a.in("status_code", q.StatusCode, strings.ToUpper))
	}
	if len(q.ProviderType) > 0 {
		conds = append(conds, a.in("provider_type", q.ProviderType, strings.ToLower))
	}
	for _, eq := range []struct{ col, val string }{
		{"provider_uid", q.ProviderUID},
		{"check_id", q.CheckID},
		{"region", q.Region},
		{"scan_id", q.ScanID},
		{"ingestion_id", q.IngestionID},
	} {
		if eq.val != "" {
			conds = append(conds, eq.col+" = "+a.Add(eq.val))
		}
	}
	if q.Latest {
		// The latest scans are few (one per provider), and the natural key
		// (tenant, scan_id, uid) finds each one's findings.
		conds = append(conds, "scan_id IN (SELECT scan_id FROM latest_scans WHERE tenant = "+a.Add(tenant)+")")
	}
	if q.Search != "" {
		conds = append(conds, searchConds(a, q)...)
	}
	return strings.Join(conds, " AND ")
}

// SearchProbeLength is how many characters of a search text, its last
// ones, are looked up in the trigram index. Uids and ARNs share long
// prefixes (arn:aws:iam::, an account, a scanner's uid scheme) whose
// trigrams are in most findings' lists, and differ at the end: looking a
// whole uid up read thousands of index pages of common trigrams to find
// one row, its end alone a few. Each trigram's list grows with the
// findings, and at 10 million 7 characters (5 trigrams) still found one
// to three rows for a uid's end, in 40 % less time than 10
// (docs/decisions/0012).
const SearchProbeLength = 7

// SearchProbe is the part of term looked up in the trigram index: its last
// SearchProbeLength characters, or all of a shorter term. Every row that
// contains term contains its probe, so the rows the index finds for the
// probe hold every match; a test of the whole term then decides.
func SearchProbe(term string) string {
	rs := []rune(term)
	if len(rs) <= SearchProbeLength {
		return term
	}
	return string(rs[len(rs)-SearchProbeLength:])
}

// searchColumns are the columns a search tests.
var searchColumns = []string{"uid", "title", "check_id", "resource_uid"}

// searchConds renders q.Search: a lookup of its probe in the trigram index
// (SQLite: a MATCH of findings_search; PostgreSQL: ILIKE on SearchText,
// which findings_search holds) and the test of the whole term on each
// column, which decides, with LIKE's meaning on both engines. A text too
// short for a trigram has nothing to look up and is tested on every row
// the other conditions leave.
func searchConds(a *Args, q store.FindingQuery) []string {
	term := q.Search
	if !indexedSearch(q) {
		return []string{a.containsAny(searchColumns, term)}
	}
	test := a.containsAny(searchColumns, term)
	if a.d.Unestimated != nil {
		test = a.d.Unestimated(test)
	}
	return []string{a.d.SearchIndex(a, SearchProbe(term)), test}
}

// rowTestedWhere is FindingWhere with q's whole search text tested on each
// row and nothing looked up: for a statement that reads its rows some other
// way (a walk of an order's index, the trigram index's candidates joined).
func rowTestedWhere(a *Args, tenant string, q store.FindingQuery) string {
	rest := q
	rest.Search = ""
	return FindingWhere(a, tenant, rest) + " AND " + a.containsAny(searchColumns, q.Search)
}

// containsAny renders "one of cols contains s", case-insensitively by the
// dialect's ILike, every character of s literal.
func (a *Args) containsAny(cols []string, s string) string {
	p := a.Add("%" + EscapeLike(s) + "%")
	ors := make([]string, len(cols))
	for i, col := range cols {
		ors[i] = col + " " + a.d.ILike + " " + p + ` ESCAPE '\'`
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// EscapeLike makes s match literally inside a LIKE pattern with ESCAPE '\'.
func EscapeLike(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// orderIndexes are the indexes that read a tenant's findings in the order
// of each sort column (forwards or backwards), up to id: each is (tenant,
// SortIndexColumns(column)).
var orderIndexes = map[string]string{
	"event_time":  "findings_time",
	"severity_id": "findings_default_order",
	"inserted_at": "findings_inserted",
	"check_id":    "findings_check_order",
	"uid":         "findings_uid",
}

// orderTies are the columns that break the ties of each sort column,
// before id, and that its index holds after it. A check or a severity is
// shared by a large part of a tenant's findings, so their ties go by
// insertion time first: a new finding then lands at the end of its
// check's or severity's entries, not at a random place among all of them
// as it did when uid came first, which at ten million findings took a
// leaf page from outside memory for each new finding
// (docs/decisions/0017-ties-by-insertion-time.md).
var orderTies = map[string][]string{
	"event_time":  {"uid"},
	"severity_id": {"inserted_at", "uid"},
	"inserted_at": {"uid"},
	"check_id":    {"inserted_at", "uid"},
	"uid":         nil,
}

// SortIndex names the index that reads a tenant's findings in the order
// of sort column col (forwards or backwards), up to id.
func SortIndex(col string) string { return orderIndexes[col] }

// SortIndexColumns are the columns of col's sort index after the tenant:
// col and the columns that break its ties, all but id.
func SortIndexColumns(col string) []string { return append([]string{col}, orderTies[col]...) }

// indexedSearch reports whether q's search is long enough for a trigram
// index to find its rows.
func indexedSearch(q store.FindingQuery) bool {
	return utf8.RuneCountInString(q.Search) >= store.MinSearchLength
}

// bounded reports whether q names a scan, an ingestion or a check, asks
// for the latest scans or searches a text the trigram index can look up:
// each has an index that finds exactly its findings, a bounded set worth
// sorting. Any other filter matches a share of the whole tenant (a
// severity, a region), so the ordered index read until the page is full is
// the better plan.
func bounded(q store.FindingQuery) bool {
	return q.ScanID != "" || q.IngestionID != "" || q.CheckID != "" || q.Latest || (q.Search != "" && indexedSearch(q))
}

var sortColumns = map[string]string{
	"time":        "event_time",
	"severity_id": "severity_id",
	"inserted_at": "inserted_at",
	"check_id":    "check_id",
	"uid":         "uid",
}

// orderPart is one column of an ORDER BY.
type orderPart struct {
	col  string
	desc bool
}

// sql renders o, its column as render gives it (nil: as it is).
func (o orderPart) sql(render func(col string) string) string {
	col := o.col
	if render != nil {
		col = render(col)
	}
	if o.desc {
		return col + " DESC"
	}
	return col + " ASC"
}

// findingOrder resolves sort keys to columns. The first key's ties
// (orderTies) and id are always appended as tie-breakers so that pages
// never overlap or skip rows, and so that a position in the order (a
// FindingKey) is unique. They run in the direction of the first key: the
// first key's sort index holds them, so each order, either way, is one
// read of an index, forwards or backwards, never a sort of the runs of
// equal values.
func findingOrder(keys []string) ([]orderPart, error) {
	if len(keys) == 0 {
		keys = DefaultFindingSort
	}
	var parts []orderPart
	used := map[string]bool{}
	for _, k := range keys {
		name, desc := strings.CutPrefix(k, "-")
		col, ok := sortColumns[name]
		if !ok {
			return nil, Invalid("unknown sort key %q", k)
		}
		if used[col] {
			continue
		}
		used[col] = true
		parts = append(parts, orderPart{col: col, desc: desc})
	}
	for _, col := range append(slices.Clone(orderTies[parts[0].col]), "id") {
		if !used[col] {
			used[col] = true
			parts = append(parts, orderPart{col: col, desc: parts[0].desc})
		}
	}
	return parts, nil
}

// DefaultFindingSort is the store's order when a query names none: the most
// severe first (ties, as for every severity order, by insertion time, uid
// and id in the same direction: the newest first).
var DefaultFindingSort = []string{"-severity_id"}

// keyset renders "the row comes after k in this order" (see after).
func (a *Args) keyset(parts []orderPart, k store.FindingKey) string {
	vals := make([]string, len(parts))
	for i, p := range parts {
		var v any
		switch p.col {
		case "event_time":
			v = a.d.Time(Time(k.Time))
		case "inserted_at":
			v = a.d.Time(Time(k.InsertedAt))
		case "severity_id":
			v = k.SeverityID
		case "check_id":
			v = k.CheckID
		case "uid":
			v = k.UID
		case "id":
			v = k.ID
		}
		vals[i] = a.Add(v)
	}
	return after(parts, vals)
}

// after renders "the row comes after the position vals (one SQL value
// per part) in this order". The parts that run in the first one's
// direction are compared as one row value, which both planners seek an
// index to: (severity_id, inserted_at, uid) puts a page at its finding,
// where severity_id alone would put it at the first finding of that
// severity and read every one before it. Parts in the other direction follow in
// the expanded form (c1 > v1 OR (c1 = v1 AND (c2 > v2 OR ...))), which
// mixed directions need.
func after(parts []orderPart, vals []string) string {
	lead := 1
	for lead < len(parts) && parts[lead].desc == parts[0].desc {
		lead++
	}
	op := beyond(parts[0], false)
	if lead < len(parts) {
		op += "=" // a bound the expanded form then narrows
	}
	bound := parts[0].col + " " + op + " " + vals[0]
	if lead > 1 {
		bound = "(" + columns(parts[:lead]) + ") " + op + " (" + strings.Join(vals[:lead], ", ") + ")"
	}
	if lead == len(parts) {
		return bound
	}
	last := len(parts) - 1
	expr := parts[last].col + " " + beyond(parts[last], false) + " " + vals[last]
	for i := last - 1; i >= 0; i-- {
		c := parts[i].col
		expr = c + " " + beyond(parts[i], false) + " " + vals[i] + " OR (" + c + " = " + vals[i] + " AND (" + expr + "))"
	}
	return bound + " AND (" + expr + ")"
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
	return q.Latest && q.ScanID == "" && q.IngestionID == "" && q.CheckID == "" && q.ProviderUID == "" &&
		len(q.ProviderType) == 0 && !(q.Search != "" && indexedSearch(q))
}

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

// Statement is SQL text with its bind parameters.
type Statement struct {
	SQL  string
	Args []any
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

func orderBy(parts []orderPart, render func(col string) string) string {
	order := make([]string, len(parts))
	for i, p := range parts {
		order[i] = p.sql(render)
	}
	return strings.Join(order, ", ")
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

// beyond is the comparison that holds of what comes after a position in
// p's direction, or before it when before is set.
func beyond(p orderPart, before bool) string {
	if p.desc != before {
		return "<"
	}
	return ">"
}

func columns(parts []orderPart) string {
	cols := make([]string, len(parts))
	for i, p := range parts {
		cols[i] = p.col
	}
	return strings.Join(cols, ", ")
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
	rest.Latest = false
	from = ScanSummaryTable
	if q.Latest && d.LatestFindings != nil {
		from = d.LatestFindings(a, ScanSummaryTable, tenant, " OFFSET 0")
		return from, FindingWhere(a, tenant, rest)
	}
	where = FindingWhere(a, tenant, rest)
	if q.Latest {
		where += " AND scan_id IN (SELECT scan_id FROM latest_scans WHERE tenant = " + a.Add(tenant) + ")"
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
	if err := checkDimensions(by); err != nil {
		return Statement{}, err
	}
	a := NewArgs(d)
	var table, where string
	switch {
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

// ScanWhere renders the WHERE condition of q for tenant over scans aliased s.
func ScanWhere(a *Args, tenant string, q store.ScanQuery) string {
	conds := []string{"s.tenant = " + a.Add(tenant)}
	if q.ProviderType != "" {
		conds = append(conds, "s.provider_type = "+a.Add(strings.ToLower(q.ProviderType)))
	}
	if q.ProviderUID != "" {
		conds = append(conds, "s.provider_uid = "+a.Add(q.ProviderUID))
	}
	if q.IngestionID != "" {
		conds = append(conds, "s.ingestion_id = "+a.Add(q.IngestionID))
	}
	return strings.Join(conds, " AND ")
}

// Rows is what both drivers' result sets offer: database/sql's *sql.Rows
// and pgx's Rows alike.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
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

// MarkLatestScans renders what FinishRun runs when a run succeeds: each
// provider's latest scan becomes the one the ingestion wrote (of several,
// the most recently inserted, then the greatest id). Parameters: tenant,
// ingestion id, completion time. A statement may not upsert one row twice,
// so each provider's pick is made before the upsert.
func MarkLatestScans(d Dialect) string {
	p := d.Param
	return `
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at)
SELECT s.tenant, s.provider_type, s.provider_uid, s.id, s.ingestion_id, ` + p(3) + ` FROM scans s
WHERE s.tenant = ` + p(1) + ` AND s.ingestion_id = ` + p(2) + ` AND NOT EXISTS (
    SELECT 1 FROM scans t
    WHERE t.tenant = s.tenant AND t.ingestion_id = s.ingestion_id
        AND t.provider_type = s.provider_type AND t.provider_uid = s.provider_uid
        AND (t.inserted_at > s.inserted_at OR (t.inserted_at = s.inserted_at AND t.id > s.id)))
ON CONFLICT (tenant, provider_type, provider_uid) DO UPDATE SET
    scan_id = excluded.scan_id, ingestion_id = excluded.ingestion_id, completed_at = excluded.completed_at`
}

// TenantTables are the tables DeleteTenantData empties of a tenant's
// rows, children before parents; blob chunks go with their blobs (ON
// DELETE CASCADE). The findings' delete leaves rows of their own to the
// tables derived from them (the summaries, counting zero; the scans'
// bounds, which only widen) and to latest_scans, which names accounts
// and scans: they go by name, after the findings.
var TenantTables = []string{"findings", SummaryTable, ScanSummaryTable, ScanBoundsTable, "latest_scans", "scans", "ingestion_errors", "runs", "blobs"}
