package sqlite

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
	"github.com/posture-dev/posture/internal/store/storetest"
)

func walkStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "walk.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.WritePlanFindings(t, s)
	return s
}

// TestSearchWalkAnswersAsTheLookup checks that a page and count found by a
// walk, of any length (one finding, a few, past the end), are the ones the
// trigram lookup finds: for texts in every finding, in a run of them and
// in one, in each order a walk serves, on numbered and cursor pages, with
// and without another filter. Short walks end before the page is full or
// the count passes its bound, so the lookup's answer must take over.
func TestSearchWalkAnswersAsTheLookup(t *testing.T) {
	s := walkStore(t)
	var cases int
	for _, term := range []string{"bucket", "Finding 27", "bucket-2999"} {
		for _, sort := range []string{"-inserted_at", "inserted_at", "time", "-time"} {
			for _, severity := range [][]string{nil, {"critical"}} {
				for _, page := range []store.Page{{Number: 1, Size: 10}, {Number: 2, Size: 10}, {Number: 7, Size: 3}, {Number: 1, Size: 100}} {
					for _, bound := range []int{page.Number*page.Size + page.Size, 10_100} {
						q := store.FindingQuery{Search: term, Sort: []string{sort}, Severity: severity, Page: page, CountLimit: bound,
							// The latest scans' findings, a few percent of
							// these, on two of the pages.
							Latest: page.Size != 10}
						want, _ := lookup(t, s, q)
						if page.Number == 1 && len(want) > 0 {
							// The cursor page after the first page's last finding.
							k := store.KeyOf(&want[len(want)-1])
							cq := q
							cq.After = &k
							compareWalks(t, s, cq)
						}
						compareWalks(t, s, q)
						cases++
					}
				}
			}
		}
	}
	if cases == 0 {
		t.Fatal("no case ran")
	}
}

func lookup(t *testing.T, s *Store, q store.FindingQuery) ([]store.Finding, int) {
	t.Helper()
	count, page, err := engine.FindingList(engine.SQLite, "tenant-a", q)
	if err != nil {
		t.Fatal(err)
	}
	rows, n, err := s.listFindings(context.Background(), q, count, page)
	if err != nil {
		t.Fatal(err)
	}
	return rows, n
}

func compareWalks(t *testing.T, s *Store, q store.FindingQuery) {
	t.Helper()
	if !engine.Walkable(q) {
		t.Fatalf("%+v: not walkable", q)
	}
	want, wantCount := lookup(t, s, q)
	count, page, err := engine.FindingList(engine.SQLite, "tenant-a", q)
	if err != nil {
		t.Fatal(err)
	}
	for _, walk := range []int{1, 5, 40, 100_000} {
		got, gotCount, err := s.listByWalk(context.Background(), "tenant-a", q, walk, count, page)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != ids(want) || gotCount != wantCount {
			t.Errorf("search %q sort %v severity %v page %+v after %v, walk %d: got %d findings [%s] count %d; the lookup: %d [%s] count %d",
				q.Search, q.Sort, q.Severity, q.Page, q.After != nil, walk, len(got), ids(got), gotCount, len(want), ids(want), wantCount)
		}
	}
}

func ids(fs []store.Finding) string {
	out := make([]string, len(fs))
	for i := range fs {
		out[i] = fs[i].UID + "/" + fs[i].ScanID
	}
	return strings.Join(out, " ")
}

// TestCommonSearchChoice checks which searches the store walks: a text in
// every finding, in the orders of time, and nothing else.
func TestCommonSearchChoice(t *testing.T) {
	s := walkStore(t)
	for _, c := range []struct {
		name string
		q    store.FindingQuery
		want bool
	}{
		{"a text in every finding, newest first", store.FindingQuery{Search: "bucket", Sort: []string{"-inserted_at"}}, true},
		{"a text in every finding, by event time", store.FindingQuery{Search: "about a", Sort: []string{"time"}}, true},
		{"one finding's text", store.FindingQuery{Search: "bucket-2999", Sort: []string{"-inserted_at"}}, false},
		{"in uid order, where matches bunch", store.FindingQuery{Search: "bucket", Sort: []string{"uid"}}, false},
		{"by severity", store.FindingQuery{Search: "bucket", Sort: []string{"-severity_id"}}, false},
		{"of one scan, which its index bounds", store.FindingQuery{Search: "bucket", Sort: []string{"-inserted_at"}, ScanID: "scan-1"}, false},
		{"of the latest scans", store.FindingQuery{Search: "bucket", Sort: []string{"-inserted_at"}, Latest: true}, true},
		{"of the latest scans, one finding's text", store.FindingQuery{Search: "bucket-2999", Sort: []string{"-inserted_at"}, Latest: true}, false},
		{"too short to look up", store.FindingQuery{Search: "bu", Sort: []string{"-inserted_at"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.q.CountLimit = 20
			_, common, err := s.commonSearch(context.Background(), "tenant-a", c.q)
			if err != nil {
				t.Fatal(err)
			}
			if common != c.want {
				t.Errorf("walked: %v, want %v", common, c.want)
			}
		})
	}
	// Without a bound the count would read every match: always the lookup.
	if _, common, _ := s.commonSearch(context.Background(), "tenant-a", store.FindingQuery{Search: "bucket"}); common {
		t.Error("a search whose count is not bounded was walked")
	}
}

// TestSearchWalkPlans checks that both statements of a walk read the
// order's index from the tenant (or the cursor) on, and neither the
// trigram index nor every finding; and that counting a text's candidates
// reads the trigram index alone, which stops at the limit, and no
// finding.
func TestSearchWalkPlans(t *testing.T) {
	s := walkStore(t)
	candidates := explainPlan(t, s, engine.SearchCandidates(store.FindingQuery{Search: "bucket"}, 100))
	if text := strings.Join(candidates, "\n"); !strings.Contains(text, "SCAN findings_search VIRTUAL TABLE") || strings.Contains(text, "findings USING") {
		t.Errorf("counting candidates does not read the trigram index alone:\n  %s", strings.Join(candidates, "\n  "))
	}
	for _, c := range []struct {
		sort   string
		latest bool
	}{{"-inserted_at", false}, {"inserted_at", false}, {"time", false}, {"-time", false}, {"-inserted_at", true}, {"time", true}} {
		sort := c.sort
		q := store.FindingQuery{Search: "bucket", Sort: []string{sort}, CountLimit: 20, Latest: c.latest}
		first, _ := lookup(t, s, q)
		k := store.KeyOf(&first[len(first)-1])
		for _, after := range []*store.FindingKey{nil, &k} {
			q.After = after
			count, page, err := engine.FindingListWalk(engine.SQLite, "tenant-a", q, 1000)
			if err != nil {
				t.Fatal(err)
			}
			index := map[string]string{"inserted_at": "findings_inserted", "time": "findings_time"}[strings.TrimPrefix(sort, "-")]
			for name, st := range map[string]engine.Statement{"count": count, "page": page} {
				plan := explainPlan(t, s, st)
				text := strings.Join(plan, "\n")
				if !regexp.MustCompile(`SEARCH findings USING (COVERING )?INDEX `+index+` \(tenant=\?`).MatchString(text) ||
					strings.Contains(text, "findings_search") || regexp.MustCompile(`(?m)^\s*SCAN findings\b`).MatchString(text) {
					t.Errorf("sort %s, latest %v, cursor %v, %s: does not walk %s alone:\n%s\n  %s", sort, c.latest, after != nil, name, index, st.SQL, strings.Join(plan, "\n  "))
				}
			}
		}
	}
}

// TestLatestSearchCountsTakeNewestCandidates checks that grouped counts
// of the latest view with a search read the trigram index's candidates
// newest first, as FTS5 serves them (no sort), where the latest scans'
// matches are: SQLite drops the order of a subquery it flattens.
func TestLatestSearchCountsTakeNewestCandidates(t *testing.T) {
	s := walkStore(t)
	st, err := engine.FindingCountsScan(engine.SQLite, "tenant-a", store.FindingQuery{Latest: true, Search: "bucket", CountLimit: 1000}, []string{"check_id"})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(explainPlan(t, s, st), "\n")
	if !regexp.MustCompile(`CO-ROUTINE candidates\n\s*SCAN findings_search VIRTUAL TABLE`).MatchString(text) || strings.Contains(text, "FOR ORDER BY") {
		t.Errorf("the candidates are not read newest first from the trigram index:\n%s\n%s", st.SQL, text)
	}
}
