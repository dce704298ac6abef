package webhook_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/posture-dev/posture/webhook"
)

// TestFindingsPaginationCount checks meta.pagination.count of the findings
// list over more findings than webhook.CountLimit: exact from the finding
// summary for filters on its dimensions, however many match; exact for
// filter[scan] up to the limit; past it a lower bound (CountLimit+1)
// labelled count_estimated, with no links.last, while every page that
// page[number] may reach is still served. A search counts only to the end
// of the page after the requested one (first, middle, deepest and cursor
// pages, exactly at that bound and one past it): past it the count is a
// lower bound, pages counts the pages known, links.last is null and
// links.next still leads on.
func TestFindingsPaginationCount(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	n := webhook.CountLimit + 50
	fs := seedFindings(t, b, n)
	match := func(keep func(i int) bool) int {
		c := 0
		for i := range fs {
			if keep(i) {
				c++
			}
		}
		return c
	}
	// "Finding 123": 123 and 1230-1239.
	const rare, rareCount = "filter[search]=Finding%20123", 11
	type doc struct {
		Links struct {
			Last *string `json:"last"`
			Next *string `json:"next"`
		} `json:"links"`
		Meta struct {
			Pagination struct {
				Pages          int   `json:"pages"`
				Count          int   `json:"count"`
				CountEstimated *bool `json:"count_estimated"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	for _, tc := range []struct {
		name, query string
		// follow is how many times links.next is followed before checking.
		follow       int
		count, pages int // pages 0: not checked
		estimated    bool
		last         bool // links.last is a link
	}{
		{name: "no filter, from the summary", count: n, pages: (n + 9) / 10},
		{name: "summary filters", query: "filter[region]=eu-west-1&filter[status_code__in]=FAIL,PASS&sort=uid",
			count: match(func(i int) bool { return i%2 == 0 && i%3 != 2 })},
		{name: "summary filter, deep page", query: "filter[provider_type]=aws&page[number]=60&page[size]=100",
			count: match(func(i int) bool { return i%3 != 1 })},
		{name: "scan under the limit", query: "filter[scan]=scan-a", count: match(func(i int) bool { return i%2 == 0 }), last: true},
		{name: "scan and a search past the limit", query: "filter[scan]=scan-a&filter[search]=finding", count: 21, pages: 3, estimated: true},
		{name: "search under the bound", query: rare, count: rareCount, pages: 2, last: true},
		{name: "search, first page past the bound", query: "filter[search]=finding", count: 21, pages: 3, estimated: true},
		{name: "search, a middle page past the bound", query: "filter[search]=finding&page[size]=20&page[number]=50",
			count: 49*20 + 2*20 + 1, pages: 52, estimated: true},
		{name: "search, the deepest page, every match counted", query: "filter[search]=finding&page[size]=100&page[number]=101",
			count: n, pages: (n + 99) / 100},
		{name: "search, the bound reached exactly", query: rare + "&page[size]=1&page[number]=10", count: rareCount, pages: rareCount, last: true},
		{name: "search, one match past the bound", query: rare + "&page[size]=1&page[number]=9", count: rareCount, pages: rareCount, estimated: true},
		{name: "search, a page reached by cursor counts from the first", query: "filter[search]=finding", follow: 3,
			count: 21, pages: 3, estimated: true},
		{name: "search and a summary filter past the bound", query: "filter[search]=finding&filter[severity__in]=critical,high,medium,low,informational",
			count: 21, pages: 3, estimated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, query := "/api/v1/findings", tc.query
			var d doc
			for i := 0; ; i++ {
				r := a.get(path, query)
				if r.status != http.StatusOK {
					t.Fatalf("GET %s?%s: %s", path, query, r)
				}
				d = doc{}
				decode(t, r, &d)
				if i == tc.follow {
					break
				}
				if d.Links.Next == nil {
					t.Fatalf("links.next is null on page %d", i+1)
				}
				u, err := url.Parse(*d.Links.Next)
				if err != nil {
					t.Fatal(err)
				}
				path, query = u.Path, u.RawQuery
			}
			pg := d.Meta.Pagination
			if pg.Count != tc.count {
				t.Errorf("count = %d, want %d", pg.Count, tc.count)
			}
			if tc.pages != 0 && pg.Pages != tc.pages {
				t.Errorf("pages = %d, want %d", pg.Pages, tc.pages)
			}
			switch {
			case tc.estimated && (pg.CountEstimated == nil || !*pg.CountEstimated):
				t.Errorf("count_estimated = %v, want true", pg.CountEstimated)
			case !tc.estimated && pg.CountEstimated != nil:
				t.Errorf("count_estimated = %v on an exact count, want it left out", *pg.CountEstimated)
			}
			switch {
			case tc.estimated && d.Links.Last != nil:
				t.Errorf("links.last = %q with a lower-bound count, want null", *d.Links.Last)
			case tc.last && d.Links.Last == nil:
				t.Errorf("links.last is null, want the last page of %d", pg.Pages)
			}
			if d.Links.Next == nil {
				t.Errorf("links.next is null before the end of %d findings", tc.count)
			}
		})
	}

	// Grouped counts are exact but for a search, which stops at
	// SearchCountsLimit+1 matches: then total and every group are lower
	// bounds, and say so.
	bySeverity := map[string]int{}
	for _, f := range fs {
		bySeverity[f.Severity]++
	}
	for _, tc := range []struct {
		name, query string
		total       int
		estimated   bool
	}{
		{name: "no filter", query: "group_by=severity", total: n},
		{name: "a scan, past the search's limit but exact", query: "group_by=severity&filter[scan]=scan-a", total: match(func(i int) bool { return i%2 == 0 })},
		{name: "a rare search", query: "group_by=severity&" + rare, total: rareCount},
		{name: "a common search", query: "group_by=severity&filter[search]=finding", total: webhook.SearchCountsLimit + 1, estimated: true},
	} {
		t.Run("counts, "+tc.name, func(t *testing.T) {
			r := a.get("/api/v1/findings/counts", tc.query)
			if r.status != http.StatusOK {
				t.Fatalf("GET counts?%s: %s", tc.query, r)
			}
			var d struct {
				Data []struct {
					Attributes struct {
						Severity string `json:"severity"`
						Count    int    `json:"count"`
					} `json:"attributes"`
				} `json:"data"`
				Meta struct {
					Total          int   `json:"total"`
					CountEstimated *bool `json:"count_estimated"`
				} `json:"meta"`
			}
			decode(t, r, &d)
			sum := 0
			for _, g := range d.Data {
				sum += g.Attributes.Count
				if g.Attributes.Count > bySeverity[g.Attributes.Severity] {
					t.Errorf("severity %q counts %d of its %d findings", g.Attributes.Severity, g.Attributes.Count, bySeverity[g.Attributes.Severity])
				}
			}
			if d.Meta.Total != tc.total || sum != tc.total {
				t.Errorf("meta.total %d, groups sum to %d; want %d", d.Meta.Total, sum, tc.total)
			}
			switch {
			case tc.estimated && (d.Meta.CountEstimated == nil || !*d.Meta.CountEstimated):
				t.Errorf("meta.count_estimated = %v, want true", d.Meta.CountEstimated)
			case !tc.estimated && d.Meta.CountEstimated != nil:
				t.Errorf("meta.count_estimated = %v on exact counts, want it left out", *d.Meta.CountEstimated)
			}
		})
	}
}
