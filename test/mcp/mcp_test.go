package mcp_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook"
)

var (
	docTools      = []string{"list_docs", "search_docs", "get_doc", "get_ocsf_reference"}
	platformTools = []string{"list_ingestions", "get_ingestion", "list_ingestion_errors", "upload_report", "search_findings",
		"get_finding", "get_findings_overview", "list_providers", "list_scans", "get_tenant_usage", "list_mute_rules", "create_mute_rule", "list_check_ids"}
)

// minimalArgs are arguments that pass each platform tool's input schema.
var minimalArgs = map[string][]string{
	"get_ingestion":         {"id=" + uuid.NewString()},
	"list_ingestion_errors": {"id=" + uuid.NewString()},
	"upload_report":         {"filename=r.ocsf.json", "content=" + jsonString("[]")},
	"get_finding":           {"id=f-1"},
	"create_mute_rule":      {"check_id=x", "reason=r"},
}

func TestToolsOverHTTPWithAPIKey(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	srv := startHTTPServer(t, env.URL+"/api/v1")
	target := httpTarget(srv.URL, "Bearer "+env.APIKey)

	tools := listTools(t, target)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		if tool.InputSchema["type"] != "object" {
			t.Errorf("tool %s input schema type %v, want object", tool.Name, tool.InputSchema["type"])
		}
		if tool.Name == "upload_report" || tool.Name == "create_mute_rule" {
			if tool.Annotations.ReadOnlyHint || tool.Annotations.DestructiveHint == nil || *tool.Annotations.DestructiveHint {
				t.Errorf("%s annotations %+v: want readOnlyHint false and destructiveHint false", tool.Name, tool.Annotations)
			}
			if _, ok := tool.InputSchema["properties"].(map[string]any)["path"]; ok && tool.Name == "upload_report" {
				t.Error("upload_report offers path over HTTP: a remote client must not read the server's files")
			}
		} else if !tool.Annotations.ReadOnlyHint {
			t.Errorf("tool %s lacks readOnlyHint", tool.Name)
		}
	}
	want := append(append([]string{}, docTools...), platformTools...)
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	// Schemas portable to clients with narrower schema dialects: the
	// inspector's strict check finds nothing.
	strict := inspector(t, append(target, "--method", "tools/list", "--strict")...)
	if strict.code != 0 || strings.Contains(strict.stderr, "Warning") || strings.Contains(strict.stderr, "Error:") {
		t.Errorf("tool schemas are not portable:\n%s", strict)
	}

	var list struct {
		Items    []map[string]any `json:"items"`
		Count    int              `json:"count"`
		Page     int              `json:"page"`
		NextPage *int             `json:"next_page"`
	}
	mustSucceed(t, target, "list_ingestions").decode(t, &list)
	if list.Count != 0 || len(list.Items) != 0 || list.Page != 1 || list.NextPage != nil {
		t.Errorf("list_ingestions on an empty tenant: %+v", list)
	}

	var tenant map[string]any
	mustSucceed(t, target, "get_tenant_usage").decode(t, &tenant)
	if tenant["id"] != env.Tenant {
		t.Errorf("get_tenant_usage id %v, want the key's tenant %s", tenant["id"], env.Tenant)
	}
}

func TestDocToolsWorkWithoutCredentialAndPlatformToolsRefuse(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	srv := startHTTPServer(t, env.URL+"/api/v1")
	target := httpTarget(srv.URL, "")

	var docs struct {
		Docs []struct{ Name string } `json:"docs"`
	}
	mustSucceed(t, target, "list_docs").decode(t, &docs)
	if !slices.ContainsFunc(docs.Docs, func(d struct{ Name string }) bool { return d.Name == "mcp" }) {
		t.Errorf("list_docs %+v lacks the mcp page (docs/mcp.md embedded at build)", docs.Docs)
	}

	var search struct {
		Results []struct{ Doc, Heading, Snippet string } `json:"results"`
	}
	mustSucceed(t, target, "search_docs", "query=mcp-remote bridge").decode(t, &search)
	if len(search.Results) == 0 || search.Results[0].Doc != "mcp" {
		t.Errorf("search_docs for the bridge: %+v; want the mcp page first", search.Results)
	}

	// A field's name finds the reference that defines it before the pages
	// of measurements that mention it often.
	mustSucceed(t, target, "search_docs", "query=severity_id").decode(t, &search)
	if len(search.Results) == 0 || search.Results[0].Doc != "api" {
		t.Errorf("search_docs for severity_id: %+v; want the REST API reference first", search.Results)
	}
	for i, r := range search.Results {
		if strings.HasPrefix(r.Doc, "performance") && i < 2 {
			t.Errorf("search_docs for severity_id ranks %s (%s) at %d, ahead of the reference", r.Doc, r.Heading, i+1)
		}
	}

	var page struct {
		Text string `json:"text"`
	}
	mustSucceed(t, target, "get_doc", "name=mcp").decode(t, &page)
	if !strings.Contains(page.Text, "PROWLER_API_KEY") {
		t.Errorf("get_doc mcp does not mention PROWLER_API_KEY:\n%.300s", page.Text)
	}
	mustFail(t, target, "get_doc", []string{`no documentation page "nope"`, "mcp"}, "name=nope")

	var ref struct {
		Fields []struct {
			Field    string `json:"field"`
			Required bool   `json:"required"`
		} `json:"fields"`
	}
	mustSucceed(t, target, "get_ocsf_reference", "field=finding_info.uid").decode(t, &ref)
	if len(ref.Fields) != 1 || ref.Fields[0].Field != "finding_info.uid" || !ref.Fields[0].Required {
		t.Errorf("get_ocsf_reference finding_info.uid: %+v", ref.Fields)
	}

	for _, tool := range platformTools {
		t.Run(tool, func(t *testing.T) {
			r := mustFail(t, target, tool, []string{"needs an API key", "Authorization: Bearer"}, minimalArgs[tool]...)
			if !strings.Contains(string(r.Structured), `"not_authenticated"`) {
				t.Errorf("structured error %s lacks code not_authenticated", r.Structured)
			}
		})
	}
}

func TestBadCredentialIsRefused(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	srv := startHTTPServer(t, env.URL+"/api/v1")

	cases := []struct {
		name, authorization, says string
	}{
		{"unknown API key", "Bearer " + apitest.NewKey(), "invalid API key"},
		{"garbage JWT", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", "authentication failed (HTTP 401)"},
		{"unknown scheme", "Basic dXNlcjpwYXNz", "unsupported Authorization scheme"},
		{"no token", "Bearer", "malformed Authorization header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := postInitialize(t, srv.URL, tc.authorization)
			if status != http.StatusUnauthorized || !strings.Contains(body, tc.says) {
				t.Errorf("initialize with %q: HTTP %d %s; want 401 saying %q", tc.name, status, body, tc.says)
			}
		})
	}
	// The right key passes the same gate.
	if status, body := postInitialize(t, srv.URL, "Bearer "+env.APIKey); status != http.StatusOK {
		t.Errorf("initialize with the right key: HTTP %d %s", status, body)
	}
	// A real client with a bad key gets no tools.
	res := inspector(t, append(httpTarget(srv.URL, "Bearer "+apitest.NewKey()), "--method", "tools/list")...)
	if res.code == 0 || strings.Contains(res.stdout, "list_ingestions") {
		t.Errorf("the inspector listed tools with a bad key:\n%s", res)
	}
}

// A JWT from POST /api/v1/tokens travels as Bearer, an API key as Api-Key:
// the API here accepts each only under its own scheme.
func TestJWTAndKeyForwardedWithTheirSchemes(t *testing.T) {
	a := &keyOrJWT{key: apitest.NewKey(), jwt: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZG1pbkBleGFtcGxlLmNvbSJ9.c2lnbmF0dXJlLW9mLXRlc3Q"}
	env := apitest.Start(t, apitest.Options{Auth: a})
	a.principal = auth.Principal{Tenant: env.Tenant, Namespace: env.Namespace, User: "admin@example.com",
		Permissions: auth.AllPermissions(), Subscribed: true}
	srv := startHTTPServer(t, env.URL+"/api/v1")

	for name, token := range map[string]string{"jwt": a.jwt, "api key": a.key} {
		t.Run(name, func(t *testing.T) {
			target := httpTarget(srv.URL, "Bearer "+token)
			mustSucceed(t, target, "list_ingestions")
			mustSucceed(t, target, "get_tenant_usage")
		})
	}
}

func TestSTDIOServerWithEnvironment(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	fixture := testenv.Fixture("aws_3_records.ocsf.json")
	local := func(vars map[string]string) []string {
		return configTarget(t, map[string]any{"command": serverBin, "args": []string{"--transport", "stdio"}, "env": vars})
	}

	target := local(map[string]string{"PROWLER_API_KEY": env.APIKey, "API_BASE_URL": env.URL + "/api/v1"})
	tools := listTools(t, target)
	var hasPath bool
	for _, tool := range tools {
		if tool.Name == "upload_report" {
			_, hasPath = tool.InputSchema["properties"].(map[string]any)["path"]
		}
	}
	if !hasPath {
		t.Error("the STDIO server's upload_report does not take a local path")
	}
	var ing struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Summary struct{ Total, Processed, Invalid int }
	}
	mustSucceed(t, target, "upload_report", "path="+fixture, "wait_seconds=90").decode(t, &ing)
	if ing.Status != "completed" || ing.Summary.Total != 3 || ing.Summary.Processed != 3 || ing.Summary.Invalid != 0 {
		t.Errorf("upload of %s by path: %+v; want completed 3/3/0", fixture, ing)
	}

	t.Run("no key", func(t *testing.T) {
		target := local(map[string]string{"API_BASE_URL": env.URL + "/api/v1"})
		mustSucceed(t, target, "search_docs", "query=ingestion")
		mustFail(t, target, "list_ingestions", []string{"needs an API key", "PROWLER_API_KEY"})
	})
	t.Run("wrong key", func(t *testing.T) {
		target := local(map[string]string{"PROWLER_API_KEY": apitest.NewKey(), "API_BASE_URL": env.URL + "/api/v1"})
		mustFail(t, target, "list_ingestions", []string{"authentication failed (HTTP 401)", "invalid API key"})
	})
	t.Run("wrong address", func(t *testing.T) {
		target := local(map[string]string{"PROWLER_API_KEY": env.APIKey, "API_BASE_URL": env.URL + "/v2"})
		mustFail(t, target, "list_ingestions", []string{"HTTP 404", "/api/v1"})
	})
}

// The STDIO bridge for clients without HTTP: mcp-remote, installed locally
// at a pinned version, with the header value taken from the environment.
func TestMCPRemoteBridgeWithHeaderFromEnvironment(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	srv := startHTTPServer(t, env.URL+"/api/v1")
	target := configTarget(t, map[string]any{
		"command": nodeBin(t, "mcp-remote"),
		"args":    []string{srv.URL, "--transport", "http-only", "--header", "Authorization: Bearer ${PROWLER_API_KEY}"},
		"env":     map[string]string{"PROWLER_API_KEY": env.APIKey},
	})
	var tenant map[string]any
	mustSucceed(t, target, "get_tenant_usage").decode(t, &tenant)
	if tenant["id"] != env.Tenant {
		t.Errorf("through the bridge: tenant %v, want %s", tenant["id"], env.Tenant)
	}
	mustSucceed(t, target, "list_ingestions")
}

// End to end over HTTP: upload through the MCP upload tool, see the job
// complete, and find its findings through the search tool.
func TestUploadThenFindFindings(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	srv := startHTTPServer(t, env.URL+"/api/v1")
	target := httpTarget(srv.URL, "Bearer "+env.APIKey)
	report, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}

	var ing struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Summary struct{ Total, Processed, Invalid int }
	}
	mustSucceed(t, target, "upload_report", "filename=aws_3_records.ocsf.json", "content="+jsonString(string(report))).decode(t, &ing)
	if ing.ID == "" || ing.Status != "pending" || ing.Summary.Total != 3 {
		t.Fatalf("upload answer %+v; want a pending job of 3 records", ing)
	}
	mustSucceed(t, target, "get_ingestion", "id="+ing.ID, "wait_seconds=90").decode(t, &ing)
	if ing.Status != "completed" || ing.Summary.Processed != 3 || ing.Summary.Invalid != 0 {
		t.Fatalf("ingestion %s: %+v; want completed with 3 processed", ing.ID, ing)
	}

	var found struct {
		Items []map[string]any `json:"items"`
		Count int              `json:"count"`
	}
	mustSucceed(t, target, "search_findings", "ingestion="+ing.ID).decode(t, &found)
	if found.Count != 3 || len(found.Items) != 3 {
		t.Fatalf("search_findings for ingestion %s: count %d, %d items; want 3", ing.ID, found.Count, len(found.Items))
	}
	first := found.Items[0]
	for _, attr := range []string{"id", "check_id", "severity", "status_code", "provider_uid"} {
		if first[attr] == nil || first[attr] == "" {
			t.Errorf("finding item lacks %s: %v", attr, first)
		}
	}
	// A filter narrows: the first finding's check id finds at least it.
	var byCheck struct{ Count int }
	mustSucceed(t, target, "search_findings", "check_id="+first["check_id"].(string), "page_size=1").decode(t, &byCheck)
	if byCheck.Count < 1 || byCheck.Count > 3 {
		t.Errorf("search_findings by check_id %v: count %d", first["check_id"], byCheck.Count)
	}

	var finding map[string]any
	mustSucceed(t, target, "get_finding", "id="+first["id"].(string)).decode(t, &finding)
	record, _ := finding["record"].(map[string]any)
	if record["class_uid"] != float64(2004) {
		t.Errorf("get_finding record class_uid %v, want 2004 (the full OCSF record)", record["class_uid"])
	}

	var overview struct {
		Total      int            `json:"total_findings"`
		BySeverity map[string]int `json:"by_severity"`
		ByStatus   map[string]int `json:"by_status_code"`
	}
	mustSucceed(t, target, "get_findings_overview").decode(t, &overview)
	sum := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	if overview.Total != 3 || sum(overview.BySeverity) != 3 || sum(overview.ByStatus) != 3 {
		t.Errorf("overview %+v; want 3 findings, counted once by severity and once by status", overview)
	}

	var checks struct {
		Checks []struct {
			CheckID  string `json:"check_id"`
			Findings int    `json:"findings"`
		} `json:"checks"`
		Complete bool `json:"complete"`
	}
	mustSucceed(t, target, "list_check_ids").decode(t, &checks)
	total := 0
	for _, c := range checks.Checks {
		total += c.Findings
	}
	if !checks.Complete || total != 3 || !slices.ContainsFunc(checks.Checks, func(c struct {
		CheckID  string `json:"check_id"`
		Findings int    `json:"findings"`
	}) bool {
		return c.CheckID == first["check_id"]
	}) {
		t.Errorf("list_check_ids %+v; want a complete catalogue of 3 findings including %v", checks, first["check_id"])
	}

	var scans struct{ Count int }
	mustSucceed(t, target, "list_scans").decode(t, &scans)
	if scans.Count < 1 {
		t.Errorf("list_scans count %d after an ingestion", scans.Count)
	}
	mustSucceed(t, target, "list_providers")

	// A mute rule through the tools: created (the object; no controller
	// runs here to apply it), then listed by name.
	var rule struct {
		Name  string         `json:"name"`
		Match map[string]any `json:"match"`
	}
	mustSucceed(t, target, "create_mute_rule", "name=accepted", "check_id="+first["check_id"].(string), "reason=accepted by the team").decode(t, &rule)
	if rule.Name != "accepted" || rule.Match["checkId"] != first["check_id"] {
		t.Errorf("create_mute_rule answered %+v", rule)
	}
	var rules struct {
		Items []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"items"`
	}
	mustSucceed(t, target, "list_mute_rules", "name=accepted").decode(t, &rules)
	if len(rules.Items) != 1 || rules.Items[0].Reason != "accepted by the team" {
		t.Errorf("list_mute_rules %+v; want the rule created", rules)
	}
	var errs struct{ Count int }
	mustSucceed(t, target, "list_ingestion_errors", "id="+ing.ID).decode(t, &errs)
	if errs.Count != 0 {
		t.Errorf("a clean report has %d error records", errs.Count)
	}

	// A report whose records name no account fails, and the errors tool says why.
	k8sReport, err := os.ReadFile(testenv.Fixture("example_output_kubernetes.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var failed struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		ErrorsHint string `json:"errors_hint"`
	}
	mustSucceed(t, target, "upload_report", "filename=k8s.ocsf.json", "content="+jsonString(string(k8sReport)), "wait_seconds=90").decode(t, &failed)
	if failed.Status != "failed" || failed.ErrorsHint == "" {
		t.Fatalf("report without accounts: %+v; want failed with a hint to list_ingestion_errors", failed)
	}
	var rejected struct {
		Items []map[string]any `json:"items"`
		Count int              `json:"count"`
	}
	mustSucceed(t, target, "list_ingestion_errors", "id="+failed.ID, "page_size=100").decode(t, &rejected)
	if rejected.Count == 0 || !slices.ContainsFunc(rejected.Items, func(e map[string]any) bool { return e["code"] == "missing_account" }) {
		t.Errorf("errors of the failed job: %+v; want missing_account rows", rejected.Items)
	}

	// Bad input is a tool error naming it, never a crash.
	mustFail(t, target, "upload_report", []string{"must end in .ocsf.json"}, "filename=report.json", "content="+jsonString("[]"))
	mustFail(t, target, "upload_report", []string{"not a valid OCSF report"}, "filename=bad.ocsf.json", "content="+jsonString("{not json"))
}

// API failures arrive as tool errors with the API's detail.
func TestAPIFailuresAreToolErrors(t *testing.T) {
	t.Run("404", func(t *testing.T) {
		env := apitest.Start(t, apitest.Options{})
		srv := startHTTPServer(t, env.URL+"/api/v1")
		id := uuid.NewString()
		r := mustFail(t, httpTarget(srv.URL, "Bearer "+env.APIKey), "get_ingestion", []string{"not found (HTTP 404)", id}, "id="+id)
		var se struct {
			Error struct {
				HTTPStatus int    `json:"http_status"`
				Code       string `json:"code"`
			} `json:"error"`
		}
		r.decode(t, &se)
		if se.Error.HTTPStatus != 404 || se.Error.Code != "not_found" {
			t.Errorf("structured error %s; want http_status 404 and code not_found", r.Structured)
		}
	})
	t.Run("402", func(t *testing.T) {
		env := apitest.Start(t, apitest.Options{Unsubscribed: true})
		srv := startHTTPServer(t, env.URL+"/api/v1")
		mustFail(t, httpTarget(srv.URL, "Bearer "+env.APIKey), "list_ingestions", []string{"subscription required (HTTP 402)", "active subscription"})
	})
	t.Run("403", func(t *testing.T) {
		env := apitest.Start(t, apitest.Options{Permissions: []string{}})
		srv := startHTTPServer(t, env.URL+"/api/v1")
		r := mustFail(t, httpTarget(srv.URL, "Bearer "+env.APIKey), "upload_report", []string{"permission denied (HTTP 403)", "manage_ingestions"},
			"filename=r.ocsf.json", "content="+jsonString("[]"))
		// The API's detail says who must act; the tool's error says it once.
		if n := strings.Count(strings.ToLower(r.text()), "administrator"); n != 1 {
			t.Errorf("the 403 error names the administrator %d times, want once: %q", n, r.text())
		}
		mustFail(t, httpTarget(srv.URL, "Bearer "+env.APIKey), "create_mute_rule", []string{"permission denied (HTTP 403)", "mute_findings"},
			"check_id=s3_*", "reason=accepted")
	})
	t.Run("429", func(t *testing.T) {
		key := apitest.NewKey()
		static := &auth.StaticKey{KeyHash: auth.HashKey(key)}
		// One request, then a long wait: the gate's check uses the request,
		// the tool call meets the limit.
		env := apitest.Start(t, apitest.Options{Auth: staticRef{static},
			Server: func(s *webhook.Server) { s.RateLimit = webhook.NewRateLimiter(0.001, 1) }})
		static.Principal = auth.Principal{Tenant: env.Tenant, Namespace: env.Namespace, User: "admin@example.com", KeyPrefix: "pk_test",
			Permissions: auth.AllPermissions(), Subscribed: true}
		srv := startHTTPServer(t, env.URL+"/api/v1")
		r := mustFail(t, httpTarget(srv.URL, "Bearer "+key), "list_ingestions", []string{"rate limited (HTTP 429)", "retry after"})
		if !strings.Contains(string(r.Structured), `"retry_after"`) {
			t.Errorf("structured error %s lacks retry_after", r.Structured)
		}
	})
}

// staticRef lets a test fill in the principal after apitest.Start has made
// the tenant.
type staticRef struct{ k *auth.StaticKey }

func (s staticRef) Authenticate(r *http.Request) (auth.Principal, error) { return s.k.Authenticate(r) }
