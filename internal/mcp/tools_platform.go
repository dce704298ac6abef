package mcp

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/restapi"
)

// Inputs of the platform tools.

type listIngestionsIn struct {
	Status      string   `json:"status,omitempty" jsonschema:"only jobs in this status"`
	Statuses    []string `json:"statuses,omitempty" jsonschema:"only jobs in any of these statuses"`
	Search      string   `json:"search,omitempty" jsonschema:"matches the job id, file name or status"`
	InsertedOn  string   `json:"inserted_on,omitempty" jsonschema:"only jobs submitted on this UTC date, YYYY-MM-DD"`
	CompletedOn string   `json:"completed_on,omitempty" jsonschema:"only jobs finished on this UTC date, YYYY-MM-DD"`
	Sort        string   `json:"sort,omitempty" jsonschema:"comma-separated keys from inserted_at, requested_at, started_at, completed_at; prefix - for descending (default -inserted_at)"`
	paging
}

type getIngestionIn struct {
	ID          string `json:"id" jsonschema:"ingestion job id (UUID), as upload_report or list_ingestions returns it"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (at most 120) for the job to finish (completed or failed) before answering"`
}

type listIngestionErrorsIn struct {
	ID string `json:"id" jsonschema:"ingestion job id (UUID)"`
	paging
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
	paging
	Cursor  string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous answer, to continue with the same filters and sort; page is then ignored"`
	History bool   `json:"history,omitempty" jsonschema:"search every scan ever ingested, not only the current state (the default: for each account and check, the newest run's findings; a scan or ingestion filter searches every scan too)"`
	Muted   string `json:"muted,omitempty" jsonschema:"findings a mute rule marks: false leaves them out (the default in the current state), true keeps only them, any lists both (the default in history)"`
	Delta   string `json:"delta,omitempty" jsonschema:"current state only: new (uid never seen for the account before) or changed (status differs from the check's previous run); resolved lists instead the findings that failed in the check's previous run and now pass or are gone"`
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
	History      bool   `json:"history,omitempty" jsonschema:"count every scan ever ingested, not only the current state (the default: for each account and check, the newest run's findings; a scan filter counts every scan too)"`
}

type listProvidersIn struct {
	Type   string `json:"type,omitempty" jsonschema:"only this provider type, e.g. aws"`
	Origin string `json:"origin,omitempty" jsonschema:"connected (declared by people or GitOps) or imported (created by an ingestion)"`
	Search string `json:"search,omitempty" jsonschema:"matches the name, account id, alias or type"`
	Sort   string `json:"sort,omitempty" jsonschema:"comma-separated keys from inserted_at, type, uid, alias; prefix - for descending"`
	paging
}

type listScansIn struct {
	ProviderType string `json:"provider_type,omitempty" jsonschema:"only scans of this provider type"`
	ProviderUID  string `json:"provider_uid,omitempty" jsonschema:"only scans of this account"`
	paging
}

type tenantUsageIn struct{}

type listCheckIDsIn struct {
	ProviderType string `json:"provider_type,omitempty" jsonschema:"only checks seen for this provider type"`
	Scan         string `json:"scan,omitempty" jsonschema:"only checks seen in this scan"`
	Search       string `json:"search,omitempty" jsonschema:"substring of the check id, title, finding uid or resource uid"`
	History      bool   `json:"history,omitempty" jsonschema:"count every scan ever ingested, not only the current state (the default: for each account and check, the newest run's findings; a scan filter counts every scan too)"`
}

type listMuteRulesIn struct {
	Name string `json:"name,omitempty" jsonschema:"only the rule of this name"`
	Sort string `json:"sort,omitempty" jsonschema:"name or -name (default name)"`
	paging
}

type createMuteRuleIn struct {
	CheckID      string   `json:"check_id,omitempty" jsonschema:"the check (metadata.event_code), exact or a glob"`
	Account      string   `json:"account,omitempty" jsonschema:"the provider account uid (provider_uid of a finding), exact or a glob"`
	Region       string   `json:"region,omitempty" jsonschema:"the region, exact or a glob"`
	ResourceUID  string   `json:"resource_uid,omitempty" jsonschema:"the resource uid (an ARN, a resource id), exact or a glob"`
	ResourceName string   `json:"resource_name,omitempty" jsonschema:"the resource name, exact or a glob"`
	Severity     []string `json:"severity,omitempty" jsonschema:"only findings of these severities"`
	StatusCode   []string `json:"status_code,omitempty" jsonschema:"only findings of these check results, e.g. FAIL"`
	Reason       string   `json:"reason" jsonschema:"why these findings are accepted; every door shows it beside the mark"`
	ExpiresAt    string   `json:"expires_at,omitempty" jsonschema:"when the rule stops muting, RFC 3339 (e.g. 2030-01-01T00:00:00Z); never when absent"`
	Name         string   `json:"name,omitempty" jsonschema:"the rule's name (a Kubernetes name: lower-case letters, digits, -); generated (mute-…) when absent"`
}

// A platformTool is one row of the platform tools' table: it registers
// itself on the server.
type platformTool interface{ register(s *Server) }

// listTool is the family most platform tools belong to: it reads one page
// of a list of the API, where request turns its input into that list's
// path and query.
type listTool[In any] struct {
	name, title, description string
	schema                   func(props map[string]*jsonschema.Schema)
	request                  func(in In) (path string, q query, err error)
}

func (t listTool[In]) register(s *Server) {
	addTool(s, &mcpsdk.Tool{Name: t.name, Title: t.title, Description: t.description, InputSchema: inputSchema[In](t.schema)}, true,
		func(ctx context.Context, c *caller, in In) (any, error) {
			path, q, err := t.request(in)
			if err != nil {
				return nil, err
			}
			return c.list(ctx, path, url.Values(q))
		})
}

// readTool is a tool whose answer is more than one list page: one
// resource, a wait, an upload, counts.
type readTool[In any] struct {
	tool *mcpsdk.Tool
	run  toolFunc[In]
}

func (t readTool[In]) register(s *Server) { addTool(s, t.tool, true, t.run) }

// dateProps asks for UTC dates (YYYY-MM-DD) in the named properties.
func dateProps(p map[string]*jsonschema.Schema, names ...string) {
	for _, n := range names {
		p[n].Pattern = `^\d{4}-\d{2}-\d{2}$`
	}
}

func (s *Server) registerPlatformTools() {
	for _, t := range s.platformTools() {
		t.register(s)
	}
}

// platformTools are the tools of the platform itself, in the order a
// client lists them; every one needs an API key or a JWT.
func (s *Server) platformTools() []platformTool {
	return []platformTool{
		listTool[listIngestionsIn]{
			name:        "list_ingestions",
			title:       "List ingestion jobs",
			description: "Lists the tenant's ingestion jobs (uploads of OCSF reports) with status and record counts, newest first. Needs an API key with Manage Ingestions.",
			schema: func(p map[string]*jsonschema.Schema) {
				enum(p["status"], restapi.IngestionStatuses...)
				enum(p["statuses"].Items, restapi.IngestionStatuses...)
				dateProps(p, "inserted_on", "completed_on")
				pageProps(p)
			},
			request: func(in listIngestionsIn) (string, query, error) {
				q := query{}
				q.set("filter[status]", in.Status)
				if len(in.Statuses) > 0 {
					q.set("filter[status__in]", strings.Join(in.Statuses, ","))
				}
				q.set("filter[search]", in.Search)
				q.set("filter[inserted_at]", in.InsertedOn)
				q.set("filter[completed_at]", in.CompletedOn)
				q.set("sort", in.Sort)
				q.paging(in.paging)
				return restapi.PathIngestions, q, nil
			},
		},
		readTool[getIngestionIn]{
			tool: &mcpsdk.Tool{
				Name:  "get_ingestion",
				Title: "Get an ingestion job",
				Description: "Reads one ingestion job: status (pending, processing, completed, failed), summary (total, processed, invalid) and timestamps. " +
					"With wait_seconds it waits for the job to finish. A failed job or invalid records are explained by list_ingestion_errors.",
				InputSchema: inputSchema[getIngestionIn](func(p map[string]*jsonschema.Schema) {
					bounded(p["wait_seconds"], 0, 120, 0)
				}),
			},
			run: func(ctx context.Context, c *caller, in getIngestionIn) (any, error) {
				id, err := pathID("ingestion", in.ID)
				if err != nil {
					return nil, err
				}
				return c.waitIngestion(ctx, id, in.WaitSeconds)
			},
		},
		listTool[listIngestionErrorsIn]{
			name:  "list_ingestion_errors",
			title: "List why records were rejected",
			description: "Lists the error records of one ingestion job: for each rejected record its index, finding uid, error code " +
				"(missing_field, invalid_type, invalid_value, unsupported_class, missing_account, duplicate_uid, provider_limit_exceeded, scan_account_conflict, …), " +
				"detail, JSON pointer and offending value; ingestion-level errors (record_index null) come first.",
			schema: pageProps,
			request: func(in listIngestionErrorsIn) (string, query, error) {
				id, err := pathID("ingestion", in.ID)
				if err != nil {
					return "", nil, err
				}
				q := query{}
				q.paging(in.paging)
				return restapi.PathIngestions + "/" + id + "/errors", q, nil
			},
		},
		readTool[uploadReportIn]{tool: s.uploadTool(), run: s.uploadReport},
		readTool[searchFindingsIn]{
			tool: &mcpsdk.Tool{
				Name:  "search_findings",
				Title: "Search findings",
				Description: "Searches the tenant's findings (one per check result on a resource) by severity, check result, provider, account, check id, " +
					"region, scan, ingestion, text (at least 3 characters) or delta, newest first: by default the current state (for each account and " +
					"check, the findings of the newest scan that ran the check); history=true searches every scan. Each item has id, uid, check_id, " +
					"title, severity, status_code, region, provider_type, provider_uid, resource_uid, scan_id and time, and in the current state " +
					"first_seen_at and delta (new or changed, when one holds), and muted with mute {rule, reason} when a mute rule accepts the finding (muted findings are left out of the current state unless muted=true or any); delta=resolved lists the findings a check's newest run resolved. get_finding returns the full OCSF record. count is exact unless count_is_lower_bound " +
					"is true: a text search counts only to the end of the next page (at least count match; list_check_ids with the same search " +
					"and history counts up to 1,000 of them exactly).",
				InputSchema: inputSchema[searchFindingsIn](func(p map[string]*jsonschema.Schema) {
					enum(p["severity"].Items, restapi.Severities...)
					enum(p["delta"], "new", "changed", "resolved")
					enum(p["muted"], "true", "false", "any")
					pageProps(p)
				}),
			},
			run: func(ctx context.Context, c *caller, in searchFindingsIn) (any, error) {
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
				q.set("filter[muted]", in.Muted)
				history := in.History || in.Scan != "" || in.Ingestion != ""
				if in.Delta != "" {
					if history {
						return nil, fmt.Errorf("delta describes the current state; it cannot be combined with history, scan or ingestion")
					}
					q.set("filter[delta]", in.Delta)
				}
				if in.IncludeRecord {
					url.Values(q).Set("fields[findings]", strings.Join(append([]string{"record"}, findingAttrs...), ","))
				}
				if in.Cursor != "" {
					// page has a default, so it cannot tell a caller's choice; the
					// cursor is the more specific ask.
					url.Values(q).Set("page[cursor]", in.Cursor)
					in.Page = 0
				}
				q.paging(in.paging)
				return c.findings(ctx, findingsPath(history), url.Values(q))
			},
		},
		readTool[getFindingIn]{
			tool: &mcpsdk.Tool{
				Name:  "get_finding",
				Title: "Get a finding",
				Description: "Reads one finding as its page in the web UI shows it: title, severity, status, check, account; description, risk " +
					"and remediation (Markdown) with its references; related URLs; the resource (name, type, region, partition, labels, uid); " +
					"the same finding's observations across scans (newest first: time, status, scan; the first " + fmt.Sprint(observationsShown) +
					", with their count); and, unless include_record is false, the full OCSF record (compliance notes and the rest).",
				InputSchema: inputSchema[getFindingIn](nil),
			},
			run: func(ctx context.Context, c *caller, in getFindingIn) (any, error) {
				id, err := pathID("finding", in.ID)
				if err != nil {
					return nil, err
				}
				return c.finding(ctx, id, in.IncludeRecord == nil || *in.IncludeRecord)
			},
		},
		readTool[overviewIn]{
			tool: &mcpsdk.Tool{
				Name:  "get_findings_overview",
				Title: "Findings overview",
				Description: "Counts the tenant's findings by severity, by check result (status_code) and by provider account, and the failing " +
					"findings by severity: the posture at a glance, by default of the current state (each account's newest run of each check; history=true counts " +
					"every scan). Optional filters narrow every count.",
				InputSchema: inputSchema[overviewIn](nil),
			},
			run: func(ctx context.Context, c *caller, in overviewIn) (any, error) { return c.overview(ctx, in) },
		},
		listTool[listProvidersIn]{
			name:        "list_providers",
			title:       "List providers",
			description: "Lists the tenant's providers: the cloud accounts it is billed for (type, account uid, alias, origin connected or imported).",
			schema: func(p map[string]*jsonschema.Schema) {
				enum(p["origin"], restapi.ProviderOrigins...)
				pageProps(p)
			},
			request: func(in listProvidersIn) (string, query, error) {
				q := query{}
				q.set("filter[type]", strings.ToLower(in.Type))
				q.set("filter[origin]", in.Origin)
				q.set("filter[search]", in.Search)
				q.set("sort", in.Sort)
				q.paging(in.paging)
				return restapi.PathProviders, q, nil
			},
		},
		listTool[listScansIn]{
			name:        "list_scans",
			title:       "List scans",
			description: "Lists the scanner runs the tenant's findings came from (when each ran, provider, account, finding count, failing findings by severity, the report's file name and uploader, the ingestion that wrote them), newest first.",
			schema:      pageProps,
			request: func(in listScansIn) (string, query, error) {
				q := query{}
				q.set("filter[provider_type]", strings.ToLower(in.ProviderType))
				q.set("filter[provider_uid]", in.ProviderUID)
				q.paging(in.paging)
				return restapi.PathScans, q, nil
			},
		},
		readTool[tenantUsageIn]{
			tool: &mcpsdk.Tool{
				Name:        "get_tenant_usage",
				Title:       "Tenant subscription and usage",
				Description: "Reads the caller's tenant: subscription (active, plan), the number of billed providers and the plan's provider limit.",
				InputSchema: inputSchema[tenantUsageIn](nil),
			},
			run: func(ctx context.Context, c *caller, _ tenantUsageIn) (any, error) {
				return c.one(ctx, restapi.PathTenant, nil)
			},
		},
		listTool[listMuteRulesIn]{
			name:  "list_mute_rules",
			title: "List mute rules",
			description: "Lists the tenant's mute rules (MuteRule objects), by name: each rule's match, reason, expires_at, matched_findings " +
				"(the stored findings it mutes), ready (its marks are written on every stored finding) and message. A finding a rule matches " +
				"shows muted with mute {rule, reason} in search_findings and is left out of the current state unless muted=true or any.",
			schema: func(p map[string]*jsonschema.Schema) {
				enum(p["sort"], "name", "-name")
				pageProps(p)
			},
			request: func(in listMuteRulesIn) (string, query, error) {
				q := query{}
				q.set("filter[name]", in.Name)
				q.set("sort", in.Sort)
				q.paging(in.paging)
				return restapi.PathMuteRules, q, nil
			},
		},
		readTool[createMuteRuleIn]{
			tool: &mcpsdk.Tool{
				Name:  "create_mute_rule",
				Title: "Mute findings",
				Description: "Creates a mute rule: the tenant's findings that match every field given (at least one) are muted, kept and listed " +
					"in the history with the rule's reason, and left out of the current state, its counts and get_findings_overview. " +
					"check_id, account, region, resource_uid and resource_name take an exact value or a glob (* any run of characters, " +
					"? one, [abc] one of a set); severity and status_code are lists, any of which matches. reason is required. " +
					"The operator then marks the stored findings in the background: list_mute_rules shows ready and matched_findings. " +
					"Ask the user before muting: it hides findings. Needs an API key whose user has the mute_findings permission.",
				InputSchema: inputSchema[createMuteRuleIn](func(p map[string]*jsonschema.Schema) {
					enum(p["severity"].Items, restapi.Severities...)
					p["reason"].MinLength = ptr(1)
					p["reason"].MaxLength = ptr(1024)
				}),
				// A rule hides findings but deletes nothing, and the API
				// refuses a second rule of the same name.
				Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: false, OpenWorldHint: ptr(false)},
			},
			run: func(ctx context.Context, c *caller, in createMuteRuleIn) (any, error) {
				return c.createMuteRule(ctx, in)
			},
		},
		readTool[listCheckIDsIn]{
			tool: &mcpsdk.Tool{
				Name:  "list_check_ids",
				Title: "Catalogue of checks seen",
				Description: "Lists the check ids (metadata.event_code) of the tenant's findings, with severity and how many findings " +
					"and failing findings each has: by default of the current state (each account's newest run of each check, as search_findings and " +
					"get_findings_overview count), history=true over every scan ever ingested. Counted over all matching findings; with a search " +
					"that matches more than 1,000 findings, over the first 1,001 found (complete is then false). search_findings with check_id " +
					"(and the same history) gives a check's title and findings.",
				InputSchema: inputSchema[listCheckIDsIn](nil),
			},
			run: func(ctx context.Context, c *caller, in listCheckIDsIn) (any, error) { return c.checkCatalogue(ctx, in) },
		},
	}
}

// uploadTool describes upload_report, whose path input only a local STDIO
// server takes.
func (s *Server) uploadTool() *mcpsdk.Tool {
	desc := "Uploads an OCSF Detection Finding report (a JSON array of records, file name ending in .ocsf.json) and starts an ingestion job; " +
		"answers with the job (status pending), or with wait_seconds the job once finished. Pass the report as content"
	if s.cfg.LocalFiles {
		desc += ", or as path to a file on this machine"
	}
	desc += ". Needs an API key with Manage Ingestions and a tenant with a subscription."
	return &mcpsdk.Tool{
		Name:        "upload_report",
		Title:       "Upload an OCSF report",
		Description: desc,
		InputSchema: inputSchema[uploadReportIn](func(p map[string]*jsonschema.Schema) {
			bounded(p["wait_seconds"], 0, 120, 0)
			if !s.cfg.LocalFiles {
				delete(p, "path")
			}
		}),
		// Uploading adds a job and findings; it changes nothing that exists
		// (re-uploads upsert), so it is not destructive, but not read-only.
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: false, OpenWorldHint: ptr(false)},
	}
}
