package storetest

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

var baseTime = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)

func finding(scan, uid string) store.Finding {
	return store.Finding{
		UID: uid, ScanID: scan, CheckID: "check_" + uid, Title: "Title of " + uid,
		Severity: "high", SeverityID: 4, StatusCode: "FAIL", Status: "New",
		Region: "eu-west-1", ProviderType: "aws", ProviderUID: "123456789012",
		ResourceUID: "arn:aws:s3:::" + uid, Time: baseTime,
		Raw: []byte(`{"finding_info":{"uid":"` + uid + `"}}`),
	}
}

func batchOf(fs ...store.Finding) store.Batch { return store.Batch{Findings: fs} }

// normalised is what the store is expected to return for f written by
// ingestion ing of tenant.
func normalised(tenant, ing string, f store.Finding) store.Finding {
	f.ID = store.FindingID(tenant, f.ScanID, f.UID)
	f.IngestionID = ing
	sev, sid, _ := ocsf.Severity(f.Severity, int64(f.SeverityID))
	f.Severity, f.SeverityID = sev, int(sid)
	f.StatusCode = strings.ToUpper(f.StatusCode)
	f.ProviderType = strings.ToLower(f.ProviderType)
	f.Time = f.Time.UTC().Truncate(time.Microsecond)
	f.InsertedAt, f.UpdatedAt = time.Time{}, time.Time{}
	return f
}

func sameFinding(t *testing.T, what string, got, want store.Finding) {
	t.Helper()
	checkUTC(t, what+" Time", got.Time)
	checkUTC(t, what+" InsertedAt", got.InsertedAt)
	checkUTC(t, what+" UpdatedAt", got.UpdatedAt)
	if got.InsertedAt.IsZero() || got.UpdatedAt.Before(got.InsertedAt) {
		t.Errorf("%s: inserted_at %v updated_at %v", what, got.InsertedAt, got.UpdatedAt)
	}
	g := got
	g.InsertedAt, g.UpdatedAt = time.Time{}, time.Time{}
	if !g.Time.Equal(want.Time) {
		t.Errorf("%s: Time %v, want %v", what, g.Time, want.Time)
	}
	g.Time = want.Time
	if !reflect.DeepEqual(g, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, want)
	}
}

func expectFindings(t *testing.T, s store.Store, tenant string, q store.FindingQuery, want int) []store.Finding {
	t.Helper()
	q.Page.Size = 1000
	fs, n, err := s.ListFindings(context.Background(), tenant, q)
	must(t, err, "ListFindings")
	if n != want || len(fs) != want {
		t.Fatalf("ListFindings(%+v): %d rows, total %d, want %d", q, len(fs), n, want)
	}
	return fs
}

func testWriteBatchRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 2), "StartRun")
	f := store.Finding{
		UID: "prowler-aws-iam_root_mfa-123456789012-us-east-1-root", ScanID: "scan-1",
		CheckID: "iam_root_mfa_enabled", Title: "Ensure MFA is enabled for the root account",
		Severity: "Critical", SeverityID: 5, StatusCode: "fail", Status: "New", Region: "us-east-1",
		ProviderType: "AWS", ProviderUID: "123456789012", ResourceUID: "arn:aws:iam::123456789012:root",
		// Nanoseconds and a non-UTC zone: the store keeps microseconds, in UTC.
		Time: time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600)),
		// Odd spacing, key order, escapes and a trailing newline must survive.
		Raw: []byte("{ \"class_uid\":2004,\n\t\"z\":1, \"a\" : \"\\u00e9t\\u00e9 \u00e9\", \"n\":1.50e+3 }\n"),
		// Callers' values for these are ignored.
		ID: "caller-chosen", IngestionID: "someone-else",
		InsertedAt: time.Unix(1, 0), UpdatedAt: time.Unix(2, 0),
	}
	k := store.Finding{UID: "k8s-1", ScanID: "scan-2", Severity: "low", SeverityID: 2, StatusCode: "PASS",
		ProviderType: "kubernetes", ProviderUID: "cluster-1", Time: baseTime, Raw: []byte(`[]`)}
	// Before PostgreSQL's epoch (2000-01-01), which binary COPY counts from.
	old := store.Finding{UID: "y2k", ScanID: "scan-2", SeverityID: 1, Time: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), Raw: []byte(`{}`)}
	before := time.Now().Add(-time.Second)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{f, k, old},
		Scans: []store.Scan{
			{ID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"},
			{ID: "scan-2", ProviderType: "kubernetes", ProviderUID: "cluster-1", Trigger: "imported"},
		},
	}), "WriteBatch")

	wantID := store.FindingID(tenantA, "scan-1", f.UID)
	if wantID == store.FindingID(tenantB, "scan-1", f.UID) || wantID == store.FindingID(tenantA, "scan-2", f.UID) {
		t.Fatal("FindingID ignores tenant or scan")
	}
	got, err := s.GetFinding(ctx, tenantA, wantID)
	must(t, err, "GetFinding")
	sameFinding(t, "GetFinding", got, normalised(tenantA, "ing-1", f))
	if got.InsertedAt.Before(before) || got.InsertedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("InsertedAt %v is not now", got.InsertedAt)
	}
	if !bytes.Equal(got.Raw, f.Raw) {
		t.Errorf("raw changed:\n got %q\nwant %q", got.Raw, f.Raw)
	}
	if got.Severity != "critical" || got.StatusCode != "FAIL" || got.ProviderType != "aws" {
		t.Errorf("indexed columns not normalised: %q %q %q", got.Severity, got.StatusCode, got.ProviderType)
	}
	got2, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-2", "k8s-1"))
	must(t, err, "GetFinding k8s")
	sameFinding(t, "GetFinding k8s", got2, normalised(tenantA, "ing-1", k))
	got3, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-2", "y2k"))
	must(t, err, "GetFinding y2k")
	sameFinding(t, "GetFinding y2k", got3, normalised(tenantA, "ing-1", old))

	fs := expectFindings(t, s, tenantA, store.FindingQuery{}, 3)
	sameFinding(t, "ListFindings[0]", fs[0], normalised(tenantA, "ing-1", f))
}

func testWriteBatchIdempotent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var fs []store.Finding
	for i := range 30 {
		fs = append(fs, finding("scan-1", fmt.Sprintf("u%02d", i)))
	}
	b := store.Batch{Findings: fs, Scans: []store.Scan{{ID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"}}}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 30), "StartRun")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, b), "WriteBatch")
	first := expectFindings(t, s, tenantA, store.FindingQuery{}, 30)
	scans1, _, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")

	// The same attempt writing again (a retried batch) and a new ingestion of
	// the same file both converge on the same rows.
	time.Sleep(2 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, b), "WriteBatch again")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 30)

	time.Sleep(2 * time.Millisecond)
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 30), "StartRun ing-2")
	changed := slices.Clone(fs)
	changed[0].Title = "changed title"
	changed[0].Raw = []byte(`{"changed":true}`)
	changed[0].SeverityID, changed[0].Severity = 1, "informational"
	b2 := b
	b2.Findings = changed
	b2.Scans = []store.Scan{{ID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "scheduled"}}
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, b2), "WriteBatch ing-2")
	second := expectFindings(t, s, tenantA, store.FindingQuery{Sort: []string{"uid"}}, 30)
	byID := map[string]store.Finding{}
	for _, f := range first {
		byID[f.ID] = f
	}
	for i, f := range second {
		old, ok := byID[f.ID]
		if !ok {
			t.Fatalf("finding %s got a new id on re-ingestion", f.UID)
		}
		if !f.InsertedAt.Equal(old.InsertedAt) {
			t.Errorf("%s: inserted_at %v -> %v", f.UID, old.InsertedAt, f.InsertedAt)
		}
		if !f.UpdatedAt.After(old.UpdatedAt) {
			t.Errorf("%s: updated_at not advanced: %v -> %v", f.UID, old.UpdatedAt, f.UpdatedAt)
		}
		sameFinding(t, f.UID, f, normalised(tenantA, "ing-2", changed[i]))
	}
	if n := len(expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-1"}, 0)); n != 0 {
		t.Fatal("rows still attributed to ing-1")
	}

	scans2, total, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if total != 1 || len(scans2) != 1 {
		t.Fatalf("ListScans: %d rows total %d, want 1", len(scans2), total)
	}
	sc := scans2[0]
	if sc.ID != "scan-1" || sc.Trigger != "scheduled" || sc.IngestionID != "ing-2" || sc.FindingCount != 30 ||
		!sc.InsertedAt.Equal(scans1[0].InsertedAt) || !sc.UpdatedAt.After(scans1[0].UpdatedAt) {
		t.Fatalf("scan after upsert: %+v (before: %+v)", sc, scans1[0])
	}

	// A batch that is partly new and partly stored (a re-upload of a report
	// that grew) keeps the new rows and updates the others, whatever the
	// order of the two kinds in the batch.
	must(t, s.StartRun(ctx, tenantA, "ing-3", 1, 40), "StartRun ing-3")
	var mixed []store.Finding
	for i := range 10 {
		before, after := finding("scan-1", fmt.Sprintf("a%02d", i)), finding("scan-1", fmt.Sprintf("z%02d", i))
		stored := fs[10+i]
		stored.Title = "updated by ing-3"
		mixed = append(mixed, before, stored, after)
	}
	must(t, s.WriteBatch(ctx, tenantA, "ing-3", 1, store.Batch{Findings: mixed}), "WriteBatch ing-3")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 50)
	updated := 0
	for _, f := range expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-3"}, 30) {
		if f.Title == "updated by ing-3" {
			updated++
		}
	}
	if updated != 10 {
		t.Fatalf("%d of the 10 stored rows of a mixed batch were updated", updated)
	}
}

func testWriteBatchDuplicates(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 3), "StartRun")
	a1 := finding("scan-1", "dup")
	a2 := finding("scan-1", "dup")
	a2.Title = "last wins"
	other := finding("scan-2", "dup") // same uid, other scan: a different finding
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{a1, other, a2},
		Scans:    []store.Scan{{ID: "scan-1", Trigger: "a"}, {ID: "scan-1", Trigger: "b"}},
	}), "WriteBatch with duplicates")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 2)
	got, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-1", "dup"))
	must(t, err, "GetFinding")
	if got.Title != "last wins" {
		t.Fatalf("title %q, want the last duplicate's", got.Title)
	}
	scans, _, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if len(scans) != 1 || scans[0].Trigger != "b" {
		t.Fatalf("scans %+v", scans)
	}
}

func testWriteBatchStale(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	wantErr(t, s.WriteBatch(ctx, tenantA, "nope", 1, batchOf(finding("scan-1", "u"))), store.ErrNotFound, "WriteBatch without run")
	must(t, s.StartRun(ctx, tenantA, "ing-1", 2, 3), "StartRun")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{finding("scan-1", "u")},
		Scans:    []store.Scan{{ID: "scan-1"}},
		Errors:   []store.IngestionError{{Code: "x"}},
	}), store.ErrStaleAttempt, "WriteBatch older attempt")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 3, batchOf(finding("scan-1", "u"))), store.ErrStaleAttempt, "WriteBatch newer attempt")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 0)
	scans, n, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if n != 0 || len(scans) != 0 {
		t.Fatalf("stale batch wrote scans: %+v", scans)
	}
	_, n, err = s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 0 {
		t.Fatalf("stale batch wrote %d error rows", n)
	}
}

func testWriteBatchValidation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 3), "StartRun")
	bad := []store.Batch{
		batchOf(finding("scan-1", "ok"), finding("scan-1", "")),
		batchOf(finding("", "no-scan")),
		{Scans: []store.Scan{{ID: ""}}},
		{Errors: []store.IngestionError{{Code: ""}}},
	}
	for i, b := range bad {
		wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, b), store.ErrInvalidArgument, fmt.Sprintf("bad batch %d", i))
	}
	expectFindings(t, s, tenantA, store.FindingQuery{}, 0)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{}), "empty batch")
}

// testFailedIngestionAttribution is what filter[ingestion] promises: a
// finding belongs to the last ingestion that wrote it and did not fail.
// Ingestion A stores 3,000 findings and completes; B rewrites them and adds
// 3,000 of its own over three attempts (two lost, as when a worker is killed)
// and fails. A keeps its 3,000, B has only the 3,000 it was first to write.
func testFailedIngestionAttribution(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n, per = 3000, 500
	old := make([]store.Finding, n)
	fresh := make([]store.Finding, n)
	for i := range n {
		old[i] = finding("scan-1", fmt.Sprintf("old-%04d", i))
		fresh[i] = finding("scan-1", fmt.Sprintf("new-%04d", i))
	}
	write := func(ing string, attempt int, fs []store.Finding) {
		t.Helper()
		for i := 0; i < len(fs); i += per {
			must(t, s.WriteBatch(ctx, tenantA, ing, attempt, batchOf(fs[i:min(i+per, len(fs))]...)), fmt.Sprintf("WriteBatch %s attempt %d", ing, attempt))
		}
	}
	must(t, s.StartRun(ctx, tenantA, "ing-a", 1, n), "StartRun A")
	write("ing-a", 1, old)
	must(t, s.FinishRun(ctx, tenantA, "ing-a", 1, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: n}}), "FinishRun A")
	allFindings(t, s, tenantA, "ing-a", n)

	// B's batches mix stored and new findings in both orders, so both the
	// plain insert and the upsert paths of an engine carry its writes.
	var mixed []store.Finding
	for i := 0; i < n; i += per {
		if i/per%2 == 0 {
			mixed = append(mixed, old[i:i+per]...)
			mixed = append(mixed, fresh[i:i+per]...)
		} else {
			mixed = append(mixed, fresh[i:i+per]...)
			mixed = append(mixed, old[i:i+per]...)
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		must(t, s.StartRun(ctx, tenantA, "ing-b", attempt, 2*n), fmt.Sprintf("StartRun B attempt %d", attempt))
		// A lost attempt gets part of the way; the last gets through.
		upto := len(mixed) * attempt / 3
		write("ing-b", attempt, mixed[:upto])
	}
	// While B runs, what it has written so far is its.
	allFindings(t, s, tenantA, "ing-b", 2*n)
	allFindings(t, s, tenantA, "ing-a", 0)
	must(t, s.FinishRun(ctx, tenantA, "ing-b", 3, store.Outcome{Status: store.RunFailed, Message: "the worker stopped without a result 3 times"}), "FinishRun B failed")

	for _, f := range allFindings(t, s, tenantA, "ing-a", n) {
		if !strings.HasPrefix(f.UID, "old-") {
			t.Fatalf("finding %s attributed to ing-a, which never wrote it", f.UID)
		}
	}
	for _, f := range allFindings(t, s, tenantA, "ing-b", n) {
		if !strings.HasPrefix(f.UID, "new-") {
			t.Fatalf("finding %s attributed to the failed ing-b, which only rewrote it", f.UID)
		}
	}
	allFindings(t, s, tenantA, "", 2*n)

	// A later ingestion that completes takes over what it rewrites, and a
	// failure after it gives the findings back to it, not to A.
	must(t, s.StartRun(ctx, tenantA, "ing-c", 1, 10), "StartRun C")
	write("ing-c", 1, old[:10])
	must(t, s.FinishRun(ctx, tenantA, "ing-c", 1, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: 10}}), "FinishRun C")
	must(t, s.StartRun(ctx, tenantA, "ing-d", 1, 20), "StartRun D")
	write("ing-d", 1, old[:20])
	must(t, s.FinishRun(ctx, tenantA, "ing-d", 1, store.Outcome{Status: store.RunFailed, Message: "boom"}), "FinishRun D failed")
	expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-c"}, 10)
	allFindings(t, s, tenantA, "ing-a", n-10)
	expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-d"}, 0)

	// Another tenant's failure touches nothing of tenant A's.
	must(t, s.StartRun(ctx, tenantB, "ing-a", 1, 1), "StartRun other tenant")
	must(t, s.WriteBatch(ctx, tenantB, "ing-a", 1, batchOf(old[0])), "WriteBatch other tenant")
	must(t, s.FinishRun(ctx, tenantB, "ing-a", 1, store.Outcome{Status: store.RunFailed, Message: "boom"}), "FinishRun other tenant")
	expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-c"}, 10)
}

// allFindings pages through the tenant's findings of one ingestion (all of
// them for ""), checking the total on every page.
func allFindings(t *testing.T, s store.Store, tenant, ingestion string, want int) []store.Finding {
	t.Helper()
	var out []store.Finding
	for page := 1; ; page++ {
		q := store.FindingQuery{IngestionID: ingestion, Sort: []string{"uid"}, Page: store.Page{Number: page, Size: 1000}}
		fs, total, err := s.ListFindings(context.Background(), tenant, q)
		must(t, err, "ListFindings")
		if total != want {
			t.Fatalf("findings of ingestion %q: total %d, want %d", ingestion, total, want)
		}
		out = append(out, fs...)
		if len(fs) < q.Page.Size {
			break
		}
	}
	if len(out) != want {
		t.Fatalf("findings of ingestion %q: %d rows over all pages, want %d", ingestion, len(out), want)
	}
	return out
}

func testIngestionErrors(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 100), "StartRun")
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 100), "StartRun ing-2")
	ptr := func(i int) *int { return &i }
	// Written out of order across batches; listed job-level first, then by
	// record index, then in insertion order.
	b1 := []store.IngestionError{
		{RecordIndex: ptr(7), FindingUID: "u7", Code: "missing_field", Detail: "time is required", Pointer: "/time", Value: ""},
		{RecordIndex: ptr(2), FindingUID: "u2", Code: "invalid_type", Detail: "severity_id must be an integer", Pointer: "/severity_id", Value: `"high"`},
		{RecordIndex: ptr(7), FindingUID: "u7", Code: "missing_account", Detail: "no account", Pointer: "/cloud"},
	}
	b2 := []store.IngestionError{
		{RecordIndex: ptr(0), Code: "unsupported_class", Pointer: "/class_uid", Value: "3001"},
		{Code: "job_failed", Detail: "no Detection Finding records"},
	}
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Errors: b1}), "WriteBatch b1")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Errors: b2}), "WriteBatch b2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, store.Batch{Errors: []store.IngestionError{{Code: "other"}}}), "WriteBatch ing-2")

	want := []store.IngestionError{b2[1], b2[0], b1[1], b1[0], b1[2]}
	all, total, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{Size: 100})
	must(t, err, "ListIngestionErrors")
	if total != 5 || len(all) != 5 {
		t.Fatalf("got %d rows total %d, want 5", len(all), total)
	}
	for i := range all {
		if all[i].ID <= 0 {
			t.Errorf("row %d: no id assigned", i)
		}
		g := all[i]
		g.ID = 0
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
	if all[3].ID >= all[4].ID {
		t.Errorf("same record index not in insertion order: ids %d, %d", all[3].ID, all[4].ID)
	}

	// Pages partition the list.
	var paged []store.IngestionError
	for p := 1; p <= 3; p++ {
		rows, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{Number: p, Size: 2})
		must(t, err, "ListIngestionErrors page")
		if n != 5 {
			t.Fatalf("page %d: total %d", p, n)
		}
		paged = append(paged, rows...)
	}
	if !reflect.DeepEqual(paged, all) {
		t.Fatalf("pages do not partition the list:\n%+v\n%+v", paged, all)
	}
	rows, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{Number: 9, Size: 2})
	must(t, err, "ListIngestionErrors past the end")
	if len(rows) != 0 || n != 5 {
		t.Fatalf("past the end: %d rows total %d", len(rows), n)
	}
	rows, _, err = s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors default page")
	if len(rows) != 5 {
		t.Fatalf("default page: %d rows", len(rows))
	}

	rows, n, err = s.ListIngestionErrors(ctx, tenantB, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors other tenant")
	if len(rows) != 0 || n != 0 {
		t.Fatalf("other tenant sees %d error rows", n)
	}
	if _, n, _ := s.ListIngestionErrors(ctx, tenantA, "ing-2", store.Page{}); n != 1 {
		t.Fatalf("ing-2 has %d error rows, want 1", n)
	}
}
