package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/restapi"
)

// apiResource is a resource as the tools pass it on: every attribute kept.
type apiResource = restapi.Resource[map[string]any]

// listOutput is every list tool's answer: flattened resources and paging.
type listOutput struct {
	Items    []map[string]any `json:"items"`
	Page     int              `json:"page"`
	Pages    int              `json:"pages"`
	Count    int              `json:"count"`
	NextPage *int             `json:"next_page"`
	// NextCursor continues a findings search past the depth page numbers
	// reach (the API refuses to skip more than 10,000 findings).
	NextCursor string `json:"next_cursor,omitempty"`
}

// flatten turns a JSON:API resource into one flat object: its id and its
// attributes. Agents read that more reliably than the nested form. (The
// API's resources carry no relationships: related ids are attributes.)
func flatten(r apiResource) map[string]any {
	m := make(map[string]any, len(r.Attributes)+1)
	for k, v := range r.Attributes {
		m[k] = v
	}
	m["id"] = r.ID
	return m
}

func listFrom(doc *restapi.Document) (listOutput, error) {
	rs, err := restapi.Resources[map[string]any](doc)
	if err != nil {
		return listOutput{}, err
	}
	out := listOutput{Items: make([]map[string]any, 0, len(rs))}
	for _, r := range rs {
		out.Items = append(out.Items, flatten(r))
	}
	if p := doc.Meta.Pagination; p != nil {
		out.Page, out.Pages, out.Count = p.Page, p.Pages, p.Count
		// A page reached by cursor has no number (0), so no next number.
		if n := p.NextPage(); n > 0 {
			out.NextPage = ptr(n)
		}
	} else {
		out.Page, out.Pages, out.Count = 1, 1, len(rs)
	}
	out.NextCursor = doc.Links.NextCursor()
	return out, nil
}

// findingsPage is search_findings' answer: a list whose count may be a
// lower bound, which an agent must not report as the number of matches.
type findingsPage struct {
	listOutput
	// CountIsLowerBound says count is where the API stopped counting: a
	// text search counts to the end of the next page, an ingestion filter
	// to 10,100 (docs/api.md). At least count findings match.
	CountIsLowerBound bool `json:"count_is_lower_bound"`
}

func (c *caller) findings(ctx context.Context, path string, q url.Values) (findingsPage, error) {
	doc, err := c.s.api.get(ctx, c.authz, path, q)
	if err != nil {
		return findingsPage{}, err
	}
	out, err := listFrom(doc)
	if err != nil {
		return findingsPage{}, err
	}
	return findingsPage{listOutput: out, CountIsLowerBound: doc.Meta.Pagination != nil && doc.Meta.Pagination.CountEstimated}, nil
}

func (c *caller) list(ctx context.Context, path string, q url.Values) (listOutput, error) {
	doc, err := c.s.api.get(ctx, c.authz, path, q)
	if err != nil {
		return listOutput{}, err
	}
	return listFrom(doc)
}

func (c *caller) one(ctx context.Context, path string, q url.Values) (map[string]any, error) {
	doc, err := c.s.api.get(ctx, c.authz, path, q)
	if err != nil {
		return nil, err
	}
	r, err := restapi.One[map[string]any](doc)
	if err != nil {
		return nil, err
	}
	return flatten(r), nil
}

// pathID keeps an id to one path segment: an id with a slash must not
// address another endpoint of the API.
func pathID(kind, id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", fmt.Errorf("%s id is required", kind)
	}
	seg, err := restapi.IDSegment(id)
	if err != nil {
		return "", fmt.Errorf("%s id %q is not an id; use the id that list or search tools return", kind, strings.TrimSpace(id))
	}
	return seg, nil
}

type query url.Values

func (q query) set(key, v string) {
	if v = strings.TrimSpace(v); v != "" {
		url.Values(q).Set(key, v)
	}
}

func (q query) setList(key string, vs []string) {
	var clean []string
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			clean = append(clean, v)
		}
	}
	switch len(clean) {
	case 0:
	case 1:
		url.Values(q).Set("filter["+key+"]", clean[0])
	default:
		url.Values(q).Set("filter["+key+"__in]", strings.Join(clean, ","))
	}
}

func (q query) page(page, size int) {
	if page > 0 {
		url.Values(q).Set("page[number]", strconv.Itoa(page))
	}
	if size > 0 {
		url.Values(q).Set("page[size]", strconv.Itoa(size))
	}
}

func pageProps(p map[string]*jsonschema.Schema) {
	bounded(p["page"], 1, 1e6, 1)
	bounded(p["page_size"], 1, restapi.MaxPageSize, restapi.DefaultPageSize)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Inputs of the platform tools.

type listIngestionsIn struct {
	Status      string   `json:"status,omitempty" jsonschema:"only jobs in this status"`
	Statuses    []string `json:"statuses,omitempty" jsonschema:"only jobs in any of these statuses"`
	Search      string   `json:"search,omitempty" jsonschema:"matches the job id, file name or status"`
	InsertedOn  string   `json:"inserted_on,omitempty" jsonschema:"only jobs submitted on this UTC date, YYYY-MM-DD"`
	CompletedOn string   `json:"completed_on,omitempty" jsonschema:"only jobs finished on this UTC date, YYYY-MM-DD"`
	Sort        string   `json:"sort,omitempty" jsonschema:"comma-separated keys from inserted_at, requested_at, started_at, completed_at; prefix - for descending (default -inserted_at)"`
	Page        int      `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize    int      `json:"page_size,omitempty" jsonschema:"results per page, 1 to 100"`
}

type getIngestionIn struct {
	ID          string `json:"id" jsonschema:"ingestion job id (UUID), as upload_report or list_ingestions returns it"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (at most 120) for the job to finish (completed or failed) before answering"`
}

type listIngestionErrorsIn struct {
	ID       string `json:"id" jsonschema:"ingestion job id (UUID)"`
	Page     int    `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize int    `json:"page_size,omitempty" jsonschema:"results per page, 1 to 100"`
}

type uploadReportIn struct {
	Filename    string `json:"filename,omitempty" jsonschema:"file name of the report; must end in .ocsf.json (default: the base name of path)"`
	Content     string `json:"content,omitempty" jsonschema:"the report itself: a JSON array of OCSF Detection Finding records"`
	Path        string `json:"path,omitempty" jsonschema:"path of a report file on this machine (local STDIO server only)"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (at most 120) for the ingestion to finish before answering"`
}

type searchFindingsIn struct {
	Severity      []string `json:"severity,omitempty" jsonschema:"only these severities"`
	StatusCode    []string `json:"status_code,omitempty" jsonschema:"only these check results, e.g. FAIL"`
	ProviderType  []string `json:"provider_type,omitempty" jsonschema:"only these provider types, e.g. aws, azure, gcp, kubernetes"`
	ProviderUID   string   `json:"provider_uid,omitempty" jsonschema:"only this account (cloud account id)"`
	CheckID       string   `json:"check_id,omitempty" jsonschema:"only this check (metadata.event_code), see list_check_ids"`
	Region        string   `json:"region,omitempty" jsonschema:"only this region"`
	Scan          string   `json:"scan,omitempty" jsonschema:"only this scan id"`
	Ingestion     string   `json:"ingestion,omitempty" jsonschema:"only findings written by this ingestion job"`
	Search        string   `json:"search,omitempty" jsonschema:"substring of the finding uid, title, check id or resource uid"`
	Sort          string   `json:"sort,omitempty" jsonschema:"comma-separated keys from time, severity_id, inserted_at, check_id, uid; prefix - for descending (default -inserted_at)"`
	IncludeRecord bool     `json:"include_record,omitempty" jsonschema:"also return each finding's full OCSF record (large)"`
	Page          int      `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize      int      `json:"page_size,omitempty" jsonschema:"results per page, 1 to 100"`
	Cursor        string   `json:"cursor,omitempty" jsonschema:"next_cursor of the previous answer, to continue with the same filters and sort; page is then ignored"`
	History       bool     `json:"history,omitempty" jsonschema:"search every scan ever ingested, not only each account's latest scan (the default; a scan or ingestion filter searches every scan too)"`
}

type getFindingIn struct {
	ID            string `json:"id" jsonschema:"finding id, as search_findings returns it"`
	IncludeRecord *bool  `json:"include_record,omitempty" jsonschema:"return the full OCSF record too (default true)"`
}

type overviewIn struct {
	ProviderType string `json:"provider_type,omitempty" jsonschema:"restrict to one provider type, e.g. aws"`
	ProviderUID  string `json:"provider_uid,omitempty" jsonschema:"restrict to one account"`
	Scan         string `json:"scan,omitempty" jsonschema:"restrict to one scan id"`
	Region       string `json:"region,omitempty" jsonschema:"restrict to one region"`
	CheckID      string `json:"check_id,omitempty" jsonschema:"restrict to one check"`
	History      bool   `json:"history,omitempty" jsonschema:"count every scan ever ingested, not only each account's latest scan (the default; a scan filter counts every scan too)"`
}

type listProvidersIn struct {
	Type     string `json:"type,omitempty" jsonschema:"only this provider type, e.g. aws"`
	Origin   string `json:"origin,omitempty" jsonschema:"connected (declared by people or GitOps) or imported (created by an ingestion)"`
	Search   string `json:"search,omitempty" jsonschema:"matches the name, account id, alias or type"`
	Sort     string `json:"sort,omitempty" jsonschema:"comma-separated keys from inserted_at, type, uid, alias; prefix - for descending"`
	Page     int    `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize int    `json:"page_size,omitempty" jsonschema:"results per page, 1 to 100"`
}

type listScansIn struct {
	ProviderType string `json:"provider_type,omitempty" jsonschema:"only scans of this provider type"`
	ProviderUID  string `json:"provider_uid,omitempty" jsonschema:"only scans of this account"`
	Page         int    `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize     int    `json:"page_size,omitempty" jsonschema:"results per page, 1 to 100"`
}

type tenantUsageIn struct{}

type listCheckIDsIn struct {
	ProviderType string `json:"provider_type,omitempty" jsonschema:"only checks seen for this provider type"`
	Scan         string `json:"scan,omitempty" jsonschema:"only checks seen in this scan"`
	Search       string `json:"search,omitempty" jsonschema:"substring of the check id, title, finding uid or resource uid"`
	History      bool   `json:"history,omitempty" jsonschema:"count every scan ever ingested, not only each account's latest scan (the default; a scan filter counts every scan too)"`
}

func (s *Server) registerPlatformTools() {
	addTool(s, &mcpsdk.Tool{
		Name:        "list_ingestions",
		Title:       "List ingestion jobs",
		Description: "Lists the tenant's ingestion jobs (uploads of OCSF reports) with status and record counts, newest first. Needs an API key with Manage Ingestions.",
		InputSchema: inputSchema[listIngestionsIn](func(p map[string]*jsonschema.Schema) {
			enum(p["status"], restapi.IngestionStatuses...)
			enum(p["statuses"].Items, restapi.IngestionStatuses...)
			p["inserted_on"].Pattern = `^\d{4}-\d{2}-\d{2}$`
			p["completed_on"].Pattern = `^\d{4}-\d{2}-\d{2}$`
			pageProps(p)
		}),
	}, true, func(ctx context.Context, c *caller, in listIngestionsIn) (any, error) {
		q := query{}
		q.set("filter[status]", in.Status)
		if len(in.Statuses) > 0 {
			q.set("filter[status__in]", strings.Join(in.Statuses, ","))
		}
		q.set("filter[search]", in.Search)
		q.set("filter[inserted_at]", in.InsertedOn)
		q.set("filter[completed_at]", in.CompletedOn)
		q.set("sort", in.Sort)
		q.page(in.Page, in.PageSize)
		return c.list(ctx, "/ingestions", url.Values(q))
	})

	addTool(s, &mcpsdk.Tool{
		Name:  "get_ingestion",
		Title: "Get an ingestion job",
		Description: "Reads one ingestion job: status (pending, processing, completed, failed), summary (total, processed, invalid) and timestamps. " +
			"With wait_seconds it waits for the job to finish. A failed job or invalid records are explained by list_ingestion_errors.",
		InputSchema: inputSchema[getIngestionIn](func(p map[string]*jsonschema.Schema) {
			bounded(p["wait_seconds"], 0, 120, 0)
		}),
	}, true, func(ctx context.Context, c *caller, in getIngestionIn) (any, error) {
		id, err := pathID("ingestion", in.ID)
		if err != nil {
			return nil, err
		}
		return c.waitIngestion(ctx, id, in.WaitSeconds)
	})

	addTool(s, &mcpsdk.Tool{
		Name:  "list_ingestion_errors",
		Title: "List why records were rejected",
		Description: "Lists the error records of one ingestion job: for each rejected record its index, finding uid, error code " +
			"(missing_field, invalid_type, invalid_value, unsupported_class, missing_account, duplicate_uid, provider_limit_exceeded, scan_account_conflict, …), " +
			"detail, JSON pointer and offending value; ingestion-level errors (record_index null) come first.",
		InputSchema: inputSchema[listIngestionErrorsIn](pageProps),
	}, true, func(ctx context.Context, c *caller, in listIngestionErrorsIn) (any, error) {
		id, err := pathID("ingestion", in.ID)
		if err != nil {
			return nil, err
		}
		q := query{}
		q.page(in.Page, in.PageSize)
		return c.list(ctx, "/ingestions/"+id+"/errors", url.Values(q))
	})

	uploadDesc := "Uploads an OCSF Detection Finding report (a JSON array of records, file name ending in .ocsf.json) and starts an ingestion job; " +
		"answers with the job (status pending), or with wait_seconds the job once finished. Pass the report as content"
	if s.cfg.LocalFiles {
		uploadDesc += ", or as path to a file on this machine"
	}
	uploadDesc += ". Needs an API key with Manage Ingestions and a tenant with a subscription."
	addTool(s, &mcpsdk.Tool{
		Name:        "upload_report",
		Title:       "Upload an OCSF report",
		Description: uploadDesc,
		InputSchema: inputSchema[uploadReportIn](func(p map[string]*jsonschema.Schema) {
			bounded(p["wait_seconds"], 0, 120, 0)
			if !s.cfg.LocalFiles {
				delete(p, "path")
			}
		}),
		// Uploading adds a job and findings; it changes nothing that exists
		// (re-uploads upsert), so it is not destructive, but not read-only.
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: false, OpenWorldHint: ptr(false)},
	}, true, s.uploadReport)

	addTool(s, &mcpsdk.Tool{
		Name:  "search_findings",
		Title: "Search findings",
		Description: "Searches the tenant's findings (one per check result on a resource) by severity, check result, provider, account, check id, " +
			"region, scan, ingestion or text (at least 3 characters), newest first: by default the current state, the findings of each account's " +
			"latest scan; history=true searches every scan. Each item has id, uid, check_id, title, severity, status_code, region, provider_type, " +
			"provider_uid, resource_uid, scan_id and time; get_finding returns the full OCSF record. count is exact unless count_is_lower_bound " +
			"is true: a text search counts only to the end of the next page (at least count match; list_check_ids with the same search " +
			"and history counts up to 1,000 of them exactly).",
		InputSchema: inputSchema[searchFindingsIn](func(p map[string]*jsonschema.Schema) {
			enum(p["severity"].Items, restapi.Severities...)
			pageProps(p)
		}),
	}, true, func(ctx context.Context, c *caller, in searchFindingsIn) (any, error) {
		q := query{}
		q.setList("severity", lower(in.Severity))
		q.setList("status_code", upper(in.StatusCode))
		q.setList("provider_type", lower(in.ProviderType))
		q.set("filter[provider_uid]", in.ProviderUID)
		q.set("filter[check_id]", in.CheckID)
		q.set("filter[region]", in.Region)
		q.set("filter[scan]", in.Scan)
		q.set("filter[ingestion]", in.Ingestion)
		q.set("filter[search]", in.Search)
		q.set("sort", in.Sort)
		if in.IncludeRecord {
			url.Values(q).Set("fields[findings]", strings.Join(append([]string{"record"}, findingAttrs...), ","))
		}
		if in.Cursor != "" {
			// page has a default, so it cannot tell a caller's choice; the
			// cursor is the more specific ask.
			url.Values(q).Set("page[cursor]", in.Cursor)
			in.Page = 0
		}
		q.page(in.Page, in.PageSize)
		return c.findings(ctx, findingsPath(in.History || in.Scan != "" || in.Ingestion != ""), url.Values(q))
	})

	addTool(s, &mcpsdk.Tool{
		Name:        "get_finding",
		Title:       "Get a finding",
		Description: "Reads one finding with its full OCSF record (description, remediation, resources, compliance notes).",
		InputSchema: inputSchema[getFindingIn](nil),
	}, true, func(ctx context.Context, c *caller, in getFindingIn) (any, error) {
		id, err := pathID("finding", in.ID)
		if err != nil {
			return nil, err
		}
		q := query{}
		if in.IncludeRecord != nil && !*in.IncludeRecord {
			url.Values(q).Set("fields[findings]", strings.Join(findingAttrs, ","))
		}
		return c.one(ctx, restapi.PathFindings+"/"+id, url.Values(q))
	})

	addTool(s, &mcpsdk.Tool{
		Name:  "get_findings_overview",
		Title: "Findings overview",
		Description: "Counts the tenant's findings by severity, by check result (status_code) and by provider account, and the failing " +
			"findings by severity: the posture at a glance, by default of the current state (each account's latest scan; history=true counts " +
			"every scan). Optional filters narrow every count.",
		InputSchema: inputSchema[overviewIn](nil),
	}, true, func(ctx context.Context, c *caller, in overviewIn) (any, error) {
		return c.overview(ctx, in)
	})

	addTool(s, &mcpsdk.Tool{
		Name:        "list_providers",
		Title:       "List providers",
		Description: "Lists the tenant's providers: the cloud accounts it is billed for (type, account uid, alias, origin connected or imported).",
		InputSchema: inputSchema[listProvidersIn](func(p map[string]*jsonschema.Schema) {
			enum(p["origin"], "connected", "imported")
			pageProps(p)
		}),
	}, true, func(ctx context.Context, c *caller, in listProvidersIn) (any, error) {
		q := query{}
		q.set("filter[type]", strings.ToLower(in.Type))
		q.set("filter[origin]", in.Origin)
		q.set("filter[search]", in.Search)
		q.set("sort", in.Sort)
		q.page(in.Page, in.PageSize)
		return c.list(ctx, "/providers", url.Values(q))
	})

	addTool(s, &mcpsdk.Tool{
		Name:        "list_scans",
		Title:       "List scans",
		Description: "Lists the scanner runs the tenant's findings came from (provider, account, finding count, the ingestion that wrote them), newest first.",
		InputSchema: inputSchema[listScansIn](pageProps),
	}, true, func(ctx context.Context, c *caller, in listScansIn) (any, error) {
		q := query{}
		q.set("filter[provider_type]", strings.ToLower(in.ProviderType))
		q.set("filter[provider_uid]", in.ProviderUID)
		q.page(in.Page, in.PageSize)
		return c.list(ctx, "/scans", url.Values(q))
	})

	addTool(s, &mcpsdk.Tool{
		Name:        "get_tenant_usage",
		Title:       "Tenant subscription and usage",
		Description: "Reads the caller's tenant: subscription (active, plan), the number of billed providers and the plan's provider limit.",
		InputSchema: inputSchema[tenantUsageIn](nil),
	}, true, func(ctx context.Context, c *caller, _ tenantUsageIn) (any, error) {
		return c.one(ctx, "/tenant", nil)
	})

	addTool(s, &mcpsdk.Tool{
		Name:  "list_check_ids",
		Title: "Catalogue of checks seen",
		Description: "Lists the check ids (metadata.event_code) of the tenant's findings, with severity and how many findings " +
			"and failing findings each has: by default of the current state (each account's latest scan, as search_findings and " +
			"get_findings_overview count), history=true over every scan ever ingested. Counted over all matching findings; with a search " +
			"that matches more than 1,000 findings, over the first 1,001 found (complete is then false). search_findings with check_id " +
			"(and the same history) gives a check's title and findings.",
		InputSchema: inputSchema[listCheckIDsIn](nil),
	}, true, func(ctx context.Context, c *caller, in listCheckIDsIn) (any, error) {
		return c.checkCatalogue(ctx, in)
	})
}

// findingAttrs are the listed attributes of a finding (without the record).
var findingAttrs = []string{"uid", "check_id", "title", "severity", "severity_id", "status_code", "status", "region",
	"provider_type", "provider_uid", "resource_uid", "scan_id", "ingestion_id", "time", "inserted_at", "updated_at"}

func lower(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.ToLower(v)
	}
	return out
}

func upper(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.ToUpper(v)
	}
	return out
}

// waitIngestion reads a job, polling until it is terminal or wait runs out.
func (c *caller) waitIngestion(ctx context.Context, id string, waitSeconds int) (map[string]any, error) {
	deadline := time.Now().Add(time.Duration(min(max(waitSeconds, 0), 120)) * time.Second)
	for {
		ing, err := c.one(ctx, "/ingestions/"+id, nil)
		if err != nil {
			return nil, err
		}
		status, _ := ing["status"].(string)
		terminal := restapi.Terminal(status)
		if terminal || !time.Now().Before(deadline) {
			if !terminal && waitSeconds > 0 {
				ing["note"] = fmt.Sprintf("still %s after waiting %d s; call get_ingestion again", status, waitSeconds)
			}
			if status == restapi.IngestionFailed || hasInvalid(ing) {
				ing["errors_hint"] = "list_ingestion_errors with this id explains the rejected records"
			}
			return ing, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func hasInvalid(ing map[string]any) bool {
	sum, _ := ing["summary"].(map[string]any)
	n, _ := sum["invalid"].(float64)
	return n > 0
}

func (s *Server) uploadReport(ctx context.Context, c *caller, in uploadReportIn) (any, error) {
	var body io.Reader
	name := strings.TrimSpace(in.Filename)
	switch {
	case in.Content != "" && in.Path != "":
		return nil, fmt.Errorf("give either content or path, not both")
	case in.Path != "":
		if !s.cfg.LocalFiles {
			return nil, fmt.Errorf("path is only accepted by a local STDIO server; over HTTP pass the report as content")
		}
		f, err := os.Open(in.Path)
		if err != nil {
			return nil, fmt.Errorf("cannot read the report: %v", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, fmt.Errorf("%s is a directory; give the path of a .ocsf.json file", in.Path)
		}
		body = f
		if name == "" {
			name = filepath.Base(in.Path)
		}
	case in.Content != "":
		if name == "" {
			return nil, fmt.Errorf("filename is required with content; it must end in .ocsf.json, e.g. report.ocsf.json")
		}
		body = strings.NewReader(in.Content)
	default:
		if s.cfg.LocalFiles {
			return nil, fmt.Errorf("give the report as content (its JSON text) or path (a file on this machine)")
		}
		return nil, fmt.Errorf("give the report as content: the JSON text of a .ocsf.json file")
	}
	// The API decides what it accepts (name, format, size) and says why not;
	// checking the suffix here too only saves a round trip with a clear word.
	if !strings.HasSuffix(name, ".ocsf.json") {
		return nil, fmt.Errorf("file name %q must end in .ocsf.json", name)
	}
	doc, err := s.api.upload(ctx, c.authz, name, body)
	if err != nil {
		return nil, err
	}
	r, err := restapi.One[map[string]any](doc)
	if err != nil {
		return nil, err
	}
	if in.WaitSeconds > 0 {
		return c.waitIngestion(ctx, url.PathEscape(r.ID), in.WaitSeconds)
	}
	ing := flatten(r)
	ing["next"] = "call get_ingestion with this id (wait_seconds to wait) until status is completed or failed"
	return ing, nil
}

// findingsPath is the findings list to read: every scan's findings, or
// (the tools' default) the current state, each account's latest scan's.
// A scan or an ingestion names a point in history, so a tool given one
// reads history.
func findingsPath(history bool) string {
	if history {
		return restapi.PathFindings
	}
	return restapi.PathLatestFindings
}

// findingCounts asks the API for the findings of the list at path (see
// findingsPath) matching q, grouped by the dimensions by, in one request;
// each group is its values, in by's order, and its count. lowerBounds is
// the API's meta.count_estimated: a search's counts stop at the first 1,001
// matches, and each count is then a lower bound.
func (c *caller) findingCounts(ctx context.Context, path string, q url.Values, by ...string) (groups []findingGroup, lowerBounds bool, err error) {
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	q2.Set("group_by", strings.Join(by, ","))
	doc, err := c.s.api.get(ctx, c.authz, path+"/counts", q2)
	if err != nil {
		return nil, false, err
	}
	rs, err := restapi.Resources[restapi.FindingCount](doc)
	if err != nil {
		return nil, false, err
	}
	out := make([]findingGroup, 0, len(rs))
	for _, r := range rs {
		// Every group counts at least one finding: 0 is a missing count.
		if r.Attributes.Count < 1 {
			return nil, false, fmt.Errorf("the API's finding counts carry no count in group %q", r.ID)
		}
		g := findingGroup{values: map[string]string{}, count: r.Attributes.Count}
		for _, d := range by {
			g.values[d] = r.Attributes.Value(d)
		}
		out = append(out, g)
	}
	return out, doc.Meta.CountEstimated, nil
}

type findingGroup struct {
	values map[string]string
	count  int
}

type providerCount struct {
	ProviderType string `json:"provider_type"`
	ProviderUID  string `json:"provider_uid"`
	Alias        string `json:"alias,omitempty"`
	Findings     int    `json:"findings"`
	Failing      int    `json:"failing"`
}

// overviewProviderLimit bounds the accounts listed, most findings first.
const overviewProviderLimit = 50

// overview is built from one grouped count (every number in it) and, for
// the aliases, one page of providers: two API requests whatever the size
// of the tenant, where it once took one count per number.
func (c *caller) overview(ctx context.Context, in overviewIn) (any, error) {
	base := query{}
	base.set("filter[provider_type]", strings.ToLower(in.ProviderType))
	base.set("filter[provider_uid]", in.ProviderUID)
	base.set("filter[scan]", in.Scan)
	base.set("filter[region]", in.Region)
	base.set("filter[check_id]", in.CheckID)

	history := in.History || in.Scan != ""
	// No search: every count comes from the finding summary or a scan's
	// findings, exact.
	groups, _, err := c.findingCounts(ctx, findingsPath(history), url.Values(base), "severity", "status_code", "provider_type", "provider_uid")
	if err != nil {
		return nil, err
	}
	total := 0
	sevMap := map[string]int{}
	failMap := map[string]int{}
	statusMap := map[string]int{}
	for _, sc := range restapi.StatusCodes {
		statusMap[sc] = 0
	}
	type account struct{ typ, uid string }
	byAccount := map[account]*providerCount{}
	var providers []*providerCount
	for _, g := range groups {
		total += g.count
		sev, sc := g.values["severity"], g.values["status_code"]
		sevMap[sev] += g.count
		if slices.Contains(restapi.StatusCodes, sc) {
			statusMap[sc] += g.count
		} else {
			statusMap["other"] += g.count
		}
		key := account{g.values["provider_type"], g.values["provider_uid"]}
		p := byAccount[key]
		if p == nil {
			p = &providerCount{ProviderType: key.typ, ProviderUID: key.uid}
			byAccount[key] = p
			providers = append(providers, p)
		}
		p.Findings += g.count
		if sc == "FAIL" {
			failMap[sev] += g.count
			p.Failing += g.count
		}
	}

	providersTotal := 0
	if in.ProviderUID == "" {
		pq := query{}
		pq.set("filter[type]", strings.ToLower(in.ProviderType))
		pq.page(1, restapi.MaxPageSize)
		pl, err := c.list(ctx, "/providers", url.Values(pq))
		if err != nil {
			return nil, err
		}
		providersTotal = pl.Count
		for _, item := range pl.Items {
			t, _ := item["type"].(string)
			u, _ := item["uid"].(string)
			a, _ := item["alias"].(string)
			if p := byAccount[account{t, u}]; p != nil {
				p.Alias = a
			}
		}
	}
	slices.SortStableFunc(providers, func(a, b *providerCount) int {
		if a.Findings != b.Findings {
			return b.Findings - a.Findings
		}
		return strings.Compare(a.ProviderType+"/"+a.ProviderUID, b.ProviderType+"/"+b.ProviderUID)
	})
	listed := make([]providerCount, 0, min(len(providers), overviewProviderLimit))
	for _, p := range providers[:min(len(providers), overviewProviderLimit)] {
		listed = append(listed, *p)
	}
	out := map[string]any{
		"total_findings":          total,
		"by_severity":             sevMap,
		"by_status_code":          statusMap,
		"failing_by_severity":     failMap,
		"by_provider":             listed,
		"filters":                 url.Values(base),
		"scans":                   map[bool]string{false: "latest of each account", true: "all"}[history],
		"providers_with_findings": len(providers),
		"providers_in_tenant":     providersTotal,
		"providers_listed_limit":  overviewProviderLimit,
	}
	if in.ProviderUID != "" {
		delete(out, "providers_in_tenant")
		delete(out, "providers_listed_limit")
	}
	return out, nil
}

type checkEntry struct {
	CheckID  string `json:"check_id"`
	Severity string `json:"severity,omitempty"`
	Findings int    `json:"findings"`
	Failing  int    `json:"failing"`
}

// checkCatalogue is one grouped count: every check of the matching
// findings with its findings and failing findings, whatever their number.
func (c *caller) checkCatalogue(ctx context.Context, in listCheckIDsIn) (any, error) {
	q := query{}
	q.set("filter[provider_type]", strings.ToLower(in.ProviderType))
	q.set("filter[scan]", in.Scan)
	q.set("filter[search]", in.Search)
	history := in.History || in.Scan != ""
	groups, partial, err := c.findingCounts(ctx, findingsPath(history), url.Values(q), "check_id", "severity", "status_code")
	if err != nil {
		return nil, err
	}
	var (
		checks = []checkEntry{}
		index  = map[string]int{}
		total  int
	)
	// Groups come ordered by check id, then severity: the first severity
	// seen is the lowest label in byte order, so the most frequent one is
	// tracked instead, which is the check's own for a consistent scanner.
	sevCount := map[string]map[string]int{}
	for _, g := range groups {
		id := g.values["check_id"]
		if id == "" {
			id = "(none)"
		}
		i, ok := index[id]
		if !ok {
			i = len(checks)
			index[id] = i
			checks = append(checks, checkEntry{CheckID: id})
			sevCount[id] = map[string]int{}
		}
		checks[i].Findings += g.count
		if g.values["status_code"] == "FAIL" {
			checks[i].Failing += g.count
		}
		sev := g.values["severity"]
		sevCount[id][sev] += g.count
		if best := checks[i].Severity; best == "" || sevCount[id][sev] > sevCount[id][best] {
			checks[i].Severity = sev
		}
		total += g.count
	}
	out := map[string]any{
		"checks":           checks,
		"distinct_checks":  len(checks),
		"findings_matched": total,
		"complete":         !partial,
		"scans":            map[bool]string{false: "latest of each account", true: "all"}[history],
		"next":             "search_findings with check_id (and the same history) gives a check's findings, title and resources",
	}
	if partial {
		out["findings_matched_is_lower_bound"] = true
		out["note"] = fmt.Sprintf("the search matches more than %d findings; the checks and counts are those of the first %d matches found, "+
			"so a check may be missing and every count is a lower bound: give provider_type, scan or a longer search text to narrow it", total-1, total)
	}
	return out, nil
}
