package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook"
)

// api talks to one running API the way any HTTP client would.
type api struct {
	t    testing.TB
	url  string
	auth string
}

func newAPI(t testing.TB, env *apitest.Env) *api {
	return &api{t: t, url: env.URL, auth: env.Authorization()}
}

// response is what came back, with the body decoded when it is JSON.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (a *api) request(method, path string, body io.Reader, header http.Header) response {
	a.t.Helper()
	req, err := http.NewRequest(method, a.url+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Accept", webhook.MediaType)
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// get sends GET path?query; query is given raw ("filter[status]=x&sort=-y")
// so tests say exactly what goes over the wire.
func (a *api) get(path, query string) response {
	a.t.Helper()
	if query != "" {
		path += "?" + query
	}
	return a.request(http.MethodGet, path, nil, nil)
}

// list GETs a list and checks it is a 200 JSON:API list document.
func (a *api) list(path, query string) listDoc {
	a.t.Helper()
	r := a.get(path, query)
	if r.status != http.StatusOK {
		a.t.Fatalf("GET %s?%s: %s", path, query, r)
	}
	var d listDoc
	decode(a.t, r, &d)
	if d.Meta.Version != "v1" || d.Meta.Pagination == nil || d.Links == nil || d.Data == nil {
		a.t.Fatalf("GET %s?%s: not a list document: %s", path, query, r.body)
	}
	return d
}

// one GETs a single resource document.
func (a *api) one(path, query string) resourceDoc {
	a.t.Helper()
	r := a.get(path, query)
	if r.status != http.StatusOK {
		a.t.Fatalf("GET %s?%s: %s", path, query, r)
	}
	var d resourceDoc
	decode(a.t, r, &d)
	if d.Meta.Version != "v1" || d.Data.ID == "" {
		a.t.Fatalf("GET %s?%s: not a resource document: %s", path, query, r.body)
	}
	return d
}

func decode(t testing.TB, r response, v any) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != webhook.MediaType {
		t.Fatalf("Content-Type = %q, want %s (body %s)", ct, webhook.MediaType, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// The documents are the clients' own (restapi): a test that decodes what
// the server sends reads it the way postctl and the MCP server do.
type (
	resourceObj = restapi.Resource[map[string]any]
	resourceDoc = restapi.ResourceDocument[map[string]any]
	errorDoc    = restapi.ErrorDocument
)

type listDoc restapi.ListDocument[map[string]any]

func (d listDoc) ids() []string {
	out := make([]string, len(d.Data))
	for i, r := range d.Data {
		out[i] = r.ID
	}
	return out
}

// wantError checks r is exactly one JSON:API error with the status and code,
// whose source names where ("pointer:/x", "parameter:sort", "header:Accept",
// "" for none, "*" for any), and whose detail contains every fragment.
func wantError(t testing.TB, r response, status int, code, source string, fragments ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %s; want %d %s", r, status, code)
	}
	var d errorDoc
	decode(t, r, &d)
	if len(d.Errors) != 1 || d.Meta.Version != "v1" {
		t.Fatalf("want one error and meta.version v1: %s", r.body)
	}
	e := d.Errors[0]
	if e.Status != strconv.Itoa(status) || e.Code != code || e.Detail == "" {
		t.Fatalf("error = %+v; want status %d code %s", e, status, code)
	}
	got := ""
	if e.Source != nil {
		switch {
		case e.Source.Pointer != "":
			got = "pointer:" + e.Source.Pointer
		case e.Source.Parameter != "":
			got = "parameter:" + e.Source.Parameter
		case e.Source.Header != "":
			got = "header:" + e.Source.Header
		}
	}
	if source != "*" && got != source {
		t.Errorf("source = %q; want %q (%s)", got, source, r.body)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Detail, f) {
			t.Errorf("detail %q does not mention %q", e.Detail, f)
		}
	}
}

// multipartBody builds a multipart/form-data body with the given parts, in
// order; a part with a file name is a file part.
type part struct{ field, filename, content string }

func multipartBody(t testing.TB, parts ...part) (*bytes.Buffer, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.field, p.filename)
		} else {
			w, err = mw.CreateFormField(p.field)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, p.content)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &body, mw.FormDataContentType()
}

// upload sends one file part named "file" with Go's multipart writer.
func (a *api) upload(name string, content []byte) response {
	a.t.Helper()
	body, ct := multipartBody(a.t, part{"file", name, string(content)})
	return a.request(http.MethodPost, "/api/v1/ingestions", body, http.Header{"Content-Type": {ct}})
}

// curlUpload sends the file with curl -F, the way the docs tell people to;
// form is appended to the -F value "file=@<path>" (e.g. ";filename=x.json").
func (a *api) curlUpload(name string, content []byte, form string, extra ...string) response {
	a.t.Helper()
	path := filepath.Join(a.t.TempDir(), name)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		a.t.Fatal(err)
	}
	return a.curl(append([]string{"-F", "file=@" + path + form}, extra...)...)
}

// accepted checks a 202 for a new pending job and returns its id.
func accepted(t testing.TB, r response, total int) string {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("upload: %s", r)
	}
	var d resourceDoc
	decode(t, r, &d)
	a := d.Data.Attributes
	sum, _ := a["summary"].(map[string]any)
	if d.Data.Type != "ingestions" || d.Meta.Version != "v1" || a["status"] != "pending" ||
		sum["total"] != float64(total) || sum["processed"] != 0.0 || sum["invalid"] != 0.0 ||
		a["started_at"] != nil || a["completed_at"] != nil || a["requested_at"] == nil {
		t.Fatalf("202 body = %s; want a pending job with total %d", r.body, total)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/ingestions/"+d.Data.ID {
		t.Errorf("Location = %q", loc)
	}
	return d.Data.ID
}

type summary struct{ total, processed, invalid int }

// wait polls the job until it is completed or failed.
func (a *api) wait(id string) (string, summary) {
	a.t.Helper()
	var attrs map[string]any
	testenv.Eventually(a.t, 90*time.Second, "ingestion "+id+" to end", func() (bool, string) {
		attrs = a.one("/api/v1/ingestions/"+id, "").Data.Attributes
		status, _ := attrs["status"].(string)
		return restapi.Terminal(status), "status " + status
	})
	if attrs["started_at"] == nil || attrs["completed_at"] == nil {
		a.t.Fatalf("finished job without started_at/completed_at: %v", attrs)
	}
	s := attrs["summary"].(map[string]any)
	return attrs["status"].(string), summary{int(s["total"].(float64)), int(s["processed"].(float64)), int(s["invalid"].(float64))}
}

// ingest uploads content and waits for the job's outcome.
func (a *api) ingest(name string, content []byte) (id, status string, s summary) {
	a.t.Helper()
	n := recordCount(a.t, content)
	id = accepted(a.t, a.upload(name, content), n)
	status, s = a.wait(id)
	return id, status, s
}

func recordCount(t testing.TB, content []byte) int {
	t.Helper()
	var recs []json.RawMessage
	if err := json.Unmarshal(content, &recs); err != nil {
		t.Fatalf("test report is not an array: %v", err)
	}
	return len(recs)
}

// errorRow is one ingestion-errors resource.
type errorRow struct {
	RecordIndex *int
	FindingUID  string
	Code        string
	Detail      string
	Pointer     string
	Value       string
}

// allErrors reads every page of the job's errors.
func (a *api) allErrors(id string) []errorRow {
	a.t.Helper()
	var out []errorRow
	for page := 1; ; page++ {
		d := a.list("/api/v1/ingestions/"+id+"/errors", fmt.Sprintf("page[size]=100&page[number]=%d", page))
		for _, r := range d.Data {
			if r.Type != "ingestion-errors" {
				a.t.Fatalf("error row of type %q", r.Type)
			}
			e := errorRow{Code: r.Attributes["code"].(string), Detail: r.Attributes["detail"].(string),
				Pointer: r.Attributes["pointer"].(string), Value: r.Attributes["value"].(string),
				FindingUID: r.Attributes["finding_uid"].(string)}
			if v, ok := r.Attributes["record_index"].(float64); ok {
				i := int(v)
				e.RecordIndex = &i
			} else if r.Attributes["record_index"] != nil {
				a.t.Fatalf("record_index = %v", r.Attributes["record_index"])
			}
			out = append(out, e)
		}
		if d.Links.Next == nil {
			return out
		}
	}
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.Fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bareEnv is the API without controllers: a real API server and store, so
// tests can create Ingestions in exactly the states they need (dates,
// phases) without a controller moving them on.
type bareEnv struct {
	URL       string
	Namespace string
	Tenant    string
	Client    client.Client
	Store     store.Store
	Server    *webhook.Server
	// DBPath is the SQLite file of Store.
	DBPath string
	key    string
}

func (b *bareEnv) api(t testing.TB) *api {
	return &api{t: t, url: b.URL, auth: "Api-Key " + b.key}
}

// bareOpts tunes a bareEnv.
type bareOpts struct {
	maxUpload int64
	// principal adjusts the key's principal (permissions, subscription).
	principal func(*auth.Principal)
	// client replaces the envtest client (FuzzUpload's fake client).
	client client.Client
}

func startBare(t testing.TB, opts bareOpts) *bareEnv {
	t.Helper()
	ctx := context.Background()
	k8s := opts.client
	if k8s == nil {
		var err error
		if k8s, err = client.New(apitest.RESTConfig(), client.Options{Scheme: testenv.Scheme()}); err != nil {
			t.Fatal(err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-", Name: "tenant-fuzz"}}
	if opts.client != nil {
		ns.GenerateName = "" // the fake client does not generate names
	} else {
		ns.Name = ""
	}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(t.TempDir(), "posture.db")
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	key := apitest.NewKey()
	p := auth.Principal{
		Tenant: ns.Name, Namespace: ns.Name, User: "admin@example.com", KeyPrefix: "pk_test",
		Permissions: auth.AllPermissions(), Subscribed: true,
	}
	if opts.principal != nil {
		opts.principal(&p)
	}
	srv := &webhook.Server{
		Client: k8s, APIReader: k8s, Store: st, Log: testLog(t), MaxUploadBytes: opts.maxUpload,
		Auth: auth.StaticKey{KeyHash: auth.HashKey(key), Principal: p},
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		st.Close()
	})
	return &bareEnv{URL: hs.URL, Namespace: ns.Name, Tenant: ns.Name, Client: k8s, Store: st, Server: srv, DBPath: dbPath, key: key}
}

// jobState is what a test wants an Ingestion to look like.
type jobState struct {
	file                          string
	phase                         posturev1.IngestionPhase
	total, processed, invalid     int64
	requested, started, completed *time.Time
}

// createJob creates an Ingestion the way the API and controller would have
// left it in the given state.
func (b *bareEnv) createJob(t testing.TB, id string, s jobState) *posturev1.Ingestion {
	t.Helper()
	ctx := context.Background()
	if s.file == "" {
		s.file = "report.ocsf.json"
	}
	ing := &posturev1.Ingestion{
		ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: b.Namespace, Labels: map[string]string{posturev1.LabelTenant: b.Tenant}},
		Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{Upload: &posturev1.UploadSource{
				BlobID: "00000000-0000-0000-0000-000000000000", Filename: s.file, Size: 2, SHA256: strings.Repeat("0", 64),
			}},
			RecordCount: s.total,
		},
	}
	if err := b.Client.Create(ctx, ing); err != nil {
		t.Fatal(err)
	}
	if s.phase == "" {
		return ing
	}
	mt := func(p *time.Time) *metav1.Time {
		if p == nil {
			return nil
		}
		v := metav1.NewTime(*p)
		return &v
	}
	ing.Status.Phase = s.phase
	ing.Status.Summary = posturev1.IngestionSummary{Total: s.total, Processed: s.processed, Invalid: s.invalid}
	ing.Status.RequestedAt = mt(s.requested)
	if ing.Status.RequestedAt == nil {
		ing.Status.RequestedAt = &ing.CreationTimestamp
	}
	ing.Status.StartedAt = mt(s.started)
	ing.Status.CompletedAt = mt(s.completed)
	if err := b.Client.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	return ing
}

func ptrTime(s string) *time.Time {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &v
}

func queryOf(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func inNamespace(ns string) client.InNamespace { return client.InNamespace(ns) }

// testLog sends the server's log to the test's, so a 500 explains itself.
func testLog(t testing.TB) logr.Logger {
	return logr.New(&tbSink{t: t})
}

type tbSink struct {
	t      testing.TB
	name   string
	values []any
}

func (s *tbSink) Init(logr.RuntimeInfo)  {}
func (s *tbSink) Enabled(level int) bool { return level == 0 }
func (s *tbSink) Info(_ int, msg string, kv ...any) {
	s.t.Logf("%s: %s %v", s.name, msg, append(s.values, kv...))
}
func (s *tbSink) Error(err error, msg string, kv ...any) {
	s.t.Logf("%s: ERROR %s: %v %v", s.name, msg, err, append(s.values, kv...))
}
func (s *tbSink) WithValues(kv ...any) logr.LogSink {
	return &tbSink{t: s.t, name: s.name, values: append(append([]any{}, s.values...), kv...)}
}
func (s *tbSink) WithName(n string) logr.LogSink {
	return &tbSink{t: s.t, name: s.name + "/" + n, values: s.values}
}
