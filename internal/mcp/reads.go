package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

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

// paging is the page a list tool asks for; every list tool takes it.
type paging struct {
	Page     int `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize int `json:"page_size,omitempty" jsonschema:"results per page, 1 to 100"`
}

func (q query) paging(p paging) {
	if p.Page > 0 {
		url.Values(q).Set("page[number]", strconv.Itoa(p.Page))
	}
	if p.PageSize > 0 {
		url.Values(q).Set("page[size]", strconv.Itoa(p.PageSize))
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
