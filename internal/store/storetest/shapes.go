package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// QueryShape is one documented way of reading findings: a page of
// ListFindings, or a FindingCounts when By is set.
type QueryShape struct {
	Name  string
	Query store.FindingQuery
	By    []string
	// Ordered marks a shape without filters: its order must come from an
	// index, since sorting would read every finding of the tenant.
	Ordered bool
}

// apiDefaultSort is the REST API's default order of findings (newest
// first), which is what a listing without sort= asks the store for.
var apiDefaultSort = []string{"-inserted_at"}

// apiCountLimit is webhook.CountLimit, which this package cannot import.
const apiCountLimit = 10_100

// apiSearchCountsLimit is webhook.SearchCountsLimit: grouped counts with a
// search group at most this many matches plus one.
const apiSearchCountsLimit = 1_000

// apiSearchCountLimit is the count limit of a listing with a search, as
// webhook's searchCountLimit sets it: the end of the page after p.
func apiSearchCountLimit(p store.Page) int {
	number, size := max(p.Number, 1), p.Size
	if size == 0 {
		size = 10 // the store's default, as the API's
	}
	return (number-1)*size + 2*size
}

// QueryShapes lists every findings query shape docs/api.md documents, as
// the API hands it to the store: the default list, each filter alone and
// two combined, each sort (first, middle and cursor page), search and the
// grouped counts. The query plan tests of both engines explain each.
func QueryShapes() []QueryShape {
	// A placeholder: Placed puts each cursor in the middle of real rows.
	after := &store.FindingKey{}
	shapes := []QueryShape{
		{Name: "default list", Query: store.FindingQuery{Sort: apiDefaultSort}, Ordered: true},
		{Name: "store default order", Query: store.FindingQuery{}, Ordered: true},
		{Name: "middle page", Query: store.FindingQuery{Sort: apiDefaultSort, Page: store.Page{Number: 50, Size: 10}}, Ordered: true},
		{Name: "search", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "bucket-271"}},
		{Name: "region and provider type", Query: store.FindingQuery{Sort: apiDefaultSort, Region: "eu-west-1", ProviderType: []string{"aws"}}},
		{Name: "severity, status and account", Query: store.FindingQuery{Sort: apiDefaultSort, Severity: []string{"critical", "high"},
			StatusCode: []string{"FAIL"}, ProviderUID: "111111111111"}},
	}
	for _, f := range []struct {
		name string
		q    store.FindingQuery
	}{
		{"severity", store.FindingQuery{Severity: []string{"critical"}}},
		{"severity__in", store.FindingQuery{Severity: []string{"critical", "high"}}},
		{"status_code", store.FindingQuery{StatusCode: []string{"FAIL"}}},
		{"provider_type", store.FindingQuery{ProviderType: []string{"gcp"}}},
		{"provider_uid", store.FindingQuery{ProviderUID: "111111111111"}},
		{"check_id", store.FindingQuery{CheckID: "check_3"}},
		{"region", store.FindingQuery{Region: "eu-west-1"}},
		{"scan", store.FindingQuery{ScanID: "scan-1"}},
		{"scan, an old one", store.FindingQuery{ScanID: oldScan}},
		{"ingestion", store.FindingQuery{IngestionID: "ing-1"}},
	} {
		q := f.q
		q.Sort = apiDefaultSort
		shapes = append(shapes, QueryShape{Name: "filter " + f.name, Query: q})
	}
	for _, key := range []string{"time", "severity_id", "inserted_at", "check_id", "uid"} {
		for _, k := range []string{key, "-" + key} {
			sort := []string{k}
			shapes = append(shapes,
				QueryShape{Name: "sort " + k, Query: store.FindingQuery{Sort: sort}, Ordered: true},
				QueryShape{Name: "sort " + k + ", middle page", Query: store.FindingQuery{Sort: sort, Page: store.Page{Number: 50}}, Ordered: true},
				QueryShape{Name: "sort " + k + ", cursor page", Query: store.FindingQuery{Sort: sort, After: after}, Ordered: true},
			)
		}
	}
	shapes = append(shapes, QueryShape{Name: "default list, cursor page", Query: store.FindingQuery{Sort: apiDefaultSort, After: after}, Ordered: true})
	shapes = append(shapes,
		QueryShape{Name: "search, sort by time", Query: store.FindingQuery{Sort: []string{"-time"}, Search: "bucket-123"}},
		QueryShape{Name: "search and severity", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "Finding 27", Severity: []string{"critical"}}},
		QueryShape{Name: "search, cursor page", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "bucket-27", After: after}},
		// A whole identifier, longer than the probe the index looks up:
		// its common prefix (arn:aws:s3:::) must not be looked up.
		QueryShape{Name: "search, a whole resource uid", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "arn:aws:s3:::bucket-1271"}},
		QueryShape{Name: "counts by severity, search", By: []string{"severity"}, Query: store.FindingQuery{Search: "bucket-27"}},
	)
	// GET /findings/latest takes the same filters, sorts, pages and counts.
	latest := []QueryShape{
		{Name: "default list", Query: store.FindingQuery{Sort: apiDefaultSort}},
		{Name: "middle page", Query: store.FindingQuery{Sort: apiDefaultSort, Page: store.Page{Number: 5, Size: 10}}},
		{Name: "cursor page", Query: store.FindingQuery{Sort: apiDefaultSort, After: after}},
		{Name: "filter severity and status", Query: store.FindingQuery{Sort: apiDefaultSort, Severity: []string{"critical"}, StatusCode: []string{"FAIL"}}},
		{Name: "filter region and provider type", Query: store.FindingQuery{Sort: apiDefaultSort, Region: "eu-west-1", ProviderType: []string{"aws"}}},
		{Name: "search", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "bucket-27"}},
		{Name: "search, a whole resource uid", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "arn:aws:s3:::bucket-1271"}},
		{Name: "overview counts", By: []string{"severity", "status_code", "provider_type", "provider_uid"}},
		{Name: "counts by check, failing", By: []string{"check_id"}, Query: store.FindingQuery{StatusCode: []string{"FAIL"}}},
		{Name: "counts by check, search", By: []string{"check_id"}, Query: store.FindingQuery{Search: "bucket"}},
		// The web UI's findings by check: every check's counts by status
		// and severity, under the list's filters.
		{Name: "counts by check, status and severity", By: []string{"check_id", "status_code", "severity"}},
		{Name: "counts by check, status and severity, one region", By: []string{"check_id", "status_code", "severity"},
			Query: store.FindingQuery{Region: "eu-west-1"}},
		{Name: "counts by check, status and severity, new", By: []string{"check_id", "status_code", "severity"},
			Query: store.FindingQuery{Delta: "new"}},
		{Name: "counts by check, status and severity, resolved", By: []string{"check_id", "status_code", "severity"},
			Query: store.FindingQuery{Delta: "resolved"}},
	}
	for _, key := range []string{"time", "severity_id", "inserted_at", "check_id", "uid"} {
		for _, k := range []string{key, "-" + key} {
			latest = append(latest, QueryShape{Name: "sort " + k, Query: store.FindingQuery{Sort: []string{k}}})
		}
	}
	latest = append(latest,
		QueryShape{Name: "sort check_id, middle page", Query: store.FindingQuery{Sort: []string{"check_id"}, Page: store.Page{Number: 5, Size: 10}}},
		QueryShape{Name: "sort -severity_id, cursor page", Query: store.FindingQuery{Sort: []string{"-severity_id"}, After: after}},
		QueryShape{Name: "sort severity_id, filter check", Query: store.FindingQuery{Sort: []string{"severity_id"}, CheckID: "check_3"}},
		// The API leaves muted findings out of the current state by default.
		QueryShape{Name: "default list, muted left out", Query: store.FindingQuery{Sort: apiDefaultSort, Muted: store.MutedExcluded}},
		QueryShape{Name: "sort -severity_id, muted left out", Query: store.FindingQuery{Sort: []string{"-severity_id"}, Muted: store.MutedExcluded}},
		QueryShape{Name: "muted only", Query: store.FindingQuery{Sort: apiDefaultSort, Muted: store.MutedOnly}},
		QueryShape{Name: "overview counts, muted left out", By: []string{"severity", "status_code", "provider_type", "provider_uid"},
			Query: store.FindingQuery{Muted: store.MutedExcluded}},
		QueryShape{Name: "counts by severity, muted only", By: []string{"severity"}, Query: store.FindingQuery{Muted: store.MutedOnly}},
		QueryShape{Name: "search, muted left out", Query: store.FindingQuery{Sort: apiDefaultSort, Search: "bucket-27", Muted: store.MutedExcluded}},
	)
	for _, l := range latest {
		l.Name = "latest " + l.Name
		l.Query.Latest = true
		shapes = append(shapes, l)
	}
	// The API bounds the count of every listing (webhook.CountLimit, and
	// for a search the end of the next page), and grouped counts with a
	// search (webhook.SearchCountsLimit); only those the summary cannot
	// count use the bound.
	for i := range shapes {
		switch q := &shapes[i].Query; {
		case shapes[i].By != nil && q.Search != "":
			q.CountLimit = apiSearchCountsLimit
		case shapes[i].By != nil:
		case q.Search != "":
			q.CountLimit = apiSearchCountLimit(q.Page)
		default:
			q.CountLimit = apiCountLimit
		}
	}
	for _, d := range store.CountDimensions {
		shapes = append(shapes, QueryShape{Name: "counts by " + d, By: []string{d}})
	}
	shapes = append(shapes,
		QueryShape{Name: "counts by every dimension", By: store.CountDimensions},
		QueryShape{Name: "overview counts", By: []string{"severity", "status_code", "provider_type", "provider_uid"}},
		QueryShape{Name: "counts by check, one provider type", By: []string{"check_id", "severity", "status_code"},
			Query: store.FindingQuery{ProviderType: []string{"aws"}}},
		QueryShape{Name: "counts by severity, failing in one region", By: []string{"severity"},
			Query: store.FindingQuery{StatusCode: []string{"FAIL"}, Region: "eu-west-1"}},
		QueryShape{Name: "counts by severity, muted left out", By: []string{"severity"}, Query: store.FindingQuery{Muted: store.MutedExcluded}},
		QueryShape{Name: "filter muted", Query: store.FindingQuery{Sort: apiDefaultSort, Muted: store.MutedOnly, CountLimit: apiCountLimit}},
	)
	return shapes
}

// Placed returns s with its cursor, if it has one, at the middle finding
// of tenant in s's order, so that the plan is the one of a page in the
// middle of a listing rather than at either end.
func (s QueryShape) Placed(ctx context.Context, st store.Store, tenant string) (QueryShape, error) {
	if s.Query.After == nil {
		return s, nil
	}
	_, total, err := st.ListFindings(ctx, tenant, store.FindingQuery{Sort: s.Query.Sort, Page: store.Page{Size: 1}})
	if err != nil {
		return s, err
	}
	mid, _, err := st.ListFindings(ctx, tenant, store.FindingQuery{Sort: s.Query.Sort, Page: store.Page{Number: total/2 + 1, Size: 1}})
	if err != nil || len(mid) != 1 {
		return s, fmt.Errorf("middle finding of %d in order %v: %d rows, %v", total, s.Query.Sort, len(mid), err)
	}
	k := store.KeyOf(&mid[0])
	s.Query.After = &k
	return s, nil
}

// oldScan is the scan WritePlanFindings writes first: a quarter of each
// tenant's findings, inserted before all the others.
const oldScan = "scan-old"

const oldScanFindings = 1000

// planScans is how many scans PlanFindings spread over: scans are many in a
// real history, and the planner judges a scan's share of the findings by it.
const planScans = 200

// PlanFindings are rows for the query plan tests: enough of them, and
// varied enough, that the planner's choice between an index and a full
// scan is the one it makes on a real table.
func PlanFindings(n int) []store.Finding {
	sevs := []string{"critical", "high", "medium", "low", "informational"}
	fs := make([]store.Finding, n)
	for i := range fs {
		fs[i] = store.Finding{
			UID: fmt.Sprintf("uid-%05d", i), ScanID: fmt.Sprintf("scan-%d", i%planScans), CheckID: fmt.Sprintf("check_%d", i%150),
			Title: fmt.Sprintf("Finding %d about a bucket", i), Severity: sevs[i%5], SeverityID: 5 - i%5,
			StatusCode: []string{"FAIL", "PASS", "MANUAL"}[i%3], Status: "New",
			Region:       []string{"eu-west-1", "us-east-1", "ap-south-1", "us-west-2"}[i%4],
			ProviderType: []string{"aws", "gcp", "azure"}[i%3], ProviderUID: fmt.Sprintf("%012d", 111111111111*(i%7+1)),
			ResourceUID: fmt.Sprintf("arn:aws:s3:::bucket-%d", i), Time: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute),
			Raw: []byte(`{"class_uid":2004}`),
		}
	}
	return fs
}
