package mcp

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/posture-dev/posture/internal/restapi"
)

// findingAttrs are the listed attributes of a finding (without the record).
var findingAttrs = []string{"uid", "check_id", "title", "severity", "severity_id", "status_code", "status", "region",
	"provider_type", "provider_uid", "resource_uid", "scan_id", "ingestion_id", "time", "inserted_at", "updated_at",
	"first_seen_at", "delta", "muted", "mute"}

// findingPageAttrs are what get_finding adds to findingAttrs: the REST
// API's page attributes in Markdown. Their *_html forms, the sanitized
// HTML a browser inserts, are left out: an agent reads the Markdown.
var findingPageAttrs = []string{"description", "risk", "remediation", "related_urls", "resource", "account"}

// observationsShown is how many of a finding's observations across scans
// get_finding returns, newest first; the count says how many there are.
const observationsShown = 10

// finding reads one finding with its page attributes and its newest
// observations across scans, in two requests.
func (c *caller) finding(ctx context.Context, id string, record bool) (map[string]any, error) {
	fields := append(slices.Clone(findingAttrs), findingPageAttrs...)
	if record {
		fields = append(fields, "record")
	}
	f, err := c.one(ctx, restapi.PathFindings+"/"+id, url.Values{"fields[findings]": {strings.Join(fields, ",")}})
	if err != nil {
		return nil, err
	}
	if rem, ok := f["remediation"].(map[string]any); ok {
		delete(rem, "description_html")
	}
	doc, err := c.s.api.get(ctx, c.authz, restapi.PathFindings+"/"+id+"/observations",
		url.Values{"page[size]": {fmt.Sprint(observationsShown)}})
	if err != nil {
		return nil, fmt.Errorf("read the observations of finding %s across scans: %w", id, err)
	}
	obs, err := listFrom(doc)
	if err != nil {
		return nil, fmt.Errorf("read the observations of finding %s across scans: %w", id, err)
	}
	f["observations"] = obs.Items
	f["observation_count"] = obs.Count
	return f, nil
}

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

// findingsPath is the findings list to read: every scan's findings, or
// (the tools' default) the current state: for each account and check, the
// findings of the newest run of that check.
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
		pq.paging(paging{Page: 1, PageSize: restapi.MaxPageSize})
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
		"scans":                   map[bool]string{false: "current state (each account's newest run of each check)", true: "all"}[history],
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
		"scans":            map[bool]string{false: "current state (each account's newest run of each check)", true: "all"}[history],
		"next":             "search_findings with check_id (and the same history) gives a check's findings, title and resources",
	}
	if partial {
		out["findings_matched_is_lower_bound"] = true
		out["note"] = fmt.Sprintf("the search matches more than %d findings; the checks and counts are those of the first %d matches found, "+
			"so a check may be missing and every count is a lower bound: give provider_type, scan or a longer search text to narrow it", total-1, total)
	}
	return out, nil
}
