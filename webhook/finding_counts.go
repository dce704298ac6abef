package webhook

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/posture-dev/posture/internal/store"
)

// countFindings answers grouped counts of the tenant's findings in one
// request: what an overview needs, without a page of findings per number.
// It takes the findings list's filters; there is nothing to sort or page
// (the groups are few: they are combinations of low-cardinality columns).
func (s *Server) countFindings(w http.ResponseWriter, r *http.Request) error {
	return s.countFindingsOf(w, r, false)
}

// countLatestFindings counts the current state (for each account and
// check, the findings of the newest run of that check), as GET
// /findings/latest lists them.
func (s *Server) countLatestFindings(w http.ResponseWriter, r *http.Request) error {
	return s.countFindingsOf(w, r, true)
}

func (s *Server) countFindingsOf(w http.ResponseWriter, r *http.Request, latest bool) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	values := r.URL.Query()
	groupBy := values.Get("group_by")
	if !values.Has("group_by") || strings.TrimSpace(groupBy) == "" {
		return errorf(400, CodeInvalid, "group_by is required: one or more of %s, comma-separated",
			strings.Join(store.CountDimensions, ", ")).parameter("group_by")
	}
	var by []string
	for _, d := range strings.Split(groupBy, ",") {
		d = strings.TrimSpace(d)
		if !slices.Contains(store.CountDimensions, d) {
			return errorf(400, CodeInvalid, "cannot group findings by %q; group_by takes one or more of %s",
				d, strings.Join(store.CountDimensions, ", ")).parameter("group_by")
		}
		if slices.Contains(by, d) {
			return errorf(400, CodeInvalid, "group_by names %q twice", d).parameter("group_by")
		}
		by = append(by, d)
	}
	rest := url.Values{}
	for name, v := range values {
		if name == "group_by" {
			continue
		}
		if !strings.HasPrefix(name, "filter[") {
			return errorf(400, CodeInvalid, "unknown query parameter %q; counts take group_by and the findings filters", name).parameter(name)
		}
		rest[name] = v
	}
	filters := findingList.filters
	if latest {
		filters = latestFindingList.filters
	}
	q, aerr := parseListValues(rest, listSpec{resourceType: "finding-counts", filters: filters})
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
	if fq.Search != "" {
		fq.CountLimit = SearchCountsLimit
	}
	groups, err := s.Store.FindingCounts(r.Context(), p.Tenant, fq, by)
	if errors.Is(err, store.ErrInvalidArgument) {
		return errorf(400, CodeInvalid, "%v", err).parameter("group_by")
	}
	if err != nil {
		return err
	}
	total := 0
	data := make([]resource, 0, len(groups))
	for _, g := range groups {
		total += g.Count
		attrs := make(map[string]any, len(by)+1)
		// The id is the group as a query string in group_by order: stable,
		// unique within the answer, and readable as the filters that select it.
		id := make([]string, len(by))
		for i, d := range by {
			attrs[d] = g.Values[i]
			id[i] = url.QueryEscape(d) + "=" + url.QueryEscape(g.Values[i])
		}
		attrs["count"] = g.Count
		data = append(data, resource{Type: "finding-counts", ID: strings.Join(id, "&"), Attributes: attrs})
	}
	writeJSON(w, http.StatusOK, document{Data: data, Meta: meta{Version: APIVersion, Total: &total, GroupBy: by,
		CountEstimated: fq.CountLimit > 0 && total > fq.CountLimit}})
	return nil
}
