package webhook_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// seedFindings writes n findings straight into the bare env's store (the
// worker's own write path, without the upload around it) with values that
// repeat at different rates, so that every dimension has several groups and
// every sort has ties.
func seedFindings(t *testing.T, b *bareEnv, n int) []store.Finding {
	t.Helper()
	ctx := context.Background()
	sevs := []string{"critical", "high", "medium", "low", "informational"}
	var fs []store.Finding
	for i := range n {
		fs = append(fs, store.Finding{
			UID:          fmt.Sprintf("f-%03d", i),
			ScanID:       []string{"scan-a", "scan-b"}[i%2],
			CheckID:      fmt.Sprintf("check_%d", i%4),
			Title:        fmt.Sprintf("Finding %d", i),
			Severity:     sevs[i%5],
			SeverityID:   5 - i%5,
			StatusCode:   []string{"FAIL", "PASS", "MANUAL"}[i%3],
			Region:       []string{"eu-west-1", "us-east-1"}[i%2],
			ProviderType: []string{"aws", "gcp", "aws"}[i%3],
			ProviderUID:  []string{"111111111111", "project-x", "222222222222"}[i%3],
			ResourceUID:  fmt.Sprintf("res-%d", i),
			Time:         time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i%6) * time.Hour),
			Raw:          []byte(`{}`),
		})
	}
	// Two batches: inserted_at is shared by each batch's rows.
	for i, part := range [][]store.Finding{fs[:n/2], fs[n/2:]} {
		ing := fmt.Sprintf("ing-%d", i)
		if err := b.Store.StartRun(ctx, b.Tenant, ing, 1, len(part)); err != nil {
			t.Fatal(err)
		}
		if err := b.Store.WriteBatch(ctx, b.Tenant, ing, 1, store.Batch{Findings: part}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fs
}

type countsDoc struct {
	Data []struct {
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	} `json:"data"`
	Meta struct {
		Version string   `json:"version"`
		Total   int      `json:"total"`
		GroupBy []string `json:"group_by"`
	} `json:"meta"`
}

// TestFindingCountsEndpoint checks GET /findings/counts against counts
// made by hand over the seeded findings, with and without filters, and its
// refusals.
func TestFindingCountsEndpoint(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	fs := seedFindings(t, b, 60)
	value := func(f store.Finding, dim string) string {
		return map[string]string{"severity": f.Severity, "status_code": f.StatusCode, "provider_type": f.ProviderType,
			"provider_uid": f.ProviderUID, "check_id": f.CheckID, "region": f.Region}[dim]
	}
	for _, tc := range []struct {
		query string
		match func(store.Finding) bool
	}{
		{"group_by=severity", nil},
		{"group_by=status_code,severity", nil},
		{"group_by=severity,status_code,provider_type,check_id,region", nil},
		{"group_by=provider_type,provider_uid&filter[status_code]=fail", func(f store.Finding) bool { return f.StatusCode == "FAIL" }},
		{"group_by=check_id&filter[severity__in]=critical,LOW&filter[region]=eu-west-1", func(f store.Finding) bool {
			return (f.Severity == "critical" || f.Severity == "low") && f.Region == "eu-west-1"
		}},
		{"group_by=region&filter[search]=f-00", func(f store.Finding) bool { return strings.Contains(f.UID, "f-00") }},
		{"group_by=severity&filter[check_id]=none", func(store.Finding) bool { return false }},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			by := strings.Split(q.Get("group_by"), ",")
			want := map[string]int{}
			total := 0
			for _, f := range fs {
				if tc.match != nil && !tc.match(f) {
					continue
				}
				var id []string
				for _, d := range by {
					id = append(id, d+"="+url.QueryEscape(value(f, d)))
				}
				want[strings.Join(id, "&")]++
				total++
			}
			r := a.get("/api/v1/findings/counts", tc.query)
			if r.status != 200 {
				t.Fatalf("GET counts: %s", r)
			}
			var d countsDoc
			decode(t, r, &d)
			got := map[string]int{}
			for _, g := range d.Data {
				n, _ := g.Attributes["count"].(float64)
				got[g.ID] = int(n)
				for _, dim := range by {
					if _, ok := g.Attributes[dim]; !ok || g.Type != "finding-counts" {
						t.Errorf("group %s: type %q, attributes %v lack %s", g.ID, g.Type, g.Attributes, dim)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || d.Meta.Total != total || !slices.Equal(d.Meta.GroupBy, by) {
				t.Errorf("counts:\n got %v total %d group_by %v\nwant %v total %d", got, d.Meta.Total, d.Meta.GroupBy, want, total)
			}
		})
	}
	for _, tc := range []struct{ query, source, fragment string }{
		{"", "parameter:group_by", "required"},
		{"group_by=", "parameter:group_by", "required"},
		{"group_by=severity,title", "parameter:group_by", `"title"`},
		{"group_by=severity,severity", "parameter:group_by", "twice"},
		{"group_by=severity&sort=severity", "parameter:sort", "sort"},
		{"group_by=severity&page[size]=5", "parameter:page[size]", "page[size]"},
		{"group_by=severity&filter[colour]=red", "parameter:filter[colour]", "colour"},
		{"group_by=severity&filter[severity]=bad", "parameter:filter[severity]", "bad"},
	} {
		t.Run("refuses "+tc.query, func(t *testing.T) {
			wantError(t, a.get("/api/v1/findings/counts", tc.query), 400, "invalid", tc.source, tc.fragment)
		})
	}
}

// TestFindingsCursorPages follows links.next from the first page to the
// end for every sort: the cursor pages must give every finding once, in the
// order page[number] gives them. Cursors are refused when reused with other
// filters or sort, when forged, or next to page[number], and deep page
// numbers are refused with a pointer to the cursor.
func TestFindingsCursorPages(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	seedFindings(t, b, 60)
	for _, sort := range []string{"", "time", "-time", "severity_id", "-severity_id", "inserted_at", "-inserted_at",
		"check_id", "-check_id", "uid", "-uid", "-severity_id,time"} {
		for _, filter := range []string{"", "&filter[status_code]=FAIL&filter[region]=eu-west-1"} {
			t.Run("sort="+sort+filter, func(t *testing.T) {
				base := "page[size]=7" + filter
				if sort != "" {
					base += "&sort=" + sort
				}
				var byNumber []string
				first := a.list("/api/v1/findings", base)
				for n := 1; n <= first.Meta.Pagination.Pages; n++ {
					byNumber = append(byNumber, a.list("/api/v1/findings", fmt.Sprintf("%s&page[number]=%d", base, n)).ids()...)
				}
				var byCursor []string
				d := first
				for range 20 {
					byCursor = append(byCursor, d.ids()...)
					if d.Links.Next == nil {
						break
					}
					u, err := url.Parse(*d.Links.Next)
					if err != nil || !u.Query().Has("page[cursor]") || u.Query().Has("page[number]") {
						t.Fatalf("links.next %q does not carry page[cursor] alone", *d.Links.Next)
					}
					d = a.list(u.Path, u.RawQuery)
					// A cursor page has no number and no way back, but the
					// same count.
					if p := d.Meta.Pagination; p.Count != first.Meta.Pagination.Count || p.Page != 0 || d.Links.Prev != nil {
						t.Fatalf("cursor page meta %+v, prev %v", *p, d.Links.Prev)
					}
				}
				if len(byCursor) != first.Meta.Pagination.Count || !slices.Equal(byCursor, byNumber) {
					t.Fatalf("cursor pages gave %d findings %v\npage numbers gave %v", len(byCursor), byCursor, byNumber)
				}
			})
		}
	}

	next, err := url.Parse(*a.list("/api/v1/findings", "page[size]=5&sort=uid&filter[region]=eu-west-1").Links.Next)
	if err != nil {
		t.Fatal(err)
	}
	cursor := next.Query().Get("page[cursor]")
	for _, tc := range []struct{ name, query, source, fragment string }{
		{"other filter", "sort=uid&filter[region]=us-east-1&page[cursor]=" + cursor, "parameter:page[cursor]", "other filters"},
		{"filter dropped", "sort=uid&page[cursor]=" + cursor, "parameter:page[cursor]", "other filters"},
		{"other sort", "sort=-uid&filter[region]=eu-west-1&page[cursor]=" + cursor, "parameter:page[cursor]", "other filters"},
		{"forged", "page[cursor]=bm90LWEtY3Vyc29y", "parameter:page[cursor]", "links.next"},
		{"not base64", "page[cursor]=%21%21", "parameter:page[cursor]", "links.next"},
		{"empty", "page[cursor]=", "parameter:page[cursor]", "links.next"},
		{"with page[number]", "sort=uid&filter[region]=eu-west-1&page[number]=2&page[cursor]=" + cursor, "parameter:page[cursor]", "not both"},
		{"past the offset limit", "page[size]=100&page[number]=102", "parameter:page[number]", "page[cursor]"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			wantError(t, a.get("/api/v1/findings", tc.query), 400, "invalid", tc.source, tc.fragment)
		})
	}
	t.Run("the same cursor with another page size", func(t *testing.T) {
		d := a.list("/api/v1/findings", "sort=uid&filter[region]=eu-west-1&page[size]=100&page[cursor]="+cursor)
		if len(d.Data) != 25 || d.Links.Next != nil || d.Meta.Pagination.Page != 0 {
			t.Fatalf("%d findings after the first 5 of 30, next %v, page %d", len(d.Data), d.Links.Next, d.Meta.Pagination.Page)
		}
	})
	t.Run("the deepest page number allowed", func(t *testing.T) {
		// Offset exactly the limit: allowed (a 404, as the page is past the end).
		wantError(t, a.get("/api/v1/findings", "page[size]=100&page[number]=101"), 404, "not_found", "parameter:page[number]")
	})
}
