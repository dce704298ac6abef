package webhook_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/posture-dev/posture/webhook"
)

// TestFindingsPaginationCount checks meta.pagination.count of the findings
// list over more findings than webhook.CountLimit: exact from the finding
// summary for filters on its dimensions, however many match; exact for
// other filters up to the limit; past it a lower bound (CountLimit+1)
// labelled count_estimated, with no links.last, while every page that
// page[number] may reach is still served.
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
		count       int
		estimated   bool
	}{
		{"no filter, from the summary", "", n, false},
		{"summary filters", "filter[region]=eu-west-1&filter[status_code__in]=FAIL,PASS&sort=uid",
			match(func(i int) bool { return i%2 == 0 && i%3 != 2 }), false},
		{"summary filter, deep page", "filter[provider_type]=aws&page[number]=60&page[size]=100",
			match(func(i int) bool { return i%3 != 1 }), false},
		{"search under the limit", "filter[search]=Finding%2010", match(func(i int) bool { return fmt.Sprint(i)[:min(2, len(fmt.Sprint(i)))] == "10" }), false},
		{"scan under the limit", "filter[scan]=scan-a", match(func(i int) bool { return i%2 == 0 }), false},
		{"search past the limit", "filter[search]=finding", webhook.CountLimit + 1, true},
		{"search past the limit, last reachable page", "filter[search]=finding&page[size]=100&page[number]=101", webhook.CountLimit + 1, true},
		{"search and a summary filter past the limit", "filter[search]=finding&filter[severity__in]=critical,high,medium,low,informational",
			webhook.CountLimit + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.get("/api/v1/findings", tc.query)
			if r.status != http.StatusOK {
				t.Fatalf("GET /findings?%s: %s", tc.query, r)
			}
			var d doc
			decode(t, r, &d)
			pg := d.Meta.Pagination
			if pg.Count != tc.count {
				t.Errorf("count = %d, want %d", pg.Count, tc.count)
			}
			switch {
			case tc.estimated && (pg.CountEstimated == nil || !*pg.CountEstimated):
				t.Errorf("count_estimated = %v, want true", pg.CountEstimated)
			case !tc.estimated && pg.CountEstimated != nil:
				t.Errorf("count_estimated = %v on an exact count, want it left out", *pg.CountEstimated)
			case tc.estimated && d.Links.Last != nil:
				t.Errorf("links.last = %q with a lower-bound count, want null", *d.Links.Last)
			}
			if d.Links.Next == nil {
				t.Errorf("links.next is null before the end of %d findings", tc.count)
			}
		})
	}
}
