package engine

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

// TestSearchLooksUpTheProbe checks what each engine looks up in its
// trigram index for a search: the probe (the last SearchProbeLength
// characters of a longer text), never the common trigrams of the rest,
// while the whole text is what the rows are tested on.
func TestSearchLooksUpTheProbe(t *testing.T) {
	for _, tc := range []struct {
		term, probe string
	}{
		{"bucket", "bucket"},
		{"0123456", "0123456"},
		{"0123456789", "3456789"},
		{"x0123456789", "3456789"},
		{"arn:aws:iam::111111111111:role/ReadOnly", "eadOnly"},
		{"Zugriff über Port 22 auf Straße", " Straße"},
		{`say "hi" AND NOT "bye"`, `T "bye"`},
		{`100%_of_the_logs\`, `e_logs\`},
	} {
		t.Run(tc.term, func(t *testing.T) {
			if got := SearchProbe(tc.term); got != tc.probe {
				t.Fatalf("SearchProbe(%q) = %q, want %q", tc.term, got, tc.probe)
			}
			q := store.FindingQuery{Search: tc.term}
			whole := "%" + EscapeLike(tc.term) + "%"

			a := NewArgs(SQLite)
			where := FindingWhere(a, "t", q)
			match := boundTo(t, a, where, `findings_search MATCH (\?\d+)`)
			if got, want := matchTrigrams(t, match), trigrams(tc.probe); !slices.Equal(got, want) {
				t.Errorf("SQLite looks up %v, want the probe's trigrams %v\n%s", got, want, where)
			}
			if got := boundTo(t, a, where, `\buid LIKE (\?\d+)`); got != whole {
				t.Errorf("SQLite tests the rows for %q, want the whole term %q\n%s", got, whole, where)
			}

			a = NewArgs(Postgres)
			where = FindingWhere(a, "t", q)
			if got, want := boundTo(t, a, where, regexp.QuoteMeta(SearchText)+` ILIKE (\$\d+)`), "%"+EscapeLike(tc.probe)+"%"; got != want {
				t.Errorf("PostgreSQL looks up %q, want the probe %q\n%s", got, want, where)
			}
			if got := boundTo(t, a, where, `\buid ILIKE (\$\d+)`); got != whole {
				t.Errorf("PostgreSQL tests the rows for %q, want the whole term %q\n%s", got, whole, where)
			}
		})
	}
}

// boundTo returns the value bound to the placeholder that expr's first
// group captures in where.
func boundTo(t *testing.T, a *Args, where, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(where)
	if m == nil {
		t.Fatalf("no %s in %s", expr, where)
	}
	n, err := strconv.Atoi(m[1][1:])
	if err != nil || n < 1 || n > len(a.Vals) {
		t.Fatalf("placeholder %s of %d values", m[1], len(a.Vals))
	}
	s, ok := a.Vals[n-1].(string)
	if !ok {
		t.Fatalf("placeholder %s holds %T", m[1], a.Vals[n-1])
	}
	return s
}

// matchTrigrams reads an FTS5 query of ANDed quoted strings back into its
// strings, sorted.
func matchTrigrams(t *testing.T, query string) []string {
	t.Helper()
	var out []string
	for _, tok := range strings.Split(query, " AND ") {
		if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
			t.Fatalf("FTS5 query %q: %q is not a quoted string", query, tok)
		}
		out = append(out, strings.ReplaceAll(tok[1:len(tok)-1], `""`, `"`))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// trigrams are s's distinct three-character sequences, sorted.
func trigrams(s string) []string {
	rs := []rune(s)
	var out []string
	for i := 0; i+3 <= len(rs); i++ {
		out = append(out, string(rs[i:i+3]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestShortPageCount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		q     store.FindingQuery
		rows  int
		count int
		known bool
	}{
		{"a short first page is all", store.FindingQuery{Page: store.Page{Number: 1, Size: 10}}, 3, 3, true},
		{"an empty first page: none", store.FindingQuery{Page: store.Page{Number: 1, Size: 10}}, 0, 0, true},
		{"a short third page follows two full ones", store.FindingQuery{Page: store.Page{Number: 3, Size: 10}}, 4, 24, true},
		{"the store's default size", store.FindingQuery{}, 9, 9, true},
		{"a full page may have more after it", store.FindingQuery{Page: store.Page{Number: 1, Size: 10}}, 10, 0, false},
		{"an empty page past the first: the end is before it", store.FindingQuery{Page: store.Page{Number: 4, Size: 10}}, 0, 0, false},
		{"a cursor page counts from the first page", store.FindingQuery{Page: store.Page{Size: 10}, After: &store.FindingKey{}}, 3, 0, false},
		{"a count limit short of the page decides", store.FindingQuery{Page: store.Page{Number: 3, Size: 10}, CountLimit: 20}, 4, 0, false},
		{"a count limit past the page does not", store.FindingQuery{Page: store.Page{Number: 3, Size: 10}, CountLimit: 40}, 4, 24, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count, known := ShortPageCount(tc.q, tc.rows)
			if count != tc.count || known != tc.known {
				t.Errorf("ShortPageCount(%+v, %d) = %d, %v; want %d, %v", tc.q, tc.rows, count, known, tc.count, tc.known)
			}
		})
	}
}

// TestFindingOrder pins each sort's tie-breakers (the first key's, then
// id, in its direction) and which orders a sort index gives up to id,
// which deep numbered pages need (indexKey).
func TestFindingOrder(t *testing.T) {
	for _, tc := range []struct {
		sort    []string
		order   string
		indexed bool
	}{
		{nil, "severity_id DESC, inserted_at DESC, uid DESC, id DESC", true},
		{[]string{"check_id"}, "check_id ASC, inserted_at ASC, uid ASC, id ASC", true},
		{[]string{"severity_id"}, "severity_id ASC, inserted_at ASC, uid ASC, id ASC", true},
		{[]string{"-time"}, "event_time DESC, uid DESC, id DESC", true},
		{[]string{"inserted_at"}, "inserted_at ASC, uid ASC, id ASC", true},
		{[]string{"-uid"}, "uid DESC, id DESC", true},
		{[]string{"-check_id", "-inserted_at"}, "check_id DESC, inserted_at DESC, uid DESC, id DESC", true},
		{[]string{"check_id", "-uid"}, "check_id ASC, uid DESC, inserted_at ASC, id ASC", false},
		{[]string{"check_id", "uid"}, "check_id ASC, uid ASC, inserted_at ASC, id ASC", false},
		{[]string{"-severity_id", "time"}, "severity_id DESC, event_time ASC, inserted_at DESC, uid DESC, id DESC", false},
		{[]string{"time", "-time"}, "event_time ASC, uid ASC, id ASC", true},
	} {
		parts, err := findingOrder(tc.sort)
		if err != nil {
			t.Fatalf("sort %v: %v", tc.sort, err)
		}
		_, indexed := indexKey(parts)
		if got := orderBy(parts, nil); got != tc.order || indexed != tc.indexed {
			t.Errorf("sort %v: ORDER BY %s (index gives it up to id: %v), want %s (%v)", tc.sort, got, indexed, tc.order, tc.indexed)
		}
	}
	if _, err := findingOrder([]string{"severity"}); err == nil {
		t.Error("sort severity (not a sort key) was accepted")
	}
}
