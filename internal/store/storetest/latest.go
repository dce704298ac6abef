package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// testLatest pins FindingQuery.Latest where every report of an account
// runs the same checks at the same event time: the report merged last is
// the current one (upload order breaks the tie), a failed or unfinished
// ingestion changes nothing, an older scan ingested again becomes current,
// and filters, sort, keyset pages and counts apply within the current
// findings.
func testLatest(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ingest := func(tenant, ing string, status store.RunStatus, fs ...store.Finding) {
		t.Helper()
		must(t, s.StartRun(ctx, tenant, ing, 1, len(fs)), "StartRun "+ing)
		scans := map[string]store.Scan{}
		for _, f := range fs {
			scans[f.ScanID] = store.Scan{ID: f.ScanID, ProviderType: f.ProviderType, ProviderUID: f.ProviderUID, Trigger: "imported"}
		}
		b := batchOf(fs...)
		for _, sc := range scans {
			b.Scans = append(b.Scans, sc)
		}
		must(t, s.WriteBatch(ctx, tenant, ing, 1, b), "WriteBatch "+ing)
		if status != store.RunRunning {
			must(t, s.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: status}), "FinishRun "+ing)
		}
	}
	// of makes n findings of one scan of provider (type, uid).
	of := func(scan, ptype, puid string, n int, severity string) []store.Finding {
		var out []store.Finding
		for i := range n {
			f := finding(scan, fmt.Sprintf("%s-%d", scan, i))
			f.ProviderType, f.ProviderUID, f.Severity = ptype, puid, severity
			f.CheckID = fmt.Sprintf("check_%d", i)
			out = append(out, f)
		}
		return out
	}
	latest := func(tenant string, q store.FindingQuery) []string {
		t.Helper()
		q.Latest, q.Page = true, store.Page{Size: 100}
		if q.Sort == nil {
			q.Sort = []string{"uid"}
		}
		got, total, err := s.ListFindings(ctx, tenant, q)
		must(t, err, fmt.Sprintf("ListFindings(%+v)", q))
		if total != len(got) {
			t.Errorf("ListFindings(%+v): total %d, but %d rows", q, total, len(got))
		}
		var out []string
		for _, f := range got {
			out = append(out, f.ScanID)
		}
		return slices.Compact(out)
	}
	expect := func(stage string, q store.FindingQuery, want ...string) {
		t.Helper()
		if got := latest(tenantA, q); !slices.Equal(got, want) {
			t.Errorf("%s: latest scans %+v: got %v, want %v", stage, q, got, want)
		}
	}

	expect("no ingestion", store.FindingQuery{})
	ingest(tenantA, "ing-1", store.RunSucceeded, append(of("a1", "aws", "111", 3, "high"), of("g1", "gcp", "proj", 2, "low")...)...)
	expect("one ingestion, two providers", store.FindingQuery{}, "a1", "g1")
	ingest(tenantA, "ing-2", store.RunRunning, of("a2", "aws", "111", 3, "high")...)
	expect("a newer scan still running", store.FindingQuery{}, "a1", "g1")
	must(t, s.FinishRun(ctx, tenantA, "ing-2", 1, store.Outcome{Status: store.RunSucceeded}), "FinishRun ing-2")
	expect("the newer scan completed", store.FindingQuery{}, "a2", "g1")
	ingest(tenantA, "ing-3", store.RunFailed, of("a3", "aws", "111", 4, "high")...)
	expect("a newer scan failed", store.FindingQuery{}, "a2", "g1")
	// Another account of the same type is another provider.
	ingest(tenantA, "ing-4", store.RunSucceeded, of("a4", "aws", "222", 1, "critical")...)
	expect("a second aws account", store.FindingQuery{}, "a2", "a4", "g1")
	// Completion decides, not when the scan was first seen: re-ingesting
	// an older report makes it the latest again.
	ingest(tenantA, "ing-5", store.RunSucceeded, of("a1", "aws", "111", 3, "high")...)
	expect("an older scan re-ingested", store.FindingQuery{}, "a1", "a4", "g1")
	// Two scans of one provider in one report: the later-inserted one.
	ingest(tenantA, "ing-6", store.RunRunning, of("g2", "gcp", "proj", 1, "low")...)
	ingest(tenantA, "ing-6b", store.RunRunning) // no scan: changes nothing
	must(t, s.FinishRun(ctx, tenantA, "ing-6b", 1, store.Outcome{Status: store.RunSucceeded}), "FinishRun ing-6b")
	expect("an ingestion without scans", store.FindingQuery{}, "a1", "a4", "g1")

	// Filters apply within the latest findings.
	expect("severity", store.FindingQuery{Severity: []string{"critical"}}, "a4")
	expect("provider type", store.FindingQuery{ProviderType: []string{"gcp"}}, "g1")
	expect("scan outside the latest", store.FindingQuery{ScanID: "a2"})
	expect("search", store.FindingQuery{Search: "a4-0"}, "a4")
	expect("search outside the latest", store.FindingQuery{Search: "a3-"})

	// Another tenant's latest scans are its own.
	ingest(tenantB, "ing-1", store.RunSucceeded, of("b1", "aws", "111", 2, "high")...)
	if got := latest(tenantB, store.FindingQuery{}); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("tenant B: latest scans %v, want [b1]", got)
	}
	expect("tenant A after tenant B's ingestion", store.FindingQuery{}, "a1", "a4", "g1")

	// Keyset pages partition the latest findings.
	all, total, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Latest: true, Sort: []string{"-severity_id"}, Page: store.Page{Size: 100}})
	must(t, err, "ListFindings latest")
	if total != 6 || len(all) != 6 {
		t.Fatalf("latest findings: %d rows, total %d, want 6", len(all), total)
	}
	var paged []store.Finding
	q := store.FindingQuery{Latest: true, Sort: []string{"-severity_id"}, Page: store.Page{Size: 4}}
	for range 5 {
		page, _, err := s.ListFindings(ctx, tenantA, q)
		must(t, err, "ListFindings latest, keyset page")
		paged = append(paged, page...)
		if len(page) < q.Page.Size {
			break
		}
		k := store.KeyOf(&page[len(page)-1])
		q.After = &k
	}
	if !slices.Equal(uids(paged), uids(all)) {
		t.Errorf("latest keyset pages: %v, want %v", uids(paged), uids(all))
	}

	// Counts over the latest findings.
	groups, err := s.FindingCounts(ctx, tenantA, store.FindingQuery{Latest: true}, []string{"provider_type", "severity"})
	must(t, err, "FindingCounts latest")
	want := []store.FindingGroup{{Values: []string{"aws", "critical"}, Count: 1}, {Values: []string{"aws", "high"}, Count: 3},
		{Values: []string{"gcp", "low"}, Count: 2}}
	if !slices.EqualFunc(groups, want, func(a, b store.FindingGroup) bool { return a.Count == b.Count && slices.Equal(a.Values, b.Values) }) {
		t.Errorf("FindingCounts latest by provider_type, severity: got %v, want %v", groups, want)
	}
	// The summary by scan counts them all, exactly, under a count limit.
	exact, err := s.FindingCounts(ctx, tenantA, store.FindingQuery{Latest: true, CountLimit: 2}, []string{"provider_type", "severity"})
	must(t, err, "FindingCounts latest, limited")
	if !slices.EqualFunc(exact, want, func(a, b store.FindingGroup) bool { return a.Count == b.Count && slices.Equal(a.Values, b.Values) }) {
		t.Errorf("FindingCounts latest by provider_type, severity, count limit 2: got %v, want %v", exact, want)
	}
	// With a search, which no summary holds, the limit stops the count: 3
	// of the 6, each group within its own.
	groups, err = s.FindingCounts(ctx, tenantA, store.FindingQuery{Latest: true, Search: "title of", CountLimit: 2}, []string{"provider_type", "severity"})
	must(t, err, "FindingCounts latest, a search, limited")
	truth := map[string]int{}
	for _, w := range want {
		truth[strings.Join(w.Values, "|")] = w.Count
	}
	checkBoundedGroups(t, "FindingCounts latest with a search, limited to 2", groups, truth, 2)
}

// testLatestOrders pins the latest findings in every order, page by page,
// against the whole history's listing in the same order with only the
// latest scans' findings kept. The scans are written so that the latest
// ones' insertion spans hold findings of scans that are not the latest
// (written by another ingestion at the same time, then replaced) and
// apart from each other (an old scan still the latest of its account),
// and a check holds more latest findings than a page's end.
func testLatestOrders(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	severities := []struct {
		name string
		id   int
	}{{"critical", 5}, {"high", 4}, {"medium", 3}, {"low", 2}}
	// The scans' event times: c1's apart, g1's (not the latest) among
	// a1's, g2's and b1's overlapping.
	eventOffsets := map[string]time.Duration{"c1": -48 * time.Hour, "a1": 0, "g1": 2 * time.Minute, "g2": 3 * time.Hour, "b1": 3*time.Hour + 2*time.Minute}
	n := 0
	of := func(scan, ptype, puid string, count int) []store.Finding {
		var out []store.Finding
		for range count {
			n++
			f := finding(scan, fmt.Sprintf("%s-%02d", scan, n))
			f.ProviderType, f.ProviderUID = ptype, puid
			f.CheckID = fmt.Sprintf("check_%d", n%3) // check_0 and check_1 hold more than a page's end
			if n%7 == 0 {
				f.CheckID = "check_3"
			}
			sev := severities[n%len(severities)]
			f.Severity, f.SeverityID = sev.name, sev.id
			f.Time = baseTime.Add(eventOffsets[scan] + time.Duration(n%5)*time.Minute)
			out = append(out, f)
		}
		return out
	}
	write := func(ing string, fs []store.Finding) {
		t.Helper()
		b := batchOf(fs...)
		b.Scans = []store.Scan{{ID: fs[0].ScanID, ProviderType: fs[0].ProviderType, ProviderUID: fs[0].ProviderUID, Trigger: "imported"}}
		must(t, s.WriteBatch(ctx, tenantA, ing, 1, b), "WriteBatch "+ing)
	}
	start := func(ing string) { t.Helper(); must(t, s.StartRun(ctx, tenantA, ing, 1, 0), "StartRun "+ing) }
	m := newCurrentModel()
	finish := func(ing string, scans ...string) {
		t.Helper()
		must(t, s.FinishRun(ctx, tenantA, ing, 1, store.Outcome{Status: store.RunSucceeded}), "FinishRun "+ing)
		m.merge(storedHistory(t, s, tenantA), scans...)
	}
	// Findings but no latest scan: an ingestion still running.
	start("ing-running")
	write("ing-running", of("r1", "aws", "444", 4))
	for _, sort := range []string{"check_id", "-severity_id", "time"} {
		got, total, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Latest: true, Sort: []string{sort}, Page: store.Page{Size: 10}})
		must(t, err, "ListFindings latest, none yet, sort "+sort)
		if len(got) != 0 || total != 0 {
			t.Errorf("no latest scan yet, sort %s: %d findings, count %d", sort, len(got), total)
		}
	}
	start("ing-0") // an old scan, still the latest of account 333
	write("ing-0", of("c1", "aws", "333", 7))
	finish("ing-0", "c1")
	start("ing-1") // a1 in two batches, with g1 written between them
	start("ing-2")
	write("ing-1", of("a1", "aws", "111", 8))
	write("ing-2", of("g1", "gcp", "proj", 9))
	write("ing-1", of("a1", "aws", "111", 10))
	finish("ing-2", "g1")
	finish("ing-1", "a1")
	start("ing-3") // g2 replaces g1, whose findings stay inside a1's span
	write("ing-3", of("g2", "gcp", "proj", 6))
	finish("ing-3", "g2")
	start("ing-4")
	write("ing-4", of("b1", "aws", "222", 5))
	finish("ing-4", "b1")
	// A finding of a latest scan written again with an event time past
	// every other is listed first, newest first.
	start("ing-5")
	moved := of("a1", "aws", "111", 1)[0]
	moved.UID = "a1-08"
	moved.Time = baseTime.Add(24 * time.Hour)
	write("ing-5", []store.Finding{moved})
	finish("ing-5", "a1")
	current := m.current(storedHistory(t, s, tenantA))

	// One scan's findings in insertion order, a1's with g1's written
	// between its batches, against the whole history's.
	for _, scan := range []string{"a1", "g1", "c1", "none"} {
		for _, sort := range []string{"-inserted_at", "inserted_at"} {
			history, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Sort: []string{sort}, Page: store.Page{Size: 1000}})
			must(t, err, "ListFindings, the whole history")
			var want []string
			for _, f := range history {
				if f.ScanID == scan {
					want = append(want, f.ID)
				}
			}
			q := store.FindingQuery{ScanID: scan, Sort: []string{sort}}
			var got []string
			for number := 1; number <= 10; number++ {
				q.Page = store.Page{Number: number, Size: 4}
				page, _, err := s.ListFindings(ctx, tenantA, q)
				must(t, err, "ListFindings of scan "+scan)
				got = append(got, ids(page)...)
				if len(page) < 4 {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("scan %s, sort %s: pages of 4 gave %v, want %v", scan, sort, got, want)
			}
		}
	}
	newest, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Latest: true, Sort: []string{"-time"}, Page: store.Page{Size: 1}})
	must(t, err, "ListFindings latest, newest first")
	if len(newest) != 1 || newest[0].UID != moved.UID {
		t.Errorf("latest, newest event first: got %v, want %s, written again with a later event time", uids(newest), moved.UID)
	}

	for _, filter := range []struct {
		name string
		q    store.FindingQuery
	}{
		{"no filter", store.FindingQuery{}},
		{"severity", store.FindingQuery{Severity: []string{"high"}}},
		{"check", store.FindingQuery{CheckID: "check_1"}},
		{"provider type", store.FindingQuery{ProviderType: []string{"aws"}}},
		{"a check without latest findings", store.FindingQuery{CheckID: "check_9"}},
	} {
		for _, key := range []string{"check_id", "severity_id", "time", "inserted_at", "uid"} {
			for _, sort := range []string{key, "-" + key} {
				what := fmt.Sprintf("latest, %s, sort %s", filter.name, sort)
				q := filter.q
				q.Sort = []string{sort}
				q.Page = store.Page{Size: 1000}
				history, _, err := s.ListFindings(ctx, tenantA, q)
				must(t, err, what+": the whole history")
				var want []string
				for _, f := range history {
					if current[f.ID] {
						want = append(want, f.ID)
					}
				}
				q.Latest = true
				var numbered []string
				for number := 1; number <= 20; number++ {
					q.Page = store.Page{Number: number, Size: 4}
					page, total, err := s.ListFindings(ctx, tenantA, q)
					must(t, err, what)
					if total != len(want) {
						t.Errorf("%s, page %d: count %d, want %d", what, number, total, len(want))
					}
					numbered = append(numbered, ids(page)...)
					if len(page) < 4 {
						break
					}
				}
				if !slices.Equal(numbered, want) {
					t.Errorf("%s: numbered pages of 4 gave %v, want %v", what, numbered, want)
				}
				var cursor []string
				q.Page = store.Page{Size: 3}
				for range 20 {
					page, _, err := s.ListFindings(ctx, tenantA, q)
					must(t, err, what+", cursor")
					cursor = append(cursor, ids(page)...)
					if len(page) < 3 {
						break
					}
					k := store.KeyOf(&page[len(page)-1])
					q.After = &k
				}
				if !slices.Equal(cursor, want) {
					t.Errorf("%s: cursor pages of 3 gave %v, want %v", what, cursor, want)
				}
			}
		}
	}
}

// CheckLatestSpans checks the latest view of tenant by event time and by
// check, either way, on a store upgraded from before ScanBoundsTable (the
// upgrade must bound the findings already written). The old rows are, of
// one account:
//
//	uid  scan  current  check  event time
//	u-1  s-1   yes      c-2    third
//	u-2  s-1   no       c-1    first of s-1
//	u-3  s-2   yes      c-1    second (c-1's newest run)
//	u-4  s-3   yes      c-3    earliest
func CheckLatestSpans(t *testing.T, s store.Store, tenant string) {
	t.Helper()
	for _, c := range []struct {
		sort string
		want []string
	}{
		{"time", []string{"u-4", "u-3", "u-1"}},
		{"-time", []string{"u-1", "u-3", "u-4"}},
		{"check_id", []string{"u-3", "u-1", "u-4"}},
		{"-check_id", []string{"u-4", "u-1", "u-3"}},
	} {
		got, _, err := s.ListFindings(ctxT(t), tenant, store.FindingQuery{Latest: true, Sort: []string{c.sort}, Page: store.Page{Size: 10}})
		must(t, err, "ListFindings latest, sort "+c.sort)
		if !slices.Equal(uids(got), c.want) {
			t.Errorf("latest findings by %s after the upgrade: %v, want %v", c.sort, uids(got), c.want)
		}
	}
}

// testLatestTiesAcrossScans pins the latest view's orders when findings of
// two latest scans tie on every sort column but the id: one uid reported
// for two accounts at the same event time (two reports), or written in one
// batch (the same insertion time). Each order is the history's, so that
// numbered pages and cursor pages list every latest finding once, whatever
// the page size; a read that cut a run of ties by anything but the id
// showed one finding on two pages and never the other.
func testLatestTiesAcrossScans(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	total := 0
	// ingest writes, in one batch, six findings of one uid set for each
	// account: every finding ties with its uid's in the other scans on the
	// event time, and within the batch on the insertion time too.
	ingest := func(ing string, accounts ...string) {
		t.Helper()
		var fs []store.Finding
		var scans []store.Scan
		for _, acct := range accounts {
			scan := "scan-" + acct
			scans = append(scans, store.Scan{ID: scan, ProviderType: "aws", ProviderUID: acct, Trigger: "imported"})
			for i := range 6 {
				f := finding(scan, fmt.Sprintf("shared-%d", i))
				f.ProviderUID = acct
				f.CheckID = fmt.Sprintf("check_%d", i%2)
				fs = append(fs, f)
			}
		}
		b := batchOf(fs...)
		b.Scans = scans
		must(t, s.StartRun(ctx, tenantA, ing, 1, len(fs)), "StartRun "+ing)
		must(t, s.WriteBatch(ctx, tenantA, ing, 1, b), "WriteBatch "+ing)
		must(t, s.FinishRun(ctx, tenantA, ing, 1, store.Outcome{Status: store.RunSucceeded}), "FinishRun "+ing)
		total += len(fs)
	}
	// Two reports, each of one account, then one of two: the stores keep
	// a batch's rows in id order, so ties across batches are what an
	// order that ignores the id would get wrong.
	ingest("ing-1", "444")
	ingest("ing-2", "333")
	ingest("ing-3", "111", "222")
	fs := make([]store.Finding, total)

	for _, key := range []string{"time", "check_id", "severity_id", "inserted_at", "uid"} {
		for _, sort := range []string{key, "-" + key} {
			want, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Sort: []string{sort}, Page: store.Page{Size: 100}})
			must(t, err, "ListFindings, the history, sort "+sort)
			if len(want) != len(fs) {
				t.Fatalf("sort %s: the history lists %d findings, want %d", sort, len(want), len(fs))
			}
			for _, size := range []int{1, 2, 4, 5} {
				what := fmt.Sprintf("latest, sort %s, pages of %d", sort, size)
				q := store.FindingQuery{Latest: true, Sort: []string{sort}}
				var numbered []string
				for number := 1; number <= len(fs); number++ {
					q.Page = store.Page{Number: number, Size: size}
					page, total, err := s.ListFindings(ctx, tenantA, q)
					must(t, err, what)
					if total != len(fs) {
						t.Errorf("%s, page %d: count %d, want %d", what, number, total, len(fs))
					}
					numbered = append(numbered, ids(page)...)
					if len(page) < size {
						break
					}
				}
				if !slices.Equal(numbered, ids(want)) {
					t.Errorf("%s: numbered pages gave %v, want %v", what, numbered, ids(want))
				}
				var cursor []string
				q.Page = store.Page{Size: size}
				for range len(fs) + 1 {
					page, _, err := s.ListFindings(ctx, tenantA, q)
					must(t, err, what+", cursor")
					cursor = append(cursor, ids(page)...)
					if len(page) < size {
						break
					}
					k := store.KeyOf(&page[len(page)-1])
					q.After = &k
				}
				if !slices.Equal(cursor, ids(want)) {
					t.Errorf("%s: cursor pages gave %v, want %v", what, cursor, ids(want))
				}
			}
		}
	}
}
