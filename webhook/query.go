package webhook

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/posture-dev/posture/internal/restapi"
)

// Filter bounds. A search term is matched with LIKE and every __in item is
// a bound parameter: unbounded, either one reaches a database limit and
// turns a client's mistake into a 500.
const (
	MaxSearchLength = 256 // characters of filter[search]
	MaxInItems      = 100 // items of one filter[x__in]
)

// CountLimit is where a findings listing stops counting matches that the
// finding summaries cannot count (filter[ingestion], and with
// filter[scan] or the latest view any filter the summary by scan lacks; a
// search stops earlier, at searchCountLimit): enough to
// tell whether any page page[number] may reach exists, so that the count
// never costs more than reading that many matches. Past it
// meta.pagination.count is CountLimit+1, a lower bound, and
// count_estimated is true.
const CountLimit = restapi.MaxPageOffset + restapi.MaxPageSize

// SearchCountsLimit is where grouped counts with filter[search] stop: they
// group the first SearchCountsLimit+1 matches found. No summary holds the
// matches of a substring, and a common word matches a share of the tenant:
// counting it all read every match (290 ms at 1M findings, 4 s at 10M),
// where this many cost what a few pages do at any size. Past it the
// groups and meta.total are lower bounds, and meta.count_estimated is true.
const SearchCountsLimit = 1000

// listQuery is a parsed, checked list request.
type listQuery struct {
	filters map[string]string
	sort    []string
	fields  map[string]bool // nil: all
	page    int
	size    int
	cursor  string // page[cursor], if the spec takes it and it was given
}

// listSpec says what a list endpoint accepts; anything else is a 400.
type listSpec struct {
	resourceType string
	filters      map[string]bool
	sortKeys     map[string]bool
	defaultSort  []string
	fields       map[string]bool
	cursor       bool // page[cursor] is accepted
}

func parseList(r *http.Request, spec listSpec) (listQuery, *apiError) {
	return parseListValues(r.URL.Query(), spec)
}

func parseListValues(values url.Values, spec listSpec) (listQuery, *apiError) {
	q := listQuery{filters: map[string]string{}, page: 1, size: restapi.DefaultPageSize, sort: spec.defaultSort}
	if spec.cursor && values.Has("page[cursor]") && values.Has("page[number]") {
		return q, errorf(400, CodeInvalid, "use either page[cursor] or page[number], not both").parameter("page[cursor]")
	}
	for name, values := range values {
		value := values[len(values)-1]
		switch {
		case strings.HasPrefix(name, "filter[") && strings.HasSuffix(name, "]"):
			key := name[len("filter[") : len(name)-1]
			if len(spec.filters) == 0 {
				return q, errorf(400, CodeInvalid, "unknown filter %q; this list takes no filters", key).parameter(name)
			}
			if !spec.filters[key] {
				return q, errorf(400, CodeInvalid, "unknown filter %q; supported: %s", key, joinKeys(spec.filters)).parameter(name)
			}
			// Neither database stores a NUL or invalid UTF-8 in text: such a
			// term can match nothing, and reaching the database it fails
			// there (SQLite's FTS5 query parser, PostgreSQL's text encoding).
			if i := strings.IndexByte(value, 0); i >= 0 {
				return q, errorf(400, CodeInvalid, "%s holds a NUL character at byte %d; filters are text without control characters", name, i).parameter(name)
			}
			if !utf8.ValidString(value) {
				return q, errorf(400, CodeInvalid, "%s is not valid UTF-8", name).parameter(name)
			}
			if n := utf8.RuneCountInString(value); key == "search" && n > MaxSearchLength {
				return q, errorf(400, CodeInvalid, "%s is %d characters long; at most %d are allowed", name, n, MaxSearchLength).parameter(name)
			}
			if n := strings.Count(value, ",") + 1; strings.HasSuffix(key, "__in") && n > MaxInItems {
				return q, errorf(400, CodeInvalid, "%s lists %d items; at most %d are allowed", name, n, MaxInItems).parameter(name)
			}
			q.filters[key] = value
		case name == "sort":
			if len(spec.sortKeys) == 0 {
				return q, errorf(400, CodeInvalid, "this list has a fixed order and takes no sort").parameter("sort")
			}
			q.sort = nil
			for _, key := range strings.Split(value, ",") {
				key = strings.TrimSpace(key)
				if !spec.sortKeys[strings.TrimPrefix(key, "-")] {
					return q, errorf(400, CodeInvalid, "unknown sort key %q; supported: %s (prefix - for descending)", key, joinKeys(spec.sortKeys)).parameter("sort")
				}
				q.sort = append(q.sort, key)
			}
		case name == "fields["+spec.resourceType+"]":
			q.fields = map[string]bool{}
			for _, f := range strings.Split(value, ",") {
				f = strings.TrimSpace(f)
				if !spec.fields[f] {
					return q, errorf(400, CodeInvalid, "unknown field %q; selectable: %s", f, joinKeys(spec.fields)).parameter(name)
				}
				q.fields[f] = true
			}
		case name == "page[number]":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return q, errorf(400, CodeInvalid, "page[number] must be a whole number of at least 1, got %q", value).parameter(name)
			}
			q.page = n
		case name == "page[cursor]" && spec.cursor:
			if value == "" {
				return q, errorf(400, CodeInvalid, "page[cursor] must not be empty; links.next carries the cursor of the next page").parameter(name)
			}
			q.cursor = value
		case name == "page[size]":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 || n > restapi.MaxPageSize {
				return q, errorf(400, CodeInvalid, "page[size] must be a whole number from 1 to %d, got %q", restapi.MaxPageSize, value).parameter(name)
			}
			q.size = n
		default:
			return q, errorf(400, CodeInvalid, "unknown query parameter %q", name).parameter(name)
		}
	}
	return q, nil
}

func joinKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// pageOf checks the page exists and returns the pagination block and links.
func pageOf(r *http.Request, q listQuery, count int) (pagination, *listLink, *apiError) {
	pages := (count + q.size - 1) / q.size
	if pages == 0 {
		pages = 1
	}
	if q.page > pages {
		return pagination{}, nil, errorf(404, CodeNotFound, "page %d does not exist: there are %d pages of %d", q.page, pages, q.size).parameter("page[number]")
	}
	link := func(n int) string {
		u := *r.URL
		v := u.Query()
		v.Set("page[number]", strconv.Itoa(n))
		u.RawQuery = v.Encode()
		return absoluteURL(r, &u)
	}
	last := link(pages)
	l := &listLink{First: link(1), Last: &last}
	if q.page < pages {
		s := link(q.page + 1)
		l.Next = &s
	}
	if q.page > 1 {
		s := link(q.page - 1)
		l.Prev = &s
	}
	return pagination{Page: q.page, Pages: pages, Count: count}, l, nil
}

func absoluteURL(r *http.Request, u *url.URL) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return fmt.Sprintf("%s://%s%s", scheme, r.Host, u.RequestURI())
}

// writeMemoryPage answers a list request whose items are all in memory (read
// from the informer cache): it checks the page exists, cuts it out, renders it.
func writeMemoryPage[T any](w http.ResponseWriter, r *http.Request, q listQuery, items []T, render func(T) resource) error {
	pg, links, aerr := pageOf(r, q, len(items))
	if aerr != nil {
		return aerr
	}
	from := min((q.page-1)*q.size, len(items))
	to := min(from+q.size, len(items))
	data := make([]resource, 0, to-from)
	for _, item := range items[from:to] {
		data = append(data, render(item))
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
}
