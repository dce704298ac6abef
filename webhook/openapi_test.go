package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(webhook.OpenAPIYAML)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

// route is one registered pattern and a method it serves.
type route struct{ method, pattern string }

// registeredPatterns reads the route patterns from the package's source:
// every Handle/HandleFunc call with a literal pattern in a non-test file.
// Reading the source, rather than a list kept in the test, is what makes
// a newly registered route fail the test until it is documented.
func registeredPatterns(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(testenv.Root(), "webhook")
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") || len(call.Args) != 2 {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: route pattern is not a string literal; the OpenAPI test cannot read it", fset.Position(call.Pos()))
					return true
				}
				p, _ := strconv.Unquote(lit.Value)
				out = append(out, p)
				return true
			})
		}
	}
	sort.Strings(out)
	return out
}

// fill substitutes {name} segments of a pattern with the ids in ids.
func fill(pattern string, ids map[string]string) string {
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			parts[i] = ids[strings.Join(parts[:i], "/")]
		}
	}
	return strings.Join(parts, "/")
}

// TestOpenAPI holds the document and the server together: the document is
// valid, served at /api/v1/schema, every registered route is documented,
// every documented operation answers, and responses of the endpoints match
// their documented schemas.
func TestOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	env := apitest.Start(t, apitest.Options{})
	a := newAPI(t, env)

	// Real objects for every {id}, so the GETs answer 200.
	job, status, _ := a.ingest("aws_3_records.ocsf.json", fixture(t, "aws_3_records.ocsf.json"))
	if status != "completed" {
		t.Fatalf("setup ingestion %s", status)
	}
	first := a.list("/api/v1/findings", "page[size]=1")
	finding := first.Data[0].ID
	next, err := url.Parse(*first.Links.Next)
	if err != nil {
		t.Fatal(err)
	}
	cursor := url.QueryEscape(next.Query().Get("page[cursor]"))
	prov := &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "aws-123456789012", Namespace: env.Namespace},
		Spec: posturev1.ProviderSpec{Type: "aws", UID: "123456789012", Origin: posturev1.ProviderImported}}
	if err := env.Client.Create(context.Background(), prov); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	ids := map[string]string{
		"/api/v1/ingestions": job,
		"/api/v1/findings":   finding,
		"/api/v1/providers":  prov.Name,
	}

	t.Run("served at /api/v1/schema", func(t *testing.T) {
		anon := &api{t: t, url: env.URL}
		r := anon.request(http.MethodGet, "/api/v1/schema", nil, http.Header{"Accept": {"application/json"}})
		if r.status != 200 || r.header.Get("Content-Type") != "application/vnd.oai.openapi+json" {
			t.Fatalf("GET schema: %d %s", r.status, r.header.Get("Content-Type"))
		}
		want, err := yaml.YAMLToJSON(webhook.OpenAPIYAML)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.body, want) {
			t.Fatal("the served document differs from openapi.yaml")
		}
		r = anon.request(http.MethodGet, "/api/v1/schema", nil, http.Header{"Accept": {"application/yaml"}})
		if r.status != 200 || r.header.Get("Content-Type") != "application/yaml" || !bytes.Equal(r.body, webhook.OpenAPIYAML) {
			t.Fatalf("GET schema as YAML: %d %s", r.status, r.header.Get("Content-Type"))
		}
		wantError(t, anon.request(http.MethodGet, "/api/v1/schema", nil, http.Header{"Accept": {"text/html"}}), 406, "not_acceptable", "header:Accept")
		wantError(t, anon.get("/api/v1/schema", "format=json"), 400, "invalid", "parameter:format")
	})

	patterns := registeredPatterns(t)
	var registered []route
	t.Run("every registered route is documented", func(t *testing.T) {
		for _, p := range patterns {
			method, path, hasMethod := strings.Cut(p, " ")
			if !hasMethod {
				method, path = "", p
			}
			if strings.HasSuffix(path, "/") {
				continue // a subtree fallback (the JSON:API 404), not a route
			}
			methods := []string{method}
			if method == "" {
				// The method set is what the route itself says in Allow on a 405.
				r := a.request("PROPFIND", fill(path, ids), nil, nil)
				if r.status == 405 && r.header.Get("Allow") != "" {
					methods = strings.Split(r.header.Get("Allow"), ", ")
				} else {
					methods = []string{http.MethodGet}
				}
			}
			for _, m := range methods {
				if m == http.MethodHead {
					continue // served with GET; OpenAPI documents GET
				}
				registered = append(registered, route{m, path})
				item := doc.Paths.Find(path)
				if item == nil || item.GetOperation(m) == nil {
					t.Errorf("%s %s is served but not documented in openapi.yaml", m, path)
				}
			}
		}
		if len(registered) < 10 {
			t.Fatalf("only %d routes found in the source: %v", len(registered), registered)
		}
	})

	doc.Servers = openapi3.Servers{{URL: env.URL}}
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	openapi3filter.RegisterBodyDecoder(webhook.MediaType, openapi3filter.JSONBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/vnd.oai.openapi+json", openapi3filter.JSONBodyDecoder)

	// validate checks one exchange against the document.
	validate := func(t *testing.T, req *http.Request, r response) {
		t.Helper()
		rt, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: no documented operation: %v", req.Method, req.URL, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: rt,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: r.status, Header: r.header,
			Body:    io.NopCloser(bytes.NewReader(r.body)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s %s → %d: response does not match the document: %v\n%s", req.Method, req.URL, r.status, err, clip(r.body))
		}
	}
	exchange := func(t *testing.T, method, target string, body []byte, header http.Header) (*http.Request, response) {
		t.Helper()
		req, err := http.NewRequest(method, env.URL+target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", webhook.MediaType)
		req.Header.Set("Authorization", env.Authorization())
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// The validator reads the request again; give it a fresh body.
		req.Body = io.NopCloser(bytes.NewReader(body))
		return req, response{status: resp.StatusCode, header: resp.Header, body: b}
	}

	t.Run("every documented operation answers", func(t *testing.T) {
		for _, path := range doc.Paths.InMatchingOrder() {
			for method := range doc.Paths.Value(path).Operations() {
				target := fill(path, ids)
				if path == "/api/v1/findings/counts" || path == "/api/v1/findings/latest/counts" {
					target += "?group_by=severity" // required
				}
				if strings.HasSuffix(path, "/export") {
					target += "?format=ocsf" // or an Accept header naming one
				}
				var body []byte
				hdr := http.Header{}
				switch {
				case method == http.MethodPost && path == "/api/v1/ingestions":
					var ct string
					var buf *bytes.Buffer
					buf, ct = multipartBody(t, part{"file", "r.ocsf.json", string(fixture(t, "aws_3_records.ocsf.json"))})
					body, hdr["Content-Type"] = buf.Bytes(), []string{ct}
				case method == http.MethodPost:
					body, hdr["Content-Type"] = []byte(`{"data":{"type":"tokens","attributes":{}}}`), []string{webhook.MediaType}
				}
				req, r := exchange(t, method, target, body, hdr)
				if r.status == 404 && strings.Contains(string(r.body), "no endpoint at") || r.status == 405 {
					t.Errorf("%s %s is documented but the server answers %s", method, path, clip(r.body))
					continue
				}
				if method == http.MethodGet && path != "/healthz" && r.status != 200 {
					t.Errorf("GET %s: %s", target, clip(r.body))
				}
				validate(t, req, r)
			}
		}
	})

	t.Run("responses match the documented schemas", func(t *testing.T) {
		for _, tc := range []struct{ method, target string }{
			{"GET", "/api/v1/ingestions?fields[ingestions]=status,summary"},
			{"GET", "/api/v1/ingestions?filter[status__in]=completed,failed&sort=-completed_at&page[size]=1"},
			{"GET", "/api/v1/ingestions?filter[status]=bogus"},
			{"GET", "/api/v1/ingestions?page[number]=9"},
			{"GET", "/api/v1/ingestions/" + job + "?fields[ingestions]=completed_at"},
			{"GET", "/api/v1/ingestions/00000000-0000-0000-0000-000000000000"},
			{"GET", "/api/v1/ingestions/" + job + "/errors?page[size]=100"},
			{"GET", "/api/v1/findings?fields[findings]=uid,record,time&sort=-time&page[size]=3"},
			{"GET", "/api/v1/findings?filter[severity__in]=critical,low&filter[status_code]=FAIL"},
			{"GET", "/api/v1/findings?sort=nope"},
			{"GET", "/api/v1/findings/" + finding + "?fields[findings]=record"},
			{"GET", "/api/v1/findings/nope"},
			{"GET", "/api/v1/findings/counts?group_by=severity,status_code,provider_type,provider_uid,check_id,region"},
			{"GET", "/api/v1/findings/counts?group_by=check_id&filter[status_code__in]=FAIL,PASS&filter[search]=aws"},
			{"GET", "/api/v1/findings/counts?group_by=check_id&filter[search]=s3"},
			{"GET", "/api/v1/findings/latest?fields[findings]=uid,record,time&sort=-time&page[size]=2"},
			{"GET", "/api/v1/findings/latest?filter[severity__in]=critical,low&filter[search]=arn:aws&page[size]=1"},
			{"GET", "/api/v1/findings/latest?page[size]=1&page[cursor]=" + cursor},
			{"GET", "/api/v1/findings/latest/counts?group_by=severity,status_code,provider_type,provider_uid"},
			{"GET", "/api/v1/findings/latest/counts?group_by=region&filter[status_code]=FAIL"},
			{"GET", "/api/v1/findings/counts?group_by=title"},
			{"GET", "/api/v1/findings?page[size]=1&page[number]=10002"},
			{"GET", "/api/v1/findings?page[size]=1&page[cursor]=" + cursor},
			{"GET", "/api/v1/findings?page[size]=1&page[cursor]=forged"},
			{"GET", "/api/v1/scans?fields[scans]=finding_count"},
			{"GET", "/api/v1/providers?filter[origin]=imported"},
			{"GET", "/api/v1/providers/" + prov.Name},
			{"GET", "/api/v1/providers/none-such"},
			{"GET", "/api/v1/findings/export?format=csv&filter[severity__in]=critical,low&sort=uid"},
			{"GET", "/api/v1/findings/latest/export?format=ocsf&filter[status_code]=FAIL"},
			{"GET", "/api/v1/findings/latest/export?format=xml"},
			{"GET", "/api/v1/findings/export?format=csv&page[size]=2"},
		} {
			req, r := exchange(t, tc.method, tc.target, nil, nil)
			validate(t, req, r)
		}
		// A 405 has no documented operation to route to; its body is
		// checked against the error schema directly.
		_, r405 := exchange(t, "DELETE", "/api/v1/ingestions", nil, nil)
		var body any
		if err := json.Unmarshal(r405.body, &body); err != nil {
			t.Fatal(err)
		}
		if err := doc.Components.Schemas["ErrorDocument"].Value.VisitJSON(body); r405.status != 405 || err != nil {
			t.Errorf("405 body %s: %v", r405.body, err)
		}
		// An empty job: errors with a null record_index.
		id := accepted(t, a.upload("empty.ocsf.json", []byte("[]")), 0)
		a.wait(id)
		req, r := exchange(t, "GET", "/api/v1/ingestions/"+id+"/errors", nil, nil)
		var d listDoc
		decode(t, r, &d)
		if len(d.Data) != 1 || d.Data[0].Attributes["record_index"] != nil {
			t.Fatalf("errors of an empty report: %s", r.body)
		}
		validate(t, req, r)
		// Upload errors: 400 and a 406.
		mp, ct := multipartBody(t, part{"file", "x.json", "[]"})
		req, r = exchange(t, "POST", "/api/v1/ingestions", mp.Bytes(), http.Header{"Content-Type": {ct}})
		validate(t, req, r)
		req, r = exchange(t, "GET", "/api/v1/findings", nil, http.Header{"Accept": {"text/html"}})
		validate(t, req, r)
	})

	t.Run("the document is what the docs describe", func(t *testing.T) {
		// Every operation lists its errors: a documented 2xx and 4xx each.
		for _, path := range doc.Paths.InMatchingOrder() {
			for method, op := range doc.Paths.Value(path).Operations() {
				var codes []string
				for code := range op.Responses.Map() {
					codes = append(codes, code)
				}
				if !slices.ContainsFunc(codes, func(c string) bool { return c[0] == '2' }) {
					t.Errorf("%s %s documents no success response", method, path)
				}
				if path != "/healthz" && !slices.ContainsFunc(codes, func(c string) bool { return c[0] == '4' }) {
					t.Errorf("%s %s documents no error response", method, path)
				}
			}
		}
	})
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
