package engine

import (
	"strings"
	"unicode/utf8"

	"github.com/posture-dev/posture/internal/store"
)

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

// indexedSearch reports whether q's search is long enough for a trigram
// index to find its rows.
func indexedSearch(q store.FindingQuery) bool {
	return utf8.RuneCountInString(q.Search) >= store.MinSearchLength
}
