package webhook_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestQueryBounds: terms and lists too large for the database are the
// client's mistake, answered 400 naming the parameter, never a 500.
func TestQueryBounds(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	items := func(n int) string { return strings.TrimSuffix(strings.Repeat("x,", n), ",") }
	cases := []struct {
		name, path, query, param string
		fragments                []string
		ok                       bool
	}{
		{"100,000-character search", "/api/v1/findings", "filter[search]=" + strings.Repeat("a", 100000), "filter[search]", []string{"100000 characters", "at most 256"}, false},
		{"257-character search", "/api/v1/findings", "filter[search]=" + strings.Repeat("é", 257), "filter[search]", []string{"257 characters"}, false},
		{"256-character search", "/api/v1/findings", "filter[search]=" + strings.Repeat("é", 256), "", nil, true},
		{"ingestion search too", "/api/v1/ingestions", "filter[search]=" + strings.Repeat("a", 257), "filter[search]", []string{"at most 256"}, false},
		{"40,000 severities", "/api/v1/findings", "filter[severity__in]=" + strings.TrimSuffix(strings.Repeat("high,", 40000), ","), "filter[severity__in]", []string{"40000 items", "at most 100"}, false},
		{"40,000 status codes", "/api/v1/findings", "filter[status_code__in]=" + items(40000), "filter[status_code__in]", []string{"40000 items"}, false},
		{"101 provider types", "/api/v1/findings", "filter[provider_type__in]=" + items(101), "filter[provider_type__in]", []string{"101 items"}, false},
		{"100 provider types", "/api/v1/findings", "filter[provider_type__in]=" + items(100), "", nil, true},
		{"a NUL in a search", "/api/v1/findings", "filter[search]=abc%00def", "filter[search]", []string{"NUL character at byte 3"}, false},
		{"a NUL in a search of counts", "/api/v1/findings/counts", "group_by=severity&filter[search]=abc%00", "filter[search]", []string{"NUL"}, false},
		{"a NUL in a check id", "/api/v1/findings", "filter[check_id]=a%00b", "filter[check_id]", []string{"NUL"}, false},
		{"invalid UTF-8 in a search", "/api/v1/findings", "filter[search]=ab%FF%FEcd", "filter[search]", []string{"not valid UTF-8"}, false},
		{"ingestion statuses", "/api/v1/ingestions", "filter[status__in]=" + strings.TrimSuffix(strings.Repeat("pending,", 101), ","), "filter[status__in]", []string{"101 items"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ok {
				a.list(tc.path, tc.query)
				return
			}
			wantError(t, a.get(tc.path, tc.query), 400, "invalid", "parameter:"+tc.param, tc.fragments...)
		})
	}
}

// TestRepeatedQueryParameters: a parameter given twice has no single
// meaning, so it is refused on every endpoint rather than last-one-wins.
func TestRepeatedQueryParameters(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	cases := []struct{ path, query, param string }{
		{"/api/v1/findings", "page[size]=500&page[size]=5", "page[size]"},
		{"/api/v1/findings", "filter[severity]=high&filter[severity]=low", "filter[severity]"},
		{"/api/v1/findings", "sort=time&sort=-time", "sort"},
		{"/api/v1/ingestions", "page[number]=1&page[number]=1", "page[number]"},
		{"/api/v1/ingestions", "fields[ingestions]=status&fields[ingestions]=summary", "fields[ingestions]"},
		{"/api/v1/scans", "page[size]=5&page[size]=5", "page[size]"},
		{"/api/v1/providers", "page[size]=5&page[size]=6", "page[size]"},
	}
	for _, tc := range cases {
		t.Run(tc.path+"?"+tc.query, func(t *testing.T) {
			wantError(t, a.get(tc.path, tc.query), 400, "invalid", "parameter:"+tc.param, "given 2 times")
		})
	}
	t.Run("a broken escape", func(t *testing.T) {
		wantError(t, a.get("/api/v1/findings", "filter[search]=%zz"), 400, "invalid", "", "malformed")
	})
}

// TestAcceptNegotiation: the response is JSON:API, readable as JSON; an
// Accept header that rules out both, explicitly or by q=0, gets 406.
func TestAcceptNegotiation(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	cases := []struct {
		accept string
		ok     bool
	}{
		{"application/json;q=0", false},
		{"application/vnd.api+json;q=0", false},
		{"application/vnd.api+json;q=0, application/json;q=0", false},
		{"application/vnd.api+json; q=0.000, application/json;q=0, text/html", false},
		{"*/*;q=0", false},
		{"application/*;q=0", false},
		{"application/*;q=0, */*", false},
		{"application/json;q=0, application/vnd.api+json;q=0, */*;q=0.5", false},
		{"text/html, image/png", false},
		{"", true},
		{"*/*", true},
		{"application/json", true},
		{"application/vnd.api+json", true},
		{"application/json;q=0, application/vnd.api+json", true},
		{"application/json;q=0, */*", true},
		{"application/vnd.api+json;q=0, application/json;q=0.2", true},
		{"text/html, application/*;q=0.1", true},
		{"APPLICATION/JSON", true},
	}
	for _, tc := range cases {
		t.Run(tc.accept, func(t *testing.T) {
			h := http.Header{"Accept": {tc.accept}}
			if tc.accept == "" {
				h = http.Header{"Accept": nil}
			}
			r := a.request(http.MethodGet, "/api/v1/ingestions", nil, h)
			if tc.ok {
				if r.status != 200 {
					t.Fatalf("Accept %q: %s", tc.accept, r)
				}
				return
			}
			wantError(t, r, 406, "not_acceptable", "header:Accept")
		})
	}
}
