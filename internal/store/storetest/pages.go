package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// testListFindingsByNumber pins numbered pages past the first, which the
// stores find by skipping index keys and then seeking the page's first
// finding (docs/decisions/0015-deep-numbered-pages.md): in every order, at
// every page size, the pages partition exactly the one-page listing and
// the reference order, also where a page starts inside a run of findings
// that share the sort key and the uid (one uid in several scans), whose
// order is then the finding id's.
func testListFindingsByNumber(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := tiedFixture(t, s)
	inserted := map[string]time.Time{}
	stored, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings")
	for _, f := range stored {
		inserted[f.ID] = f.InsertedAt
	}
	var sorts [][]string
	for _, key := range []string{"time", "severity_id", "inserted_at", "check_id", "uid"} {
		sorts = append(sorts, []string{key}, []string{"-" + key})
	}
	// An order an index gives up to id with a tie-breaker named, and
	// orders it does not (the page is then an offset over rows): a check's
	// ties are broken by insertion time before uid.
	sorts = append(sorts, []string{"-check_id", "-inserted_at"}, []string{"check_id", "-uid"}, []string{"check_id", "-time"}, nil)
	for _, sort := range sorts {
		CheckNumberedPages(t, s, tenantA, sort, ids(reference(fs, inserted, store.FindingQuery{Sort: sort})))
	}
}

// CheckNumberedPages fails t unless the findings of tenant in order sort
// are want (their ids) on one page, and again on consecutive numbered
// pages of 1, 3 and 4 findings, each with the total count, until the
// first empty one.
func CheckNumberedPages(t *testing.T, s store.Store, tenant string, sort, want []string) {
	t.Helper()
	ctx := ctxT(t)
	one, total, err := s.ListFindings(ctx, tenant, store.FindingQuery{Sort: sort, Page: store.Page{Size: 100}})
	must(t, err, fmt.Sprintf("ListFindings(sort %v)", sort))
	if total != len(want) || !slices.Equal(ids(one), want) {
		t.Errorf("sort %v, one page: total %d\n got %v\nwant %v", sort, total, ids(one), want)
		return
	}
	for _, size := range []int{1, 3, 4} {
		var got []string
		for n := 1; ; n++ {
			page, total, err := s.ListFindings(ctx, tenant, store.FindingQuery{Sort: sort, Page: store.Page{Number: n, Size: size}})
			must(t, err, fmt.Sprintf("ListFindings(sort %v, page %d of %d)", sort, n, size))
			if total != len(want) {
				t.Fatalf("sort %v, page %d of %d: total %d, want %d", sort, n, size, total, len(want))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, ids(page)...)
			if n > len(want) {
				t.Fatalf("sort %v, pages of %d: page %d is not empty", sort, size, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("sort %v, pages of %d:\n got %v\nwant %v", sort, size, got, want)
		}
	}
}

// tiedFixture stores, for tenant A, findings whose sort keys tie in every
// order, and uids that recur in several scans with the same severity,
// check and time: scans a and b in one batch (one insertion time), c in a
// later one. Tenant B holds the same findings, which no page of A may
// show.
func tiedFixture(t *testing.T, s store.Store) []store.Finding {
	t.Helper()
	ctx := ctxT(t)
	var early, late []store.Finding
	for i := range 7 {
		for j, scan := range []string{"scan-a", "scan-b", "scan-c"} {
			if (i+j)%4 == 0 && i > 0 {
				continue // not every uid is in every scan
			}
			f := finding(scan, fmt.Sprintf("uid-%d", i%5))
			if i >= 5 {
				f.UID = fmt.Sprintf("uid-%d-%s", i, scan) // and some are in one only
			}
			f.SeverityID, f.Severity = i%3+1, []string{"low", "medium", "high"}[i%3]
			f.CheckID = fmt.Sprintf("check-%d", i%2)
			f.Time = baseTime.Add(time.Duration(i%3) * time.Hour)
			if scan == "scan-c" {
				late = append(late, f)
			} else {
				early = append(early, f)
			}
		}
	}
	var out []store.Finding
	for _, tenant := range []string{tenantA, tenantB} {
		must(t, s.StartRun(ctx, tenant, "ing-1", 1, len(early)+len(late)), "StartRun")
		must(t, s.WriteBatch(ctx, tenant, "ing-1", 1, batchOf(early...)), "WriteBatch early")
		time.Sleep(2 * time.Millisecond)
		must(t, s.WriteBatch(ctx, tenant, "ing-1", 1, batchOf(late...)), "WriteBatch late")
	}
	for _, f := range append(early, late...) {
		out = append(out, normalised(tenantA, "ing-1", f))
	}
	return out
}

func ids(fs []store.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}
