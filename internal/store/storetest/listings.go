package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// fixture writes a varied set of findings for tenantA (and a few for
// tenantB, which must never show up) and returns what the store should hold
// for tenantA.
func fixture(t *testing.T, s store.Store) []store.Finding {
	t.Helper()
	ctx := ctxT(t)
	checks := []string{"iam_root_mfa_enabled", "s3_bucket_public_access", "ec2_sg_open_22", "rbac_cluster_admin"}
	sevs := []string{"informational", "Low", "medium", "HIGH", "critical"}
	codes := []string{"PASS", "fail", "Manual"}
	regions := []string{"eu-west-1", "us-east-1", ""}
	var all []store.Finding
	for i := range 25 {
		f := store.Finding{
			UID:          fmt.Sprintf("uid-%02d", i),
			ScanID:       []string{"scan-1", "scan-2"}[i%2],
			CheckID:      checks[i%4],
			Title:        fmt.Sprintf("Finding number %d", i),
			Severity:     sevs[i%5],
			SeverityID:   i%5 + 1,
			StatusCode:   codes[i%3],
			Status:       "New",
			Region:       regions[i%3],
			ProviderType: []string{"aws", "GCP"}[i%2],
			ProviderUID:  []string{"111111111111", "project-x"}[i%2],
			ResourceUID:  fmt.Sprintf("res/%02d/bucket", i),
			Time:         baseTime.Add(time.Duration(i%7) * time.Hour),
			Raw:          fmt.Appendf(nil, `{"i":%d}`, i),
		}
		switch i {
		case 3:
			f.UID = "UID-03" // upper case sorts before lower case (byte order)
		case 11:
			f.Title = "Covers 100% of_buckets"
		case 17:
			f.ResourceUID = "arn:aws:s3:::Special-Bucket"
		}
		all = append(all, f)
	}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 15), "StartRun ing-1")
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 10), "StartRun ing-2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, batchOf(all[:15]...)), "WriteBatch ing-1")
	// Distinct inserted_at values for the inserted_at sort.
	time.Sleep(3 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, batchOf(all[15:]...)), "WriteBatch ing-2")

	must(t, s.StartRun(ctx, tenantB, "ing-1", 1, 3), "StartRun tenant B")
	must(t, s.WriteBatch(ctx, tenantB, "ing-1", 1, batchOf(all[0], all[5], all[11])), "WriteBatch tenant B")

	out := make([]store.Finding, len(all))
	for i, f := range all {
		ing := "ing-1"
		if i >= 15 {
			ing = "ing-2"
		}
		out[i] = normalised(tenantA, ing, f)
	}
	return out
}

// reference answers q over fs the way the store must.
func reference(fs []store.Finding, inserted map[string]time.Time, q store.FindingQuery) []store.Finding {
	in := func(v string, list []string, norm func(string) string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if norm(x) == v {
				return true
			}
		}
		return false
	}
	eq := func(v, want string) bool { return want == "" || v == want }
	var out []store.Finding
	for _, f := range fs {
		if !in(f.Severity, q.Severity, strings.ToLower) || !in(f.StatusCode, q.StatusCode, strings.ToUpper) ||
			!in(f.ProviderType, q.ProviderType, strings.ToLower) || !eq(f.ProviderUID, q.ProviderUID) ||
			!eq(f.CheckID, q.CheckID) || !eq(f.Region, q.Region) || !eq(f.ScanID, q.ScanID) ||
			!eq(f.IngestionID, q.IngestionID) {
			continue
		}
		if q.Search != "" {
			s := strings.ToLower(q.Search)
			hit := false
			for _, v := range []string{f.UID, f.Title, f.CheckID, f.ResourceUID} {
				hit = hit || strings.Contains(strings.ToLower(v), s)
			}
			if !hit {
				continue
			}
		}
		out = append(out, f)
	}
	keys := q.Sort
	if len(keys) == 0 {
		keys = []string{"-severity_id"}
	}
	// Ties are broken in the direction of the first key: by insertion
	// time when it is a check or a severity, then by uid, then by id.
	dir := ""
	if strings.HasPrefix(keys[0], "-") {
		dir = "-"
	}
	keys = slices.Clone(keys)
	if first := strings.TrimPrefix(keys[0], "-"); first == "check_id" || first == "severity_id" {
		keys = append(keys, dir+"inserted_at")
	}
	keys = append(keys, dir+"uid", dir+"id")
	slices.SortStableFunc(out, func(a, b store.Finding) int {
		for _, k := range keys {
			desc := strings.HasPrefix(k, "-")
			var c int
			switch strings.TrimPrefix(k, "-") {
			case "time":
				c = a.Time.Compare(b.Time)
			case "severity_id":
				c = a.SeverityID - b.SeverityID
			case "inserted_at":
				c = inserted[a.ID].Compare(inserted[b.ID])
			case "check_id":
				c = strings.Compare(a.CheckID, b.CheckID)
			case "uid":
				c = strings.Compare(a.UID, b.UID)
			case "id":
				c = strings.Compare(a.ID, b.ID)
			}
			if desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return out
}

func uids(fs []store.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.UID
	}
	return out
}

func testListFindings(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := fixture(t, s)
	inserted := map[string]time.Time{}
	stored, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings")
	for _, f := range stored {
		inserted[f.ID] = f.InsertedAt
	}
	queries := []store.FindingQuery{
		{},
		{Severity: []string{"HIGH", "critical"}},
		{Severity: []string{"low"}, StatusCode: []string{"pass", "FAIL"}},
		{StatusCode: []string{"manual"}},
		{ProviderType: []string{"gcp"}},
		{ProviderType: []string{"AWS", "gcp"}, Region: "us-east-1"},
		{ProviderUID: "project-x"},
		{CheckID: "ec2_sg_open_22"},
		{Region: "eu-west-1"},
		{Region: "nowhere"},
		{ScanID: "scan-2"},
		{IngestionID: "ing-2"},
		{Search: "ROOT"},           // check id, any case
		{Search: "number 1"},       // title
		{Search: "uid-0"},          // uid (and UID-03 case-insensitively)
		{Search: "special-bucket"}, // resource uid
		{Search: "%"},              // a literal percent sign
		{Search: "f_b"},            // a literal underscore: not "f?b"
		{Search: "s3_", Severity: []string{"medium", "critical"}, ScanID: "scan-1"},
	}
	queries = append(queries, sortQueries...)
	for _, q := range queries {
		want := reference(fs, inserted, q)
		q.Page = store.Page{Size: 100}
		got, total, err := s.ListFindings(ctx, tenantA, q)
		must(t, err, fmt.Sprintf("ListFindings(%+v)", q))
		if total != len(want) || !slices.Equal(uids(got), uids(want)) {
			t.Errorf("ListFindings(%+v):\n got %d %v\nwant %d %v", q, total, uids(got), len(want), uids(want))
			continue
		}
		for i := range got {
			sameFinding(t, fmt.Sprintf("%+v row %d", q, i), got[i], want[i])
		}
	}
	if n := len(reference(fs, inserted, store.FindingQuery{Search: "f_b"})); n != 1 {
		t.Fatalf("fixture broken: search f_b matches %d", n)
	}

	// Pagination: default size 10, pages partition the sorted list, totals
	// stay the full count.
	want := reference(fs, inserted, store.FindingQuery{})
	var paged []store.Finding
	for p := 1; p <= 3; p++ {
		got, total, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Number: p}})
		must(t, err, "ListFindings page")
		if total != 25 || len(got) != []int{10, 10, 5}[p-1] {
			t.Fatalf("page %d: %d rows, total %d", p, len(got), total)
		}
		paged = append(paged, got...)
	}
	if !slices.Equal(uids(paged), uids(want)) {
		t.Fatalf("pages:\n got %v\nwant %v", uids(paged), uids(want))
	}
	got, total, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Number: 4, Size: 7}})
	must(t, err, "ListFindings page 4")
	if total != 25 || !slices.Equal(uids(got), uids(want[21:])) {
		t.Fatalf("page 4 of 7: %v, total %d", uids(got), total)
	}
	got, total, err = s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Number: 6, Size: 10}})
	must(t, err, "ListFindings past the end")
	if total != 25 || len(got) != 0 {
		t.Fatalf("past the end: %d rows total %d", len(got), total)
	}
	got, total, err = s.ListFindings(ctx, tenantA, store.FindingQuery{Severity: []string{"critical"}, Page: store.Page{Size: 2}})
	must(t, err, "ListFindings filtered page")
	if total != 5 || len(got) != 2 {
		t.Fatalf("filtered page: %d rows total %d", len(got), total)
	}

	// Tenant B sees its own three rows only.
	got, total, err = s.ListFindings(ctx, tenantB, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings tenant B")
	if total != 3 || len(got) != 3 {
		t.Fatalf("tenant B: %d rows total %d", len(got), total)
	}
	for _, f := range got {
		if f.ID != store.FindingID(tenantB, f.ScanID, f.UID) {
			t.Fatalf("tenant B got a row with id %s", f.ID)
		}
	}
	got, total, err = s.ListFindings(ctx, "tenant-none", store.FindingQuery{})
	must(t, err, "ListFindings unknown tenant")
	if total != 0 || len(got) != 0 {
		t.Fatalf("unknown tenant sees %d rows", total)
	}
}

// testListFindingsAfterKey walks every sort with keyset pages of a few
// rows: the pages must partition the sorted list exactly as offsets do,
// including across equal sort values (inserted_at is shared by a whole
// batch, severity_id by a fifth of the rows).
func testListFindingsAfterKey(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := fixture(t, s)
	inserted := map[string]time.Time{}
	stored, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings")
	for _, f := range stored {
		inserted[f.ID] = f.InsertedAt
	}
	for _, q := range append(append([]store.FindingQuery{{}}, sortQueries...),
		store.FindingQuery{Sort: []string{"-inserted_at"}, Region: "eu-west-1", Search: "uid"}) {
		want := reference(fs, inserted, q)
		var got []store.Finding
		q.Page = store.Page{Size: 4}
		for range 20 {
			page, total, err := s.ListFindings(ctx, tenantA, q)
			must(t, err, fmt.Sprintf("ListFindings(%+v)", q))
			if total != len(want) {
				t.Fatalf("ListFindings(%+v): total %d, want %d", q, total, len(want))
			}
			got = append(got, page...)
			if len(page) < q.Page.Size {
				break
			}
			k := store.KeyOf(&page[len(page)-1])
			q.After = &k
			// A page number must not shift a keyset page.
			q.Page.Number = 3
		}
		if !slices.Equal(uids(got), uids(want)) {
			t.Errorf("keyset pages of sort %v:\n got %v\nwant %v", q.Sort, uids(got), uids(want))
		}
	}
}

func testListFindingsInvalidSort(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, sort := range [][]string{{"title"}, {"-raw"}, {"time", "severity"}, {"uid; DROP TABLE findings"}, {""}, {"-"}} {
		_, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Sort: sort})
		wantErr(t, err, store.ErrInvalidArgument, fmt.Sprintf("sort %q", sort))
	}
}

func testGetFinding(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fixture(t, s)
	id := store.FindingID(tenantA, "scan-1", "uid-00")
	f, err := s.GetFinding(ctx, tenantA, id)
	must(t, err, "GetFinding")
	if f.ID != id || f.UID != "uid-00" {
		t.Fatalf("GetFinding = %+v", f)
	}
	// Tenant B holds the same uid in the same scan, under its own id.
	_, err = s.GetFinding(ctx, tenantB, id)
	wantErr(t, err, store.ErrNotFound, "GetFinding of tenant A's id by tenant B")
	idB := store.FindingID(tenantB, "scan-1", "uid-00")
	_, err = s.GetFinding(ctx, tenantA, idB)
	wantErr(t, err, store.ErrNotFound, "GetFinding of tenant B's id by tenant A")
	if _, err := s.GetFinding(ctx, tenantB, idB); err != nil {
		t.Fatalf("GetFinding tenant B: %v", err)
	}
	for _, bad := range []string{"", "not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		_, err = s.GetFinding(ctx, tenantA, bad)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("GetFinding(%q)", bad))
	}
}

func testListScans(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), "StartRun")
	scans := []store.Scan{
		{ID: "s-aws-1", ProviderType: "aws", ProviderUID: "111", Trigger: "imported"},
		{ID: "s-aws-2", ProviderType: "AWS", ProviderUID: "222", Trigger: "imported"},
		{ID: "s-gcp", ProviderType: "gcp", ProviderUID: "p", Trigger: "imported"},
	}
	var fs []store.Finding
	for i := range 6 {
		fs = append(fs, finding("s-aws-1", fmt.Sprint("a", i)))
	}
	// s-aws-1 failed 4 checks (1 critical, 3 high) and passed 2; its
	// earliest finding is an hour before the others.
	fs[0].Severity, fs[0].SeverityID = "Critical", 5
	fs[1].StatusCode, fs[2].StatusCode = "PASS", "pass"
	fs[3].Time = baseTime.Add(-time.Hour)
	fs = append(fs, finding("s-gcp", "g1"))
	before := time.Now().Add(-time.Second)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Scans: scans[:1], Findings: fs}), "WriteBatch 1")
	time.Sleep(2 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Scans: scans[1:]}), "WriteBatch 2")
	must(t, s.StartRun(ctx, tenantB, "ing-9", 1, 1), "StartRun B")
	must(t, s.WriteBatch(ctx, tenantB, "ing-9", 1, store.Batch{Scans: scans[:1], Findings: fs[:1]}), "WriteBatch B")

	all, total, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if total != 3 || len(all) != 3 {
		t.Fatalf("ListScans: %d rows total %d", len(all), total)
	}
	counts := map[string]int{}
	for _, sc := range all {
		counts[sc.ID] = sc.FindingCount
		checkUTC(t, "InsertedAt", sc.InsertedAt)
		checkUTC(t, "UpdatedAt", sc.UpdatedAt)
		if sc.IngestionID != "ing-1" || sc.Trigger != "imported" || sc.InsertedAt.Before(before) {
			t.Errorf("scan %+v", sc)
		}
	}
	if !reflect.DeepEqual(counts, map[string]int{"s-aws-1": 6, "s-aws-2": 0, "s-gcp": 1}) {
		t.Fatalf("finding counts %v", counts)
	}
	// When each scan ran, as its findings say, and what failed in it.
	for _, sc := range all {
		want := map[string]struct {
			scanned time.Time
			failing map[string]int
		}{
			"s-aws-1": {baseTime.Add(-time.Hour), map[string]int{"critical": 1, "high": 3}},
			"s-aws-2": {time.Time{}, nil},
			"s-gcp":   {baseTime, map[string]int{"high": 1}},
		}[sc.ID]
		if !sc.ScannedAt.Equal(want.scanned) || (!sc.ScannedAt.IsZero() && sc.ScannedAt.Location() != time.UTC) {
			t.Errorf("scan %s: ScannedAt %v, want %v (UTC)", sc.ID, sc.ScannedAt, want.scanned)
		}
		if !reflect.DeepEqual(sc.Failing, want.failing) {
			t.Errorf("scan %s: Failing %v, want %v", sc.ID, sc.Failing, want.failing)
		}
	}
	// Newest first (the API's default order).
	if all[2].ID != "s-aws-1" {
		t.Fatalf("order: %s, %s, %s", all[0].ID, all[1].ID, all[2].ID)
	}
	// A scan's account, as the worker checks records against it; another
	// tenant's scan is not found.
	for _, tc := range []struct {
		tenant, id, providerType, providerUID string
		err                                   error
	}{
		{tenantA, "s-aws-2", "aws", "222", nil},
		{tenantA, "s-gcp", "gcp", "p", nil},
		{tenantB, "s-aws-1", "aws", "111", nil},
		{tenantB, "s-gcp", "", "", store.ErrNotFound},
		{tenantA, "s-none", "", "", store.ErrNotFound},
	} {
		pt, pu, err := s.ScanAccount(ctx, tc.tenant, tc.id)
		if pt != tc.providerType || pu != tc.providerUID || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("ScanAccount(%s, %s) = %q, %q, %v; want %q, %q, %v", tc.tenant, tc.id, pt, pu, err, tc.providerType, tc.providerUID, tc.err)
		}
	}

	got, total, err := s.ListScans(ctx, tenantA, store.ScanQuery{ProviderType: "Aws"})
	must(t, err, "ListScans aws")
	if total != 2 || len(got) != 2 || got[0].ProviderType != "aws" || got[1].ProviderType != "aws" {
		t.Fatalf("ListScans aws: %+v total %d", got, total)
	}
	got, total, err = s.ListScans(ctx, tenantA, store.ScanQuery{ProviderType: "aws", ProviderUID: "222"})
	must(t, err, "ListScans aws 222")
	if total != 1 || len(got) != 1 || got[0].ID != "s-aws-2" {
		t.Fatalf("ListScans aws/222: %+v", got)
	}
	got, total, err = s.ListScans(ctx, tenantA, store.ScanQuery{Page: store.Page{Number: 2, Size: 2}})
	must(t, err, "ListScans page 2")
	if total != 3 || len(got) != 1 || got[0].ID != all[2].ID {
		t.Fatalf("ListScans page 2: %+v total %d", got, total)
	}

	got, total, err = s.ListScans(ctx, tenantB, store.ScanQuery{})
	must(t, err, "ListScans B")
	if total != 1 || len(got) != 1 || got[0].FindingCount != 1 || got[0].IngestionID != "ing-9" {
		t.Fatalf("tenant B scans: %+v total %d", got, total)
	}

	// By the ingestion that last wrote the scan (the aggregated API's
	// ingestion field selector); another tenant's ingestion selects none.
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 1), "StartRun ing-2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, store.Batch{Scans: []store.Scan{
		{ID: "s-ing-2", ProviderType: "aws", ProviderUID: "333", Trigger: "imported"},
	}}), "WriteBatch ing-2")
	for _, tc := range []struct {
		tenant, ingestion string
		want              []string
	}{
		{tenantA, "ing-2", []string{"s-ing-2"}},
		{tenantA, "ing-1", []string{"s-aws-1", "s-aws-2", "s-gcp"}},
		{tenantA, "ing-9", nil},
		{tenantB, "ing-9", []string{"s-aws-1"}},
	} {
		got, total, err := s.ListScans(ctx, tc.tenant, store.ScanQuery{IngestionID: tc.ingestion})
		must(t, err, "ListScans by ingestion")
		var ids []string
		for _, sc := range got {
			ids = append(ids, sc.ID)
		}
		slices.Sort(ids)
		if total != len(tc.want) || !slices.Equal(ids, tc.want) {
			t.Errorf("ListScans(%s, ingestion %s) = %v (total %d), want %v", tc.tenant, tc.ingestion, ids, total, tc.want)
		}
	}
}

// sortQueries list every documented findings sort, each way, with one
// combined with a filter: the orders a listing and a cursor must both keep.
var sortQueries = []store.FindingQuery{
	{Sort: []string{"time"}},
	{Sort: []string{"-time"}},
	{Sort: []string{"severity_id"}},
	{Sort: []string{"-severity_id"}},
	{Sort: []string{"inserted_at"}},
	{Sort: []string{"-inserted_at"}},
	{Sort: []string{"check_id", "-time"}},
	{Sort: []string{"-check_id"}},
	{Sort: []string{"uid"}},
	{Sort: []string{"-uid"}},
	{Sort: []string{"-time", "severity_id"}, StatusCode: []string{"FAIL"}},
}
