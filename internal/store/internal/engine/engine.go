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
}

// Postgres and SQLite are the two dialects. SQLite's "?NNN" numbered
// parameters let both share one builder; its LIKE is case-insensitive for
// ASCII only, which is what Search promises there.
var (
	Postgres = Dialect{Param: func(n int) string { return "$" + strconv.Itoa(n) }, ILike: "ILIKE",
		Time: func(t time.Time) any { return t }, SearchIndex: postgresSearch}
	SQLite = Dialect{Param: func(n int) string { return "?" + strconv.Itoa(n) }, ILike: "LIKE",
		Time: func(t time.Time) any { return t.UnixMicro() }, IndexedBy: func(index string) string { return " INDEXED BY " + index },
		SearchIndex: sqliteSearch}
)

// sqliteSearch looks probe up in findings_search, the FTS5 trigram index
// of the searched columns: the rows that hold each of probe's trigrams.
// The index keeps no positions (detail=none, a fraction of the size and of
// the ingestion cost), so it cannot ask for the trigrams in a row; the
// LIKE conditions on the whole term that follow do. Each trigram is a
// string in FTS5's query syntax, so no character of probe acts as an
// operator.
func sqliteSearch(a *Args, probe string) string {
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
	return "rowid IN (SELECT rowid FROM findings_search WHERE findings_search MATCH " + a.Add(strings.Join(tokens, " AND ")) + ")"
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
// one row, its end alone a few (docs/decisions/0012).
const SearchProbeLength = 10

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
	return []string{a.d.SearchIndex(a, SearchProbe(term)), a.containsAny(searchColumns, term)}
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
// of each sort column (forwards or backwards).
var orderIndexes = map[string]string{
	"event_time":  "findings_time",
	"severity_id": "findings_default_order",
	"inserted_at": "findings_inserted",
	"check_id":    "findings_check_order",
	"uid":         "findings_uid",
}

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

func (o orderPart) String() string {
	if o.desc {
		return o.col + " DESC"
	}
	return o.col + " ASC"
}

// findingOrder resolves sort keys to columns. uid and id are always appended
// as tie-breakers so that pages never overlap or skip rows, and so that a
// position in the order (a FindingKey) is unique. They run in the direction
// of the first key: every sort index ends in uid, so each order, either
// way, is one read of an index, forwards or backwards, never a sort of the
// runs of equal values.
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
	for _, col := range []string{"uid", "id"} {
		if !used[col] {
			parts = append(parts, orderPart{col: col, desc: parts[0].desc})
		}
	}
	return parts, nil
}

// DefaultFindingSort is the store's order when a query names none: the most
// severe first (ties, as always, by uid and id in the same direction).
var DefaultFindingSort = []string{"-severity_id"}

// keyset renders "the row comes after k in this order". The expanded form
// (c1 > v1 OR (c1 = v1 AND (c2 > v2 OR ...))) handles mixed directions,
// which a row-value comparison cannot; the leading bound on c1 repeats
// what it implies so that both planners seek the ordered index to k
// instead of walking it from the start.
func (a *Args) keyset(parts []orderPart, k store.FindingKey) string {
	ps := make([]string, len(parts))
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
		ps[i] = a.Add(v)
	}
	op := func(p orderPart, strict bool) string {
		o := ">"
		if p.desc {
			o = "<"
		}
		if !strict {
			o += "="
		}
		return o
	}
	last := len(parts) - 1
	expr := parts[last].col + " " + op(parts[last], true) + " " + ps[last]
	for i := last - 1; i >= 0; i-- {
		c := parts[i].col
		expr = c + " " + op(parts[i], true) + " " + ps[i] + " OR (" + c + " = " + ps[i] + " AND (" + expr + "))"
	}
	return parts[0].col + " " + op(parts[0], false) + " " + ps[0] + " AND (" + expr + ")"
}

// naturalKeyIndex is SQLite's name for the index of findings' UNIQUE
// (tenant, scan_id, uid) constraint.
const naturalKeyIndex = "sqlite_autoindex_findings_2"

// latestIndex is the hint that makes SQLite read the latest findings scan
// by scan through the natural key: it cannot know that latest_scans holds
// one scan per provider, and otherwise walks every finding of the tenant
// through another index, testing each one's scan. A search the trigram
// index can answer is left to that index.
func latestIndex(d Dialect, q store.FindingQuery) string {
	if d.IndexedBy == nil || !q.Latest || (q.Search != "" && indexedSearch(q)) {
		return ""
	}
	return d.IndexedBy(naturalKeyIndex)
}

// Statement is SQL text with its bind parameters.
type Statement struct {
	SQL  string
	Args []any
}

// FindingList renders the two statements of ListFindings: the count of
// matching findings and the page. Both engines issue exactly these, and the
// query plan tests explain exactly these.
func FindingList(d Dialect, tenant string, q store.FindingQuery) (count, page Statement, err error) {
	parts, err := findingOrder(q.Sort)
	if err != nil {
		return Statement{}, Statement{}, err
	}
	a := NewArgs(d)
	where := FindingWhere(a, tenant, q)
	count = findingCount(d, tenant, q)
	order := make([]string, len(parts))
	for i, p := range parts {
		order[i] = p.String()
	}
	limit, offset := Limit(q.Page)
	if q.After != nil {
		where += " AND (" + a.keyset(parts, *q.After) + ")"
		offset = 0
	}
	from := "findings" + latestIndex(d, q)
	if d.IndexedBy != nil && !bounded(q) {
		// Without statistics on how selective a value is, SQLite sorts
		// every finding of the tenant; reading in order stops at the
		// page. A rare value makes that walk long, but never longer than
		// the sort would have read.
		from += d.IndexedBy(orderIndexes[parts[0].col])
	}
	sql := `SELECT ` + FindingColumns + ` FROM ` + from + ` WHERE ` + where + ` ORDER BY ` + strings.Join(order, ", ") +
		` LIMIT ` + a.Add(limit)
	if offset > 0 {
		sql += ` OFFSET ` + a.Add(offset)
	}
	return count, Statement{SQL: sql, Args: a.Vals}, nil
}

// SummaryTable keeps, per tenant, the number of findings of each
// combination of CountDimensions' values. Triggers on findings keep it in
// step within the statement that changes a finding, so it is exact in every
// transaction's view. Groups whose findings all moved away stay at 0.
const SummaryTable = "finding_counts"

// findingCount renders the count of ListFindings: a sum over the summary
// when q.Summarized(), otherwise a count of the matching findings that
// stops at q.CountLimit+1 of them when a limit is set, so that a filter
// matching millions costs what one matching ten thousand does.
func findingCount(d Dialect, tenant string, q store.FindingQuery) Statement {
	a := NewArgs(d)
	where := FindingWhere(a, tenant, q)
	if q.Summarized() {
		return Statement{SQL: `SELECT coalesce(sum(n), 0) FROM ` + SummaryTable + ` WHERE ` + where, Args: a.Vals}
	}
	if q.CountLimit > 0 {
		return Statement{SQL: `SELECT count(*) FROM (SELECT 1 FROM findings` + latestIndex(d, q) + ` WHERE ` + where + ` LIMIT ` + a.Add(q.CountLimit+1) + `) AS matching`,
			Args: a.Vals}
	}
	return Statement{SQL: `SELECT count(*) FROM findings` + latestIndex(d, q) + ` WHERE ` + where, Args: a.Vals}
}

// FindingCounts renders FindingCounts' statement: from the summary when
// q.Summarized() (one row per group, whatever the number of findings),
// else FindingCountsScan.
func FindingCounts(d Dialect, tenant string, q store.FindingQuery, by []string) (Statement, error) {
	if err := checkDimensions(by); err != nil {
		return Statement{}, err
	}
	if !q.Summarized() {
		return FindingCountsScan(d, tenant, q, by)
	}
	a := NewArgs(d)
	where := FindingWhere(a, tenant, q)
	cols := strings.Join(by, ", ")
	return Statement{SQL: `SELECT ` + cols + `, sum(n) FROM ` + SummaryTable + ` WHERE ` + where + ` GROUP BY ` + cols +
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
	where := FindingWhere(a, tenant, q)
	cols := strings.Join(by, ", ")
	from := "findings" + latestIndex(d, q)
	if d.IndexedBy != nil && q.Summarized() {
		// The grouped and filtered columns are all in findings_facets, so
		// counting reads that index alone; SQLite prefers an index in
		// GROUP BY order that makes it read every row.
		from += d.IndexedBy("findings_facets")
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
