package restapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/restapi"
)

// seen is what a loopback server received.
type seen struct {
	method, uri, accept, authz, agent, ctype string
	length                                   int64
	chunked                                  bool
	body                                     string
}

func recorder(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = seen{method: r.Method, uri: r.RequestURI, accept: r.Header.Get("Accept"), authz: r.Header.Get("Authorization"),
			agent: r.Header.Get("User-Agent"), ctype: r.Header.Get("Content-Type"), length: r.ContentLength,
			chunked: len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked", body: string(b)}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func client(t *testing.T, raw string) *restapi.Client {
	t.Helper()
	base, err := restapi.ParseBaseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	c := restapi.New(base, hc, "restapi-test/1")
	c.Authorization = "Api-Key pk_default.key"
	return c
}

func answer(status int, ctype, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// TestCallsGoWhereTheContractSays: each call reaches {base_url}/api/v1 plus
// its path, whichever form the address was given in, with the JSON:API
// Accept header, the user agent and the credential of the call (else the
// client's); an id stays one path segment.
func TestCallsGoWhereTheContractSays(t *testing.T) {
	const list = `{"data":[],"links":{"first":"x","last":"x","next":null,"prev":null},"meta":{"version":"v1","pagination":{"page":1,"pages":1,"count":0}}}`
	srv, got := recorder(t, answer(200, restapi.MediaType, list))
	for _, tc := range []struct {
		name, base string
		call       restapi.Call
		uri, authz string
	}{
		{"bare base", srv.URL, restapi.Call{Method: "GET", Path: restapi.PathIngestions}, "/api/v1/ingestions", "Api-Key pk_default.key"},
		{"base with /api/v1", srv.URL + "/api/v1/", restapi.Call{Method: "GET", Path: restapi.PathIngestions}, "/api/v1/ingestions", "Api-Key pk_default.key"},
		{"path prefix", srv.URL + "/posture", restapi.Call{Method: "GET", Path: restapi.PathFindings, Query: url.Values{"page[size]": {"1"}}},
			"/posture/api/v1/findings?page%5Bsize%5D=1", "Api-Key pk_default.key"},
		{"path prefix with /api/v1", srv.URL + "/posture/api/v1", restapi.Call{Method: "GET", Path: restapi.PathTenant}, "/posture/api/v1/tenant", "Api-Key pk_default.key"},
		{"the call's credential", srv.URL, restapi.Call{Method: "GET", Path: restapi.PathScans, Authorization: "Bearer eyJ.x"}, "/api/v1/scans", "Bearer eyJ.x"},
		{"an id with a slash", srv.URL, restapi.Call{Method: "GET", Path: restapi.PathIngestions + "/" + url.PathEscape("a/b")}, "/api/v1/ingestions/a%2Fb", "Api-Key pk_default.key"},
		{"an id that is ..", srv.URL, restapi.Call{Method: "GET", Path: restapi.PathFindings + "/" + url.PathEscape("..")}, "/api/v1/findings/..", "Api-Key pk_default.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client(t, tc.base).Do(context.Background(), tc.call)
			if err != nil {
				t.Fatal(err)
			}
			if got.uri != tc.uri || got.authz != tc.authz || got.accept != restapi.MediaType || got.agent != "restapi-test/1" {
				t.Fatalf("server saw %+v; want %s with %q", *got, tc.uri, tc.authz)
			}
			if resp.Document == nil || resp.Document.Meta.Pagination == nil || resp.Document.Meta.Version != restapi.Version {
				t.Fatalf("document not decoded: %s", resp.Body)
			}
		})
	}
}

// TestFailures: every way a call can fail is an *restapi.Error that says
// what the API answered (or why nothing was), and whether retrying a read
// may help.
func TestFailures(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name      string
		h         http.HandlerFunc
		base      string // instead of the server
		ctx       context.Context
		status    int
		detail    string
		code      string
		where     string
		transient bool
		check     func(*restapi.Error) bool
	}{
		{name: "JSON:API error", h: answer(400, restapi.MediaType, `{"errors":[{"status":"400","code":"invalid","detail":"sort key nope is not one of time, uid","source":{"parameter":"sort"}}],"meta":{"version":"v1"}}`),
			status: 400, detail: "sort key nope is not one of time, uid", code: "invalid", where: "sort"},
		{name: "several errors", h: answer(400, restapi.MediaType, `{"errors":[{"status":"400","code":"invalid","detail":"a","source":{"pointer":"/data"}},{"status":"400","code":"invalid","detail":"b"}],"meta":{"version":"v1"}}`),
			status: 400, detail: "a; b", code: "invalid", where: "/data"},
		{name: "rate limited", h: answer(429, restapi.MediaType, `{"errors":[{"status":"429","code":"rate_limited","detail":"slow down","source":{"header":"Authorization"}}],"meta":{"version":"v1"}}`, "Retry-After", "7"),
			status: 429, detail: "slow down", code: "rate_limited", where: "Authorization", transient: true,
			check: func(e *restapi.Error) bool { return e.RetryAfter() == "7" }},
		{name: "server error in HTML", h: answer(502, "text/html", "<html>\n  <h1>Bad gateway</h1></html>"),
			status: 502, detail: "<html> <h1>Bad gateway</h1></html>", transient: true,
			check: func(e *restapi.Error) bool { return e.ContentType() == "text/html" && len(e.Errors) == 0 }},
		{name: "empty 404", h: answer(404, "", ""), status: 404, detail: "no details in the response"},
		{name: "redirect", h: answer(302, "", "", "Location", "https://elsewhere.example/api/v1/ingestions"), status: 302,
			check: func(e *restapi.Error) bool { return e.Location() == "https://elsewhere.example/api/v1/ingestions" }},
		{name: "too large", h: answer(200, restapi.MediaType, `{"data":"`+strings.Repeat("x", 2<<10)+`"}`), status: 200, detail: "larger than 1024 bytes",
			check: func(e *restapi.Error) bool { return e.TooLarge }},
		{name: "unreachable", base: closed.URL, detail: "connection refused", transient: true,
			check: func(e *restapi.Error) bool {
				return e.Cause != nil && strings.HasPrefix(e.Endpoint(), "GET "+closed.URL+"/api/v1/findings?page[size]=1")
			}},
		{name: "cancelled", ctx: cancelled, detail: "context canceled",
			check: func(e *restapi.Error) bool { return errors.Is(e, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == nil {
				h = answer(200, restapi.MediaType, `{"data":[]}`)
			}
			srv, _ := recorder(t, h)
			base := srv.URL
			if tc.base != "" {
				base = tc.base
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			c := client(t, base)
			c.MaxResponseBytes = 1 << 10
			resp, err := c.Get(ctx, restapi.PathFindings, url.Values{"page[size]": {"1"}})
			var fail *restapi.Error
			if !errors.As(err, &fail) {
				t.Fatalf("Get = %v, %v; want an *restapi.Error", resp, err)
			}
			if fail.Status != tc.status || !strings.Contains(fail.Detail(), tc.detail) || restapi.Transient(err) != tc.transient {
				t.Fatalf("error %v: status %d, detail %q, transient %v; want %d, %q, %v", err, fail.Status, fail.Detail(), restapi.Transient(err), tc.status, tc.detail, tc.transient)
			}
			if tc.code != "" && (fail.Errors[0].Code != tc.code || fail.Errors[0].Source.Where() != tc.where) {
				t.Fatalf("error objects %+v; want code %s at %s", fail.Errors, tc.code, tc.where)
			}
			if restapi.StatusOf(err) != tc.status {
				t.Fatalf("StatusOf = %d, want %d", restapi.StatusOf(err), tc.status)
			}
			if tc.check != nil && !tc.check(fail) {
				t.Fatalf("error %+v", fail)
			}
			if !strings.Contains(err.Error(), "GET ") || !strings.Contains(err.Error(), "/api/v1/findings?page[size]=1") {
				t.Fatalf("Error() = %q does not name the call", err)
			}
		})
	}
}

// TestUploadCall: a report goes up as the multipart part "file" under its
// name, with a Content-Length when its size is known and chunked when not.
func TestUploadCall(t *testing.T) {
	const report = `[{"class_uid":2004}]`
	srv, got := recorder(t, answer(202, restapi.MediaType, `{"data":{"type":"ingestions","id":"j1","attributes":{"status":"pending","summary":{"total":1,"processed":0,"invalid":0}}},"meta":{"version":"v1"}}`))
	for _, tc := range []struct {
		name    string
		size    int64
		chunked bool
	}{
		{"known size", int64(len(report)), false},
		{"unknown size", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, err := restapi.UploadCall("scan.ocsf.json", strings.NewReader(report), tc.size)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client(t, srv.URL).Do(context.Background(), call)
			if err != nil {
				t.Fatal(err)
			}
			var doc restapi.ResourceDocument[restapi.Ingestion]
			if err := resp.Decode(&doc); err != nil || doc.Data.ID != "j1" || doc.Data.Attributes.Summary.Total != 1 || doc.Data.Attributes.Done() {
				t.Fatalf("answer %+v, %v", doc, err)
			}
			if got.method != "POST" || got.uri != "/api/v1/ingestions" || got.chunked != tc.chunked || (!tc.chunked && got.length != int64(len(got.body))) {
				t.Fatalf("server saw %+v", *got)
			}
			req, _ := http.NewRequest("POST", "/", strings.NewReader(got.body))
			req.Header.Set("Content-Type", got.ctype)
			f, h, err := req.FormFile(restapi.ReportField)
			if err != nil {
				t.Fatalf("multipart body: %v\n%s", err, got.body)
			}
			b, _ := io.ReadAll(f)
			if h.Filename != "scan.ocsf.json" || string(b) != report {
				t.Fatalf("part %q = %q", h.Filename, b)
			}
		})
	}
}

func TestErrorDetail(t *testing.T) {
	for body, want := range map[string]string{
		`{"errors":[{"detail":"a"},{"detail":"b"}]}`: "a; b",
		`{"errors":[{"code":"rate_limited"}]}`:       "rate_limited",
		"":                                           "no details in the response",
		"plain\n text":                               "plain text",
		strings.Repeat("x", 400):                     strings.Repeat("x", 300) + "…",
		`{"errors":[{"title":"Bad","detail":""}]}`:      "Bad",
		`{"data":{"id":"x"}}`:                           `{"data":{"id":"x"}}`,
		`{"errors":[{"status":"500","detail":"boom"}]}`: "boom",
		"\xff\xfe bad bytes":                            "? bad bytes",
	} {
		if got := restapi.ErrorDetail([]byte(body)); got != want {
			t.Errorf("ErrorDetail(%q) = %q, want %q", body, got, want)
		}
	}
}

// TestPaging: the next page is reached by number while there is one, and by
// the cursor links.next carries on a page that has no number.
func TestPaging(t *testing.T) {
	next := "http://x/api/v1/findings?page%5Bcursor%5D=abc%2B%2F%3D&page%5Bsize%5D=10"
	for _, tc := range []struct {
		name     string
		p        *restapi.Pagination
		links    *restapi.Links
		nextPage int
		cursor   string
	}{
		{"first of three", &restapi.Pagination{Page: 1, Pages: 3, Count: 25}, &restapi.Links{Next: &next}, 2, "abc+/="},
		{"last", &restapi.Pagination{Page: 3, Pages: 3, Count: 25}, &restapi.Links{}, 0, ""},
		{"by cursor", &restapi.Pagination{Pages: 3, Count: 25}, &restapi.Links{Next: &next}, 0, "abc+/="},
		{"no paging", nil, nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.NextPage(); got != tc.nextPage {
				t.Errorf("NextPage = %d, want %d", got, tc.nextPage)
			}
			if got := tc.links.NextCursor(); got != tc.cursor {
				t.Errorf("NextCursor = %q, want %q", got, tc.cursor)
			}
		})
	}
}

// An id is one path segment, and addresses nothing but its resource.
func TestIDSegment(t *testing.T) {
	for _, tc := range []struct {
		id, want string
		ok       bool
	}{
		{"abc", "abc", true},
		{" 3f2a ", "3f2a", true},
		{"../tenant", "..%2Ftenant", true},
		{"...", "...", true},
		{"a b", "a%20b", true},
		{"", "", false},
		{"  ", "", false},
		{".", "", false},
		{"..", "", false},
		{" .. ", "", false},
	} {
		got, err := restapi.IDSegment(tc.id)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("IDSegment(%q) = %q, %v; want %q, ok %v", tc.id, got, err, tc.want, tc.ok)
		}
	}
}
