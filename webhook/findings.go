package webhook

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
)

// Read endpoints (findings, scans, providers) need an authenticated member of
// a subscribed tenant and no further permission: every role may look at its
// tenant's posture, while changing it (ingesting) needs manage_ingestions.
// There are no provider groups that would limit what a member sees, so
// unlimited_visibility changes nothing here (see docs/api.md).
func (s *Server) authorizeRead(r *http.Request) (auth.Principal, error) {
	return s.authorize(r, "")
}

// findingListAttrs are the attributes of a listed finding; record (the full
// OCSF record) is only sent when fields[findings] asks for it, because it is
// two orders of magnitude larger than the rest.
var findingListAttrs = []string{"uid", "check_id", "title", "severity", "severity_id", "status_code", "status",
	"region", "provider_type", "provider_uid", "resource_uid", "scan_id", "ingestion_id", "time",
	"inserted_at", "updated_at", "first_seen_at", "delta", "muted", "mute"}

// findingPageAttrs are what a finding's page shows beyond the listed
// attributes, read from the record (findings.DetailOf). GET
// /findings/{id} sends them by default; a listing only when
// fields[findings] names them.
var findingPageAttrs = []string{"description", "description_html", "risk", "risk_html", "remediation", "related_urls",
	"resource", "account"}

var findingFields = set(append(append([]string{"record"}, findingListAttrs...), findingPageAttrs...)...)

// observationAttrs are the attributes of a finding's observations across
// scans (GET /findings/{id}/observations): each is the finding of one scan.
var observationAttrs = []string{"scan_id", "ingestion_id", "status_code", "status", "severity", "severity_id", "time", "inserted_at"}

// currentOnly are the attributes only a finding of the current state
// carries (/findings/latest): when its uid was first seen for its account,
// and what changed since the run its check's run replaced.
var currentOnly = set("first_seen_at", "delta")

// deltas are filter[delta]'s values.
var deltas = set("new", "changed", "resolved")

var findingList = listSpec{
	resourceType: "findings",
	filters: set("severity", "severity__in", "status_code", "status_code__in", "provider_type", "provider_type__in",
		"provider_uid", "check_id", "region", "scan", "ingestion", "search", "muted"),
	sortKeys:    set("time", "severity_id", "inserted_at", "check_id", "uid"),
	defaultSort: []string{"-inserted_at"},
	fields:      findingFields,
	cursor:      true,
}

// latestFindingList is findingList with filter[delta], which only the
// current state has.
var latestFindingList = func() listSpec {
	l := findingList
	l.filters = set(append(slices.Collect(maps.Keys(findingList.filters)), "delta")...)
	return l
}()

// Severities are OCSF's severity labels, what the store keeps (lower-case).
var severities = set(findings.Severities...)

func (s *Server) findingRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/findings", s.methods(map[string]handlerFunc{http.MethodGet: s.listFindings}))
	mux.Handle("/api/v1/findings/counts", s.methods(map[string]handlerFunc{http.MethodGet: s.countFindings}))
	mux.Handle("/api/v1/findings/latest", s.methods(map[string]handlerFunc{http.MethodGet: s.listLatestFindings}))
	mux.Handle("/api/v1/findings/latest/counts", s.methods(map[string]handlerFunc{http.MethodGet: s.countLatestFindings}))
	mux.Handle("/api/v1/findings/{id}", s.methods(map[string]handlerFunc{http.MethodGet: s.getFinding}))
	s.exportRoutes(mux)
	mux.Handle("/api/v1/findings/{id}/observations", s.methods(map[string]handlerFunc{http.MethodGet: s.listObservations}))
}

func (s *Server) listFindings(w http.ResponseWriter, r *http.Request) error {
	return s.listFindingsOf(w, r, false)
}

// listLatestFindings is the current state: for each account and check,
// the findings of the newest run of that check (store.FindingQuery.Latest),
// with the same parameters and answer, plus filter[delta] and each
// finding's first_seen_at and delta.
func (s *Server) listLatestFindings(w http.ResponseWriter, r *http.Request) error {
	return s.listFindingsOf(w, r, true)
}

func (s *Server) listFindingsOf(w http.ResponseWriter, r *http.Request, latest bool) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	spec := findingList
	if latest {
		spec = latestFindingList
	}
	q, aerr := parseList(r, spec)
	if aerr != nil {
		return aerr
	}
	fq, aerr := findingQuery(q)
	if aerr != nil {
		return aerr
	}
	fq.Latest = latest
	if aerr := mutedQuery(&fq, q, latest); aerr != nil {
		return aerr
	}
	fq.CountLimit = CountLimit
	if fq.Search != "" {
		fq.CountLimit = searchCountLimit(q)
	}
	binding := cursorBinding(q)
	var (
		rows  []store.Finding
		count int
		more  bool
	)
	if latest {
		// A position in the latest findings means nothing in the whole
		// history, nor the other way round.
		binding = "latest:" + binding
	}
	if q.cursor != "" {
		k, aerr := decodeCursor(q.cursor, binding)
		if aerr != nil {
			return aerr
		}
		var page findings.Page
		page, err = findings.ReadAfter(r.Context(), s.Store, p.Tenant, fq, &k, q.size)
		rows, count, more = page.Rows, page.Count, page.Next != nil
	} else if offset := (q.page - 1) * q.size; offset > restapi.MaxPageOffset {
		return errorf(400, CodeInvalid, "page[number]=%d with page[size]=%d skips %d findings; at most %d can be skipped: "+
			"follow links.next, which carries page[cursor], to read further", q.page, q.size, offset, restapi.MaxPageOffset).parameter("page[number]")
	} else {
		rows, count, err = s.Store.ListFindings(r.Context(), p.Tenant, fq)
	}
	if errors.Is(err, store.ErrInvalidArgument) {
		return errorf(400, CodeInvalid, "%v", err).parameter("sort")
	}
	if err != nil {
		return err
	}
	var (
		pg    pagination
		links *listLink
	)
	if q.cursor != "" {
		pg = pagination{Pages: max(1, (count+q.size-1)/q.size), Count: count}
		links = &listLink{First: pageLink(r, 1)}
	} else {
		pg, links, aerr = pageOf(r, q, count)
		if aerr != nil {
			return aerr
		}
		more = q.page < pg.Pages
	}
	// A count the summaries cannot give stops past fq.CountLimit: it is
	// then a lower bound, and pages counts the pages known to exist.
	pg.CountEstimated = !fq.Summarized() && !fq.ScanSummarized() && count > fq.CountLimit
	// page[number] stops at the depth limit; a link must never lead there,
	// nor to a last page that is only the last one counted.
	if pg.CountEstimated || (pg.Pages-1)*q.size > restapi.MaxPageOffset {
		links.Last = nil
	} else if links.Last == nil {
		l := pageLink(r, pg.Pages)
		links.Last = &l
	}
	links.Next = nil
	if more && len(rows) > 0 {
		next := cursorLink(r, encodeCursor(store.KeyOf(&rows[len(rows)-1]), binding))
		links.Next = &next
	}
	fields := q.fields
	if fields == nil {
		fields = set(findingListAttrs...)
	}
	data := make([]resource, 0, len(rows))
	for i := range rows {
		data = append(data, findingResource(r, &rows[i], fields))
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
}

// searchCountLimit is where a listing with filter[search] stops counting:
// the end of the page after the requested one. A common word matches a
// large share of the tenant, and counting it up to CountLimit read
// 356,000 rows in a sequential scan at 10M findings (1.8 s cold) for a
// number nobody pages through. This bound still tells whether the next
// page exists (so links.next and a pager's "next" work) and costs what
// two pages do. A page reached by cursor has no number: it counts from the
// first page.
func searchCountLimit(q listQuery) int {
	return (q.page-1)*q.size + 2*q.size
}

// findingQuery turns checked list parameters into the store's query.
func findingQuery(q listQuery) (store.FindingQuery, *apiError) {
	fq := store.FindingQuery{
		ProviderUID: q.filters["provider_uid"],
		CheckID:     q.filters["check_id"],
		Region:      q.filters["region"],
		ScanID:      q.filters["scan"],
		IngestionID: q.filters["ingestion"],
		Search:      q.filters["search"],
		Sort:        q.sort,
		Page:        store.Page{Number: q.page, Size: q.size},
	}
	var aerr *apiError
	if fq.Severity, aerr = oneOrMany(q.filters, "severity", func(v string) *apiError {
		if !severities[strings.ToLower(v)] {
			return errorf(400, CodeInvalid, "unknown severity %q; one of %s", v, joinKeys(severities))
		}
		return nil
	}); aerr != nil {
		return fq, aerr
	}
	if fq.StatusCode, aerr = oneOrMany(q.filters, "status_code", nil); aerr != nil {
		return fq, aerr
	}
	if fq.ProviderType, aerr = oneOrMany(q.filters, "provider_type", nil); aerr != nil {
		return fq, aerr
	}
	if d, ok := q.filters["delta"]; ok {
		if !deltas[d] {
			return fq, errorf(400, CodeInvalid, "unknown filter[delta] %q; one of %s", d, joinKeys(deltas)).parameter("filter[delta]")
		}
		fq.Delta = d
	}
	for _, key := range []string{"provider_uid", "check_id", "region", "scan", "ingestion", "search"} {
		if v, ok := q.filters[key]; ok && v == "" {
			return fq, errorf(400, CodeInvalid, "filter[%s] must not be empty", key).parameter("filter[" + key + "]")
		}
	}
	// A trigram index finds a text of three characters or more; a shorter
	// one could only be answered by reading every finding.
	if n := utf8.RuneCountInString(fq.Search); fq.Search != "" && n < store.MinSearchLength {
		return fq, errorf(400, CodeInvalid, "filter[search] %q is %d character(s) long; a search needs at least %d characters",
			fq.Search, n, store.MinSearchLength).parameter("filter[search]")
	}
	return fq, nil
}

// oneOrMany reads filter[key] (one value) or filter[key__in] (a comma list);
// giving both is ambiguous and refused rather than silently combined.
func oneOrMany(f map[string]string, key string, check func(string) *apiError) ([]string, *apiError) {
	one, hasOne := f[key]
	many, hasMany := f[key+"__in"]
	if hasOne && hasMany {
		return nil, errorf(400, CodeInvalid, "use either filter[%s] or filter[%s__in], not both", key, key).parameter("filter[" + key + "__in]")
	}
	var vals []string
	param := "filter[" + key + "]"
	switch {
	case hasOne:
		vals = []string{strings.TrimSpace(one)}
	case hasMany:
		param = "filter[" + key + "__in]"
		for _, v := range strings.Split(many, ",") {
			vals = append(vals, strings.TrimSpace(v))
		}
	default:
		return nil, nil
	}
	for _, v := range vals {
		if v == "" {
			return nil, errorf(400, CodeInvalid, "%s must not be empty or hold empty items", param).parameter(param)
		}
		if check != nil {
			if e := check(v); e != nil {
				return nil, e.parameter(param)
			}
		}
	}
	return vals, nil
}

func (s *Server) getFinding(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	for name := range r.URL.Query() {
		if name != "fields[findings]" {
			return errorf(400, CodeInvalid, "unknown query parameter %q", name).parameter(name)
		}
	}
	q, aerr := parseList(r, listSpec{resourceType: "findings", fields: findingFields})
	if aerr != nil {
		return aerr
	}
	id := r.PathValue("id")
	f, err := s.Store.GetFinding(r.Context(), p.Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(404, CodeNotFound, "no finding %q in this tenant", id).parameter("id")
	}
	if err != nil {
		return err
	}
	fields := q.fields
	if fields == nil {
		fields = findingFields
	}
	writeJSON(w, http.StatusOK, document{Data: findingResource(r, &f, fields), Meta: meta{Version: APIVersion}})
	return nil
}

func findingResource(r *http.Request, f *store.Finding, fields map[string]bool) resource {
	all := map[string]any{
		"uid":           f.UID,
		"check_id":      f.CheckID,
		"title":         f.Title,
		"severity":      f.Severity,
		"severity_id":   f.SeverityID,
		"status_code":   f.StatusCode,
		"status":        f.Status,
		"region":        f.Region,
		"provider_type": f.ProviderType,
		"provider_uid":  f.ProviderUID,
		"resource_uid":  f.ResourceUID,
		"scan_id":       f.ScanID,
		"ingestion_id":  f.IngestionID,
		"time":          f.Time.UTC().Format(time.RFC3339Nano),
		"inserted_at":   f.InsertedAt.UTC().Format(time.RFC3339Nano),
		"updated_at":    f.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if f.FirstSeenAt != nil {
		all["first_seen_at"] = f.FirstSeenAt.UTC().Format(time.RFC3339Nano)
	}
	if f.Delta != "" {
		all["delta"] = f.Delta
	}
	muteAttrs(all, f)
	attrs := make(map[string]any, len(fields))
	var detail *findings.Detail
	for k := range fields {
		if k == "record" {
			attrs[k] = rawRecord(f.Raw)
			continue
		}
		if slices.Contains(findingPageAttrs, k) {
			if detail == nil {
				// As with rawRecord: a stored record that is not a JSON
				// object leaves the page's fields empty rather than
				// breaking the page.
				d, _ := findings.DetailOf(f)
				detail = &d
			}
			attrs[k] = detailAttr(detail, k)
			continue
		}
		if _, ok := all[k]; !ok && currentOnly[k] {
			// A finding of the history has neither; one of the current
			// state without a delta has none.
			continue
		}
		attrs[k] = all[k]
	}
	return resource{Type: "findings", ID: f.ID, Attributes: attrs,
		Links: map[string]any{"self": absoluteURL(r, mustURL("/api/v1/findings/"+f.ID))}}
}

// detailAttr is attribute k of findingPageAttrs.
func detailAttr(d *findings.Detail, k string) any {
	switch k {
	case "description":
		return d.Description
	case "description_html":
		return d.DescriptionHTML
	case "risk":
		return d.Risk
	case "risk_html":
		return d.RiskHTML
	case "remediation":
		return d.Remediation
	case "related_urls":
		return d.RelatedURLs
	case "resource":
		return d.Resource
	case "account":
		return d.Account
	}
	panic("unknown finding page attribute " + k)
}

// listObservations is a finding's history: its findings of every scan
// that reported its uid for its account, newest first, one page of them.
// Each is a finding of its own (its id reads it); the attributes are what
// changes from one scan to the next.
func (s *Server) listObservations(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	q, aerr := parseList(r, listSpec{resourceType: "findings", fields: set(observationAttrs...)})
	if aerr != nil {
		return aerr
	}
	id := r.PathValue("id")
	f, err := s.Store.GetFinding(r.Context(), p.Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(404, CodeNotFound, "no finding %q in this tenant", id).parameter("id")
	}
	if err != nil {
		return err
	}
	if offset := (q.page - 1) * q.size; offset > restapi.MaxPageOffset {
		return errorf(400, CodeInvalid, "page[number]=%d with page[size]=%d skips %d observations; at most %d can be skipped",
			q.page, q.size, offset, restapi.MaxPageOffset).parameter("page[number]")
	}
	rows, count, err := s.Store.FindingObservations(r.Context(), p.Tenant, store.ObservationQuery{UID: f.UID,
		ProviderType: f.ProviderType, ProviderUID: f.ProviderUID, Page: store.Page{Number: q.page, Size: q.size}})
	if err != nil {
		return err
	}
	pg, links, aerr := pageOf(r, q, count)
	if aerr != nil {
		return aerr
	}
	fields := q.fields
	if fields == nil {
		fields = set(observationAttrs...)
	}
	data := make([]resource, 0, len(rows))
	for _, o := range rows {
		all := map[string]any{
			"scan_id":      o.ScanID,
			"ingestion_id": o.IngestionID,
			"status_code":  o.StatusCode,
			"status":       o.Status,
			"severity":     o.Severity,
			"severity_id":  o.SeverityID,
			"time":         o.Time.UTC().Format(time.RFC3339Nano),
			"inserted_at":  o.InsertedAt.UTC().Format(time.RFC3339Nano),
		}
		attrs := make(map[string]any, len(fields))
		for k := range fields {
			attrs[k] = all[k]
		}
		data = append(data, resource{Type: "findings", ID: o.ID, Attributes: attrs,
			Links: map[string]any{"self": absoluteURL(r, mustURL("/api/v1/findings/"+o.ID))}})
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
}

// rawRecord passes the stored record through as JSON. Records were checked
// at ingestion; should a stored one ever not parse, the response must still
// be valid JSON, so it is sent as null rather than breaking the page.
func rawRecord(raw []byte) any {
	if len(raw) == 0 || !json.Valid(raw) {
		return nil
	}
	return json.RawMessage(raw)
}
