package mcp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/docs"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
)

func TestMain(m *testing.M) { apitest.Main(m) }

func TestForwardAuthorization(t *testing.T) {
	cases := []struct {
		header, want, err string
	}{
		{"Bearer pk_abc.def", "Api-Key pk_abc.def", ""},
		{"bearer pk_abc.def", "Api-Key pk_abc.def", ""},
		{"Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", ""},
		{"Bearer  pk_spaces.around  ", "Api-Key pk_spaces.around", ""},
		{"Api-Key pk_abc.def", "Api-Key pk_abc.def", ""},
		{"Bearer", "", "malformed"},
		{"Bearer a b", "", "white space"},
		{"Basic dXNlcjpw", "", `unsupported Authorization scheme "Basic"`},
		{"pk_abc.def", "", "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.header, func(t *testing.T) {
			got, err := ForwardAuthorization(tc.header)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ForwardAuthorization(%q) = %q, %v; want an error saying %q", tc.header, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ForwardAuthorization(%q) = %q, %v; want %q", tc.header, got, err, tc.want)
			}
		})
	}
}

// TestAPIAddress: the MCP server takes its address in every form the docs
// give (API_BASE_URL is {base_url}/api/v1; a bare {base_url} is completed)
// and calls {base_url}/api/v1, under a path prefix too.
func TestAPIAddress(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"https://api.posture.dev/api/v1", "https://api.posture.dev/api/v1", ""},
		{"https://api.posture.dev/api/v1/", "https://api.posture.dev/api/v1", ""},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1", ""},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/api/v1", ""},
		{" http://proxy/posture/api/v1 ", "http://proxy/posture/api/v1", ""},
		{"http://proxy/posture", "http://proxy/posture/api/v1", ""},
		{"http://posture-api.posture-system.svc:8080/api/v1", "http://posture-api.posture-system.svc:8080/api/v1", ""},
		{"api.posture.dev/api/v1", "", "must start with https://"},
		{"ftp://x/api/v1", "", "must start with https://"},
		{"http:///api/v1", "", "no host"},
		{"http://x/api/v1?x=1", "", "query"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			c, err := newAPIClient(tc.in, nil, "test")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), strings.TrimSpace(tc.in)) {
					t.Fatalf("newAPIClient(%q) = %v; want an error naming the address and saying %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || c.BaseURL() != tc.want {
				t.Fatalf("newAPIClient(%q) = %v; want %s", tc.in, err, tc.want)
			}
		})
	}
}

func TestAPIErrorMessages(t *testing.T) {
	cases := []struct {
		err  APIError
		want []string
	}{
		{APIError{Endpoint: "GET http://x/api/v1/tenant", Cause: errors.New("connection refused")},
			[]string{"cannot reach the Posture API", "connection refused", "API_BASE_URL"}},
		{APIError{Status: 401, Detail: "invalid API key", Endpoint: "GET /x"},
			[]string{"authentication failed (HTTP 401): invalid API key", "30 minutes", "API address"}},
		{APIError{Status: 402, Detail: "no subscription", Endpoint: "GET /x"}, []string{"subscription required (HTTP 402)", "no subscription"}},
		{APIError{Status: 403, Detail: "lacks manage_ingestions", Endpoint: "POST /x"}, []string{"permission denied (HTTP 403)", "manage_ingestions", "administrator"}},
		{APIError{Status: 404, Detail: `no ingestion "x"`, Source: "id", Endpoint: "GET /x"}, []string{"not found (HTTP 404)", `no ingestion "x" (at id)`}},
		{APIError{Status: 429, Detail: "too many", RetryAfter: "7", Endpoint: "GET /x"}, []string{"rate limited (HTTP 429)", "retry after 7 seconds"}},
		{APIError{Status: 400, Detail: "bad filter", Source: "filter[x]", Endpoint: "GET /x"}, []string{"rejected the request (HTTP 400): bad filter (at filter[x])"}},
		{APIError{Status: 503, Detail: "down", Endpoint: "GET /x"}, []string{"the Posture API failed (HTTP 503): down"}},
	}
	for _, tc := range cases {
		msg := tc.err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("HTTP %d message %q does not say %q", tc.err.Status, msg, w)
			}
		}
	}
	// With the API's own details, which already say what to do, the advice
	// is said once.
	for _, tc := range []struct {
		err  APIError
		once string
	}{
		{APIError{Status: 403, Detail: "the user behind this credential lacks the manage_ingestions permission; an administrator must grant it", Endpoint: "POST /x"}, "administrator"},
		{APIError{Status: 403, Detail: "lacks manage_ingestions", Endpoint: "POST /x"}, "administrator"},
		{APIError{Status: 402, Detail: "tenant acme has no active subscription; ingesting reports and reading their findings need one", Endpoint: "GET /x"}, "subscription"},
		{APIError{Status: 402, Detail: "payment required", Endpoint: "GET /x"}, "subscription"},
	} {
		msg := tc.err.Error()
		// "subscription required (HTTP 402)" names it too.
		want := 1
		if tc.err.Status == 402 {
			want = 2
		}
		if n := strings.Count(strings.ToLower(msg), tc.once); n != want {
			t.Errorf("HTTP %d message %q says %q %d times, want %d", tc.err.Status, msg, tc.once, n, want)
		}
	}
}

func TestDocsParseAndSearch(t *testing.T) {
	fsys := fstest.MapFS{
		"install.md": {Data: []byte("# Installing\n\nRun helm install.\n\n## Upgrades\n\nRun helm upgrade.\n")},
		"mcp.md": {Data: []byte("# MCP\n\nIntro.\n\n```sh\n# not a heading\nexport PROWLER_API_KEY=x\n```\n\n" +
			"## JWT renewal\n\nA JWT lasts 30 minutes; renew it with the refresh token.\n")},
		"notes.txt": {Data: []byte("ignored: not Markdown")},
	}
	ds, err := loadDocs(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ds.names(), ","); got != "install,mcp" {
		t.Fatalf("docs %s, want install,mcp", got)
	}
	d, _ := ds.find("docs/mcp.md")
	var headings []string
	for _, s := range d.Sections {
		headings = append(headings, s.Heading)
	}
	if strings.Join(headings, "|") != "MCP|JWT renewal" {
		t.Errorf("sections %q: a # line in a code fence must not start a section", headings)
	}
	hits := ds.search("jwt renewal", 5)
	if len(hits) == 0 || hits[0].Doc != "mcp" || hits[0].Heading != "JWT renewal" {
		t.Fatalf("search jwt renewal: %+v", hits)
	}
	if !strings.Contains(hits[0].Snippet, "30 minutes") {
		t.Errorf("snippet %q does not show the match", hits[0].Snippet)
	}
	if hits := ds.search("helm", 1); len(hits) != 1 || hits[0].Doc != "install" {
		t.Errorf("search helm with limit 1: %+v", hits)
	}
	if hits := ds.search("kubernetes", 5); len(hits) != 0 {
		t.Errorf("search for an absent word found %+v", hits)
	}
}

func TestEmbeddedDocs(t *testing.T) {
	ds, err := loadDocs(docs.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ds.find("mcp"); !ok {
		t.Fatalf("docs/mcp.md is not embedded; pages: %v", ds.names())
	}
	hits := ds.search("PROWLER_API_KEY API_BASE_URL", 3)
	if len(hits) == 0 || hits[0].Doc != "mcp" {
		t.Errorf("search for the STDIO variables: %+v; want docs/mcp.md first", hits)
	}
}

// counting wraps the API's authenticator to count the requests it sees.
type counting struct {
	next auth.Authenticator
	n    atomic.Int32
}

func (c *counting) Authenticate(r *http.Request) (auth.Principal, error) {
	c.n.Add(1)
	return c.next.Authenticate(r)
}

func TestVerifierRemembersOnlySuccess(t *testing.T) {
	// The principal is filled in once apitest has made the tenant.
	key := apitest.NewKey()
	static := &auth.StaticKey{KeyHash: auth.HashKey(key)}
	cnt := &counting{next: staticRef{static}}
	env := apitest.Start(t, apitest.Options{Auth: cnt})
	static.Principal = auth.Principal{Tenant: env.Tenant, Namespace: env.Namespace, User: "u@example.com", Subscribed: true}

	api, err := newAPIClient(env.URL+"/api/v1", nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(api)
	now := time.Now()
	v.now = func() time.Time { return now }
	ctx := context.Background()

	if err := v.verify(ctx, "Api-Key "+key); err != nil {
		t.Fatalf("good key refused: %v", err)
	}
	if err := v.verify(ctx, "Api-Key "+key); err != nil {
		t.Fatal(err)
	}
	if got := cnt.n.Load(); got != 1 {
		t.Errorf("the API saw %d requests for two checks of one key within the TTL; want 1", got)
	}
	now = now.Add(verifyTTL + time.Second)
	if err := v.verify(ctx, "Api-Key "+key); err != nil {
		t.Fatal(err)
	}
	if got := cnt.n.Load(); got != 2 {
		t.Errorf("after the TTL the API saw %d requests; want the check repeated (2)", got)
	}

	bad := "Api-Key " + apitest.NewKey()
	for i := range 2 {
		err := v.verify(ctx, bad)
		if !isStatus(err, http.StatusUnauthorized) {
			t.Fatalf("bad key check %d: %v; want a 401 APIError", i, err)
		}
	}
	if got := cnt.n.Load(); got != 4 {
		t.Errorf("the API saw %d requests; a refused key must be asked about every time (want 4)", got)
	}
}

type staticRef struct{ k *auth.StaticKey }

func (s staticRef) Authenticate(r *http.Request) (auth.Principal, error) { return s.k.Authenticate(r) }

// A tool that panics answers with an error result; the server goes on.
func TestToolPanicIsAnErrorResult(t *testing.T) {
	s, err := New(Config{APIBaseURL: "http://127.0.0.1:9/api/v1"})
	if err != nil {
		t.Fatal(err)
	}
	type in struct{}
	addTool(s, &mcpsdk.Tool{Name: "explode_now", Description: "panics", InputSchema: inputSchema[in](nil)}, false,
		func(context.Context, *caller, in) (any, error) { panic("boom") })

	ct, st := mcpsdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.SDK().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "explode_now"})
	if err != nil {
		t.Fatalf("a panicking tool broke the call: %v", err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "internal error in explode_now") {
		t.Errorf("result %+v; want an error result naming the tool", res)
	}
	// The session still works.
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "get_ocsf_reference", Arguments: map[string]any{"field": "class_uid"}})
	if err != nil || res.IsError {
		t.Fatalf("after the panic: %v %+v", err, res)
	}
}

// A panic in the SDK's part of a call, before or after our tool's handler
// (a raw handler stands in for it here), is an error result naming the
// tool, not the end of the process: the SDK runs each request on a
// goroutine of its own.
// A panic while the SDK answers any other method is an internal JSON-RPC
// error naming the method. No method of the SDK's can be made to panic
// from outside, and a middleware a test added would wrap the guard, out of
// its reach: the guard is called here as the SDK calls it.
func TestGuardAnswersAnotherMethodsPanicWithAnInternalError(t *testing.T) {
	s, err := New(Config{APIBaseURL: "http://127.0.0.1:9/api/v1"})
	if err != nil {
		t.Fatal(err)
	}
	h := s.guard(func(context.Context, string, mcpsdk.Request) (mcpsdk.Result, error) {
		var m map[string]any
		m["x"] = 1
		return nil, nil
	})
	res, err := h(context.Background(), "resources/list", &mcpsdk.ListResourcesRequest{Params: &mcpsdk.ListResourcesParams{}})
	var je *jsonrpc.Error
	if res != nil || !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "internal error in resources/list") {
		t.Errorf("guard = %v, %v; want JSON-RPC error %d naming the method", res, err, jsonrpc.CodeInternalError)
	}
}

func TestPanicOutsideToolHandlerIsAnErrorResult(t *testing.T) {
	s, err := New(Config{APIBaseURL: "http://127.0.0.1:9/api/v1"})
	if err != nil {
		t.Fatal(err)
	}
	s.SDK().AddTool(&mcpsdk.Tool{Name: "explode_raw", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var m map[string]any
			m["x"] = 1 // the SDK's panic once: assignment to entry in nil map
			return nil, nil
		})
	cs := inMemorySession(t, s)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "explode_raw"})
	if err != nil {
		t.Fatalf("a panic outside the tool's handler broke the call: %v", err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "internal error in explode_raw") {
		t.Errorf("result %+v; want an error result naming the tool", res)
	}
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "get_ocsf_reference", Arguments: map[string]any{"field": "class_uid"}})
	if err != nil || res.IsError {
		t.Fatalf("after the panic: %v %+v", err, res)
	}
}
