package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

// The client package (restapi) and the server describe one contract; these
// tests hold the package to openapi.yaml, which TestOpenAPI holds to the
// server, and then ask the server itself.

var rawMessage = reflect.TypeFor[json.RawMessage]()

// jsonFields are a struct's members as JSON names them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// jsonKind is the OpenAPI type a Go type reads; "" for json.RawMessage,
// which reads anything.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessage:
		return ""
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Slice:
		return "array"
	}
	return "object"
}

// genericName is a type's name without its type arguments: every
// Resource[X] is one Resource.
func genericName(t reflect.Type) string {
	name, _, _ := strings.Cut(t.Name(), "[")
	return t.PkgPath() + "." + name
}

// shapeChecker walks Go types along the schemas they decode. Each schema's
// members must all be readable by the type matched to it; and the members
// of each type must be, together, those of the schemas matched to it (a
// shared shape such as Meta holds the union of every document's meta).
type shapeChecker struct {
	t      *testing.T
	seen   map[string]map[string]bool // genericName → schema members matched
	fields map[string]map[string]bool // genericName → the type's members
	where  map[string]string
}

func (c *shapeChecker) match(typ reflect.Type, s *openapi3.Schema, at string) {
	c.t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if s == nil || typ == rawMessage {
		return
	}
	if want := jsonKind(typ); want != "" && s.Type != nil && !s.Type.Is(want) {
		c.t.Errorf("%s: openapi.yaml says %v, restapi's %s reads %s", at, *s.Type, typ, want)
		return
	}
	switch typ.Kind() {
	case reflect.Slice:
		if s.Items != nil {
			c.match(typ.Elem(), s.Items.Value, at+"[]")
		}
		return
	case reflect.Struct:
	default:
		return
	}
	key := genericName(typ)
	if c.seen[key] == nil {
		c.seen[key], c.fields[key], c.where[key] = map[string]bool{}, map[string]bool{}, at
	}
	fields := jsonFields(typ)
	for name := range fields {
		c.fields[key][name] = true
	}
	for name, prop := range s.Properties {
		c.seen[key][name] = true
		ft, ok := fields[name]
		if !ok {
			c.t.Errorf("%s.%s is documented, but restapi's %s has no field for it", at, name, typ)
			continue
		}
		c.match(ft, prop.Value, at+"."+name)
	}
}

// done checks every type's members against the union of its schemas'.
func (c *shapeChecker) done() {
	c.t.Helper()
	for key, fields := range c.fields {
		for name := range fields {
			if !c.seen[key][name] {
				c.t.Errorf("restapi's %s has a field %q that no schema it reads documents (first matched at %s)", key, name, c.where[key])
			}
		}
	}
}

func schema(t *testing.T, doc *openapi3.T, name string) *openapi3.Schema {
	t.Helper()
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("openapi.yaml has no schema %s", name)
	}
	return ref.Value
}

func requestBody(t *testing.T, doc *openapi3.T, path string) *openapi3.Schema {
	t.Helper()
	op := doc.Paths.Value(path).Post
	return op.RequestBody.Value.Content[restapi.MediaType].Schema.Value
}

func prop(s *openapi3.Schema, path ...string) *openapi3.Schema {
	for _, p := range path {
		if p == "[]" {
			s = s.Items.Value
			continue
		}
		s = s.Properties[p].Value
	}
	return s
}

func enumOf(s *openapi3.Schema) []string {
	var out []string
	for _, v := range s.Enum {
		out = append(out, fmt.Sprint(v))
	}
	sort.Strings(out)
	return out
}

func param(t *testing.T, doc *openapi3.T, path, name string) *openapi3.Parameter {
	t.Helper()
	for _, p := range doc.Paths.Value(path).Get.Parameters {
		if p.Value.Name == name {
			return p.Value
		}
	}
	t.Fatalf("GET %s documents no parameter %s", path, name)
	return nil
}

// TestClientContractMatchesOpenAPI: every resource struct, document and
// enum of restapi is what openapi.yaml documents, member for member.
func TestClientContractMatchesOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)

	t.Run("shapes", func(t *testing.T) {
		c := &shapeChecker{t: t, seen: map[string]map[string]bool{}, fields: map[string]map[string]bool{}, where: map[string]string{}}
		for _, tc := range []struct {
			typ    reflect.Type
			schema *openapi3.Schema
			at     string
		}{
			{reflect.TypeFor[restapi.ResourceDocument[restapi.Ingestion]](), schema(t, doc, "IngestionDocument"), "IngestionDocument"},
			{reflect.TypeFor[restapi.ListDocument[restapi.Ingestion]](), schema(t, doc, "IngestionListDocument"), "IngestionListDocument"},
			{reflect.TypeFor[restapi.ListDocument[restapi.IngestionError]](), schema(t, doc, "IngestionErrorListDocument"), "IngestionErrorListDocument"},
			{reflect.TypeFor[restapi.ResourceDocument[restapi.Finding]](), schema(t, doc, "FindingDocument"), "FindingDocument"},
			{reflect.TypeFor[restapi.ListDocument[restapi.Finding]](), schema(t, doc, "FindingListDocument"), "FindingListDocument"},
			{reflect.TypeFor[restapi.ListDocument[restapi.FindingCount]](), schema(t, doc, "FindingCountsDocument"), "FindingCountsDocument"},
			{reflect.TypeFor[restapi.ListDocument[restapi.Scan]](), schema(t, doc, "ScanListDocument"), "ScanListDocument"},
			{reflect.TypeFor[restapi.ResourceDocument[restapi.Provider]](), schema(t, doc, "ProviderDocument"), "ProviderDocument"},
			{reflect.TypeFor[restapi.ListDocument[restapi.Provider]](), schema(t, doc, "ProviderListDocument"), "ProviderListDocument"},
			{reflect.TypeFor[restapi.ResourceDocument[restapi.Token]](), schema(t, doc, "TokenDocument"), "TokenDocument"},
			{reflect.TypeFor[restapi.ResourceDocument[restapi.Tenant]](), schema(t, doc, "TenantDocument"), "TenantDocument"},
			{reflect.TypeFor[restapi.ErrorDocument](), schema(t, doc, "ErrorDocument"), "ErrorDocument"},
			{reflect.TypeFor[restapi.RequestDocument[restapi.TokenRequest]](), requestBody(t, doc, "/api/v1/tokens"), "POST /api/v1/tokens"},
			{reflect.TypeFor[restapi.RequestDocument[restapi.TokenRefreshRequest]](), requestBody(t, doc, "/api/v1/tokens/refresh"), "POST /api/v1/tokens/refresh"},
			// Document reads any response: a resource, a list or errors.
			{reflect.TypeFor[restapi.Document](), schema(t, doc, "IngestionDocument"), "Document as IngestionDocument"},
			{reflect.TypeFor[restapi.Document](), schema(t, doc, "IngestionListDocument"), "Document as IngestionListDocument"},
			{reflect.TypeFor[restapi.Document](), schema(t, doc, "ErrorDocument"), "Document as ErrorDocument"},
		} {
			c.match(tc.typ, tc.schema, tc.at)
		}
		c.done()
		if len(c.fields) < 20 {
			t.Fatalf("only %d types walked: %v", len(c.fields), c.where)
		}
	})

	t.Run("enums", func(t *testing.T) {
		counts := param(t, doc, "/api/v1/findings/counts", "group_by")
		for _, tc := range []struct {
			name       string
			restapi    []string
			documented *openapi3.Schema
		}{
			{"ingestion statuses", restapi.IngestionStatuses, schema(t, doc, "IngestionStatus")},
			{"severities", restapi.Severities, schema(t, doc, "Severity")},
			{"error codes", restapi.ErrorCodes, prop(schema(t, doc, "ErrorDocument"), "errors", "[]", "code")},
			{"provider origins", restapi.ProviderOrigins, prop(schema(t, doc, "Provider"), "attributes", "origin")},
			{"scan triggers", restapi.ScanTriggers, prop(schema(t, doc, "Scan"), "attributes", "trigger")},
			{"report sources", restapi.ReportSources, prop(schema(t, doc, "Scan"), "attributes", "source")},
			{"count dimensions", restapi.CountDimensions, counts.Schema.Value.Items.Value},
			{"version", []string{restapi.Version}, prop(schema(t, doc, "Meta"), "version")},
			{"ingestions type", []string{restapi.TypeIngestions}, prop(schema(t, doc, "Ingestion"), "type")},
			{"ingestion-errors type", []string{restapi.TypeIngestionErrors}, prop(schema(t, doc, "IngestionError"), "type")},
			{"findings type", []string{restapi.TypeFindings}, prop(schema(t, doc, "Finding"), "type")},
			{"finding-counts type", []string{restapi.TypeFindingCounts}, prop(schema(t, doc, "FindingCountsDocument"), "data", "[]", "type")},
			{"scans type", []string{restapi.TypeScans}, prop(schema(t, doc, "Scan"), "type")},
			{"providers type", []string{restapi.TypeProviders}, prop(schema(t, doc, "Provider"), "type")},
			{"tokens type", []string{restapi.TypeTokens}, prop(schema(t, doc, "TokenDocument"), "data", "type")},
			{"tokens request type", []string{restapi.TypeTokens}, prop(requestBody(t, doc, "/api/v1/tokens"), "data", "type")},
			{"tokens-refresh type", []string{restapi.TypeTokensRefresh}, prop(requestBody(t, doc, "/api/v1/tokens/refresh"), "data", "type")},
			{"tenants type", []string{restapi.TypeTenants}, prop(schema(t, doc, "TenantDocument"), "data", "type")},
		} {
			if got, want := sorted(tc.restapi), enumOf(tc.documented); !slices.Equal(got, want) {
				t.Errorf("%s: restapi has %v, openapi.yaml %v", tc.name, got, want)
			}
		}
		// Status codes are documented in prose: each is named there.
		desc := prop(schema(t, doc, "Finding"), "attributes", "status_code").Description
		for _, sc := range restapi.StatusCodes {
			if !strings.Contains(desc, sc) {
				t.Errorf("status code %s is not in openapi.yaml's %q", sc, desc)
			}
		}
	})

	t.Run("media type, paths and page limits", func(t *testing.T) {
		if _, ok := doc.Paths.Value("/api/v1/ingestions").Get.Responses.Value("200").Value.Content[restapi.MediaType]; !ok {
			t.Errorf("GET /api/v1/ingestions does not answer %s", restapi.MediaType)
		}
		for _, p := range []string{restapi.PathIngestions, restapi.PathFindings, restapi.PathFindingCounts, restapi.PathScans,
			restapi.PathProviders, restapi.PathTenant, restapi.PathTokens, restapi.PathTokensRefresh, restapi.PathSchema} {
			if doc.Paths.Value(restapi.Prefix+p) == nil {
				t.Errorf("%s%s is not a documented path", restapi.Prefix, p)
			}
		}
		size := doc.Components.Parameters["PageSize"].Value.Schema.Value
		if size.Max == nil || *size.Max != restapi.MaxPageSize || size.Default != float64(restapi.DefaultPageSize) {
			t.Errorf("page[size]: openapi.yaml says max %v default %v; restapi %d and %d", size.Max, size.Default, restapi.MaxPageSize, restapi.DefaultPageSize)
		}
		if d := param(t, doc, "/api/v1/findings", "page[number]").Description; !strings.Contains(d, strconv.Itoa(restapi.MaxPageOffset)) {
			t.Errorf("page[number] of findings: openapi.yaml does not give the depth %d: %q", restapi.MaxPageOffset, d)
		}
	})
}

// strict decodes a body into v, refusing members v has no field for.
func strict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestServerSpeaksClientContract: what the server sends decodes, member for
// member, into restapi's shapes, through restapi's client; it takes every
// value of restapi's enums and refuses others; and its page limits are
// restapi's.
func TestServerSpeaksClientContract(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	a := newAPI(t, env)
	job, status, _ := a.ingest("aws_3_records.ocsf.json", fixture(t, "aws_3_records.ocsf.json"))
	if status != restapi.IngestionCompleted {
		t.Fatalf("setup ingestion %s", status)
	}
	empty := accepted(t, a.upload("empty.ocsf.json", []byte("[]")), 0)
	a.wait(empty)
	prov := &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "aws-123456789012", Namespace: env.Namespace},
		Spec: posturev1.ProviderSpec{Type: "aws", UID: "123456789012", Origin: posturev1.ProviderImported}}
	if err := env.Client.Create(context.Background(), prov); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	api := env.API()
	ctx := context.Background()
	get := func(t *testing.T, path string, q url.Values, v any) {
		t.Helper()
		resp, err := api.Get(ctx, path, q)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != restapi.MediaType {
			t.Fatalf("GET %s: Content-Type %q", path, ct)
		}
		if err := strict(resp.Body, v); err != nil {
			t.Fatalf("GET %s?%s: %v\n%s", path, q.Encode(), err, clip(resp.Body))
		}
	}

	t.Run("documents decode into restapi's shapes", func(t *testing.T) {
		var findings restapi.ListDocument[restapi.Finding]
		get(t, restapi.PathFindings, url.Values{"fields[findings]": {"uid,check_id,title,severity,severity_id,status_code,status,region,provider_type,provider_uid,resource_uid,scan_id,ingestion_id,time,inserted_at,updated_at,record"}}, &findings)
		if len(findings.Data) != 3 || findings.Data[0].Attributes.UID == "" || len(findings.Data[0].Attributes.Record) == 0 ||
			!slices.Contains(restapi.Severities, findings.Data[0].Attributes.Severity) || !slices.Contains(restapi.StatusCodes, findings.Data[0].Attributes.StatusCode) {
			t.Fatalf("findings: %+v", findings.Data)
		}
		for _, tc := range []struct {
			path string
			q    url.Values
			v    any
		}{
			{restapi.PathIngestions, nil, &restapi.ListDocument[restapi.Ingestion]{}},
			{restapi.PathIngestions + "/" + job, nil, &restapi.ResourceDocument[restapi.Ingestion]{}},
			{restapi.PathIngestions + "/" + empty + "/errors", nil, &restapi.ListDocument[restapi.IngestionError]{}},
			{restapi.PathFindings + "/" + findings.Data[0].ID, nil, &restapi.ResourceDocument[restapi.Finding]{}},
			{restapi.PathFindingCounts, url.Values{"group_by": {strings.Join(restapi.CountDimensions, ",")}}, &restapi.ListDocument[restapi.FindingCount]{}},
			{restapi.PathScans, nil, &restapi.ListDocument[restapi.Scan]{}},
			{restapi.PathProviders, nil, &restapi.ListDocument[restapi.Provider]{}},
			{restapi.PathProviders + "/" + prov.Name, nil, &restapi.ResourceDocument[restapi.Provider]{}},
			{restapi.PathTenant, nil, &restapi.ResourceDocument[restapi.Tenant]{}},
		} {
			get(t, tc.path, tc.q, tc.v)
		}
		var counts restapi.ListDocument[restapi.FindingCount]
		get(t, restapi.PathFindingCounts, url.Values{"group_by": {"severity,status_code"}}, &counts)
		total := 0
		for _, g := range counts.Data {
			if g.Type != restapi.TypeFindingCounts || g.Attributes.Value("severity") == "" || g.Attributes.Value("status_code") == "" {
				t.Errorf("count group %+v", g)
			}
			total += g.Attributes.Count
		}
		if counts.Meta.Total == nil || *counts.Meta.Total != 3 || total != 3 {
			t.Errorf("counts total %v, groups sum to %d; want 3", counts.Meta.Total, total)
		}
		resp, err := api.Get(ctx, restapi.PathFindings+"/none-such", nil)
		var fail *restapi.Error
		if !errors.As(err, &fail) || fail.Status != 404 {
			t.Fatalf("GET a missing finding: %v, %v", resp, err)
		}
		var errDoc restapi.ErrorDocument
		if err := strict(fail.Body, &errDoc); err != nil || errDoc.Errors[0].Code != restapi.CodeNotFound {
			t.Fatalf("error document %s: %v", fail.Body, err)
		}
	})

	t.Run("enums", func(t *testing.T) {
		for _, tc := range []struct {
			path, param string
			values      []string
			bogus       string
		}{
			{restapi.PathFindings, "filter[severity]", restapi.Severities, "severe"},
			{restapi.PathFindingCounts + "?group_by=severity", "filter[severity]", restapi.Severities, "severe"},
			{restapi.PathFindings, "filter[status_code]", restapi.StatusCodes, ""},
			{restapi.PathIngestions, "filter[status]", restapi.IngestionStatuses, "done"},
			{restapi.PathProviders, "filter[origin]", restapi.ProviderOrigins, "found"},
			{restapi.PathFindingCounts, "group_by", restapi.CountDimensions, "title"},
		} {
			path, rawq, _ := strings.Cut(tc.path, "?")
			for _, v := range append(slices.Clone(tc.values), tc.bogus) {
				if v == "" {
					continue
				}
				q, _ := url.ParseQuery(rawq)
				q.Set(tc.param, v)
				_, err := api.Get(ctx, path, q)
				switch {
				case v == tc.bogus && restapi.StatusOf(err) != http.StatusBadRequest:
					t.Errorf("GET %s %s=%s: %v; want a 400, it is no value of restapi's", path, tc.param, v, err)
				case v != tc.bogus && err != nil:
					t.Errorf("GET %s %s=%s: %v; restapi has the value", path, tc.param, v, err)
				}
			}
		}
	})

	t.Run("page limits", func(t *testing.T) {
		for _, tc := range []struct {
			q      string
			status int
		}{
			{"page[size]=" + strconv.Itoa(restapi.MaxPageSize), 0},
			{"page[size]=" + strconv.Itoa(restapi.MaxPageSize+1), 400},
			// The deepest page by number is past the last (404); one deeper is refused.
			{"page[size]=1&page[number]=" + strconv.Itoa(restapi.MaxPageOffset+1), 404},
			{"page[size]=1&page[number]=" + strconv.Itoa(restapi.MaxPageOffset+2), 400},
		} {
			q, _ := url.ParseQuery(tc.q)
			_, err := api.Get(ctx, restapi.PathFindings, q)
			if restapi.StatusOf(err) != tc.status || (tc.status == 0 && err != nil) {
				t.Errorf("GET findings?%s: %v; want status %d", tc.q, err, tc.status)
			}
		}
		// More jobs than a default page holds: the first page is full.
		var more []string
		for i := 0; i < restapi.DefaultPageSize; i++ {
			more = append(more, accepted(t, a.upload(fmt.Sprintf("more-%d.ocsf.json", i), []byte("[]")), 0))
		}
		defer func() {
			for _, id := range more {
				a.wait(id)
			}
		}()
		// The list is read from the manager's cache, which learns of the
		// last uploads a moment after they were accepted.
		testenv.Eventually(t, 30*time.Second, "a full default page of ingestions", func() (bool, string) {
			var d restapi.ListDocument[restapi.Ingestion]
			get(t, restapi.PathIngestions, nil, &d)
			state := fmt.Sprintf("%d jobs, pagination %+v; want %d of %d", len(d.Data), *d.Meta.Pagination, restapi.DefaultPageSize, restapi.DefaultPageSize+2)
			return len(d.Data) == restapi.DefaultPageSize && d.Meta.Pagination.Count == restapi.DefaultPageSize+2 && d.Meta.Pagination.NextPage() == 2, state
		})
	})
}
