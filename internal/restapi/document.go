package restapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Document is a JSON:API response body whose data is left undecoded: a
// resource, a list of them, or nothing (an error document).
type Document struct {
	Data   json.RawMessage `json:"data,omitempty"`
	Links  *Links          `json:"links,omitempty"`
	Meta   Meta            `json:"meta"`
	Errors []ErrorObject   `json:"errors,omitempty"`
}

// ListDocument is a list response.
type ListDocument[A any] struct {
	Data  []Resource[A] `json:"data"`
	Links *Links        `json:"links"`
	Meta  Meta          `json:"meta"`
}

// ResourceDocument is a single-resource response.
type ResourceDocument[A any] struct {
	Data Resource[A] `json:"data"`
	Meta Meta        `json:"meta"`
}

// Resource is one JSON:API resource object with attributes A (a resource
// struct of this package, or map[string]any to keep every attribute).
type Resource[A any] struct {
	Type       string            `json:"type"`
	ID         string            `json:"id"`
	Attributes A                 `json:"attributes"`
	Links      map[string]string `json:"links,omitempty"`
}

// Links are a list's links. Last is null when the last page is deeper than
// page[number] may go; Next carries page[cursor] on findings.
type Links struct {
	First string  `json:"first"`
	Last  *string `json:"last"`
	Next  *string `json:"next"`
	Prev  *string `json:"prev"`
}

// Meta is a document's meta.
type Meta struct {
	Version    string      `json:"version"`
	Pagination *Pagination `json:"pagination,omitempty"`
	// Total and GroupBy are the findings counts': the findings counted and
	// the dimensions of each group.
	Total   *int     `json:"total,omitempty"`
	GroupBy []string `json:"group_by,omitempty"`
	// CountEstimated, on findings counts, says Total and every group's
	// count are lower bounds: a search's counts stop at 1,001 matches
	// (webhook.SearchCountsLimit + 1). Left out when they are exact.
	CountEstimated bool `json:"count_estimated,omitempty"`
}

// Pagination is meta.pagination. Page is 0, and left out, on a page
// reached by page[cursor]: its position is not counted.
type Pagination struct {
	Page  int `json:"page,omitempty"`
	Pages int `json:"pages"`
	Count int `json:"count"`
	// CountEstimated says Count is a lower bound, and Pages the pages known
	// to exist: the findings list stops counting matches the finding
	// summary cannot count past 10,100 (webhook.CountLimit), and those of a
	// search past the end of the next page. Left out when Count is exact.
	CountEstimated bool `json:"count_estimated,omitempty"`
}

// ErrorDocument is the body of every error response.
type ErrorDocument struct {
	Errors []ErrorObject `json:"errors"`
	Meta   Meta          `json:"meta"`
}

// ErrorObject is one JSON:API error.
type ErrorObject struct {
	Status string       `json:"status"`
	Code   string       `json:"code"`
	Detail string       `json:"detail"`
	Source *ErrorSource `json:"source,omitempty"`
}

// ErrorSource points at what was wrong: a body member, a query parameter or
// a header.
type ErrorSource struct {
	Pointer   string `json:"pointer,omitempty"`
	Parameter string `json:"parameter,omitempty"`
	Header    string `json:"header,omitempty"`
}

// Where is the parameter, pointer or header the error blames, "" for none.
func (s *ErrorSource) Where() string {
	switch {
	case s == nil:
		return ""
	case s.Parameter != "":
		return s.Parameter
	case s.Pointer != "":
		return s.Pointer
	}
	return s.Header
}

// Resources decodes a list document's data.
func Resources[A any](d *Document) ([]Resource[A], error) {
	var rs []Resource[A]
	if err := json.Unmarshal(d.Data, &rs); err != nil {
		return nil, fmt.Errorf("the API answered with an unexpected list shape: %v", err)
	}
	return rs, nil
}

// One decodes a single-resource document's data.
func One[A any](d *Document) (Resource[A], error) {
	var r Resource[A]
	if err := json.Unmarshal(d.Data, &r); err != nil {
		return r, fmt.Errorf("the API answered with an unexpected resource shape: %v", err)
	}
	return r, nil
}

// NextCursor is the page[cursor] of links.next, "" when there is no next
// page or it is reached by number.
func (l *Links) NextCursor() string {
	if l == nil || l.Next == nil {
		return ""
	}
	u, err := url.Parse(*l.Next)
	if err != nil {
		return ""
	}
	return u.Query().Get("page[cursor]")
}

// NextPage is the number of the page after p, 0 when p is the last one or
// was reached by cursor (it has no number).
func (p *Pagination) NextPage() int {
	if p == nil || p.Page <= 0 || p.Page >= p.Pages {
		return 0
	}
	return p.Page + 1
}

// ErrorDetail is what an error body says: the details of a JSON:API error
// document (a title or code when an error has no detail), joined by "; ",
// or a snippet of a body that is not one.
func ErrorDetail(body []byte) string {
	// title is not the API's (its errors always carry a detail), but a
	// proxy or gateway in front of it may answer with one.
	var doc struct {
		Errors []struct {
			ErrorObject
			Title string `json:"title"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &doc); err == nil && len(doc.Errors) > 0 {
		var parts []string
		for _, e := range doc.Errors {
			d := firstNonEmpty(e.Detail, e.Title, e.Code)
			if d != "" {
				parts = append(parts, d)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return Snippet(body, 300, "no details in the response")
}

// Snippet is body on one line, valid UTF-8, cut after n bytes; empty when
// the body holds nothing but white space.
func Snippet(body []byte, n int, empty string) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "?")), " ")
	if s == "" {
		return empty
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
