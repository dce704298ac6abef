package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APIVersion is the label every response body carries in meta.version.
const APIVersion = "v1"

// MediaType is JSON:API's media type, used for every response.
const MediaType = "application/vnd.api+json"

// Error codes of DESIGN §7.
const (
	CodeInvalid              = "invalid"
	CodeNotAuthenticated     = "not_authenticated"
	CodeSubscriptionRequired = "subscription_required"
	CodePermissionDenied     = "permission_denied"
	CodeNotFound             = "not_found"
	CodeFileTooLarge         = "file_too_large"
	CodeRateLimited          = "rate_limited"
	CodeNotAcceptable        = "not_acceptable"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnsupportedMedia     = "unsupported_media_type"
	CodeServerError          = "error"
)

type meta struct {
	Version    string      `json:"version"`
	Pagination *pagination `json:"pagination,omitempty"`
}

type pagination struct {
	Page  int `json:"page"`
	Pages int `json:"pages"`
	Count int `json:"count"`
}

// ErrorObject is one JSON:API error.
type ErrorObject struct {
	Status string       `json:"status"`
	Code   string       `json:"code"`
	Detail string       `json:"detail"`
	Source *ErrorSource `json:"source,omitempty"`
}

// ErrorSource points at what was wrong: a body member or a query parameter.
type ErrorSource struct {
	Pointer   string `json:"pointer,omitempty"`
	Parameter string `json:"parameter,omitempty"`
	Header    string `json:"header,omitempty"`
}

// apiError is an error a handler returns to be rendered as a JSON:API error.
type apiError struct {
	status int
	obj    ErrorObject
	header http.Header
}

func (e *apiError) Error() string { return e.obj.Detail }

func newError(status int, code, detail string) *apiError {
	return &apiError{status: status, obj: ErrorObject{Status: strconv.Itoa(status), Code: code, Detail: detail}}
}

func errorf(status int, code, format string, args ...any) *apiError {
	return newError(status, code, fmt.Sprintf(format, args...))
}

func (e *apiError) pointer(p string) *apiError {
	e.obj.Source = &ErrorSource{Pointer: p}
	return e
}

func (e *apiError) parameter(p string) *apiError {
	e.obj.Source = &ErrorSource{Parameter: p}
	return e
}

func (e *apiError) headerSource(h string) *apiError {
	e.obj.Source = &ErrorSource{Header: h}
	return e
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", MediaType)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
}

func writeError(w http.ResponseWriter, e *apiError) {
	for k, v := range e.header {
		w.Header()[k] = v
	}
	writeJSON(w, e.status, map[string]any{"errors": []ErrorObject{e.obj}, "meta": meta{Version: APIVersion}})
}

// acceptsJSONAPI is lenient on purpose: curl sends */*, browsers send lists.
func acceptsJSONAPI(accept string) bool {
	if accept == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
		switch strings.ToLower(mt) {
		case MediaType, "application/json", "application/*", "*/*":
			return true
		}
	}
	return false
}

// document is a single-resource or list response.
type document struct {
	Data  any       `json:"data"`
	Links *listLink `json:"links,omitempty"`
	Meta  meta      `json:"meta"`
}

type listLink struct {
	First string  `json:"first"`
	Last  string  `json:"last"`
	Next  *string `json:"next"`
	Prev  *string `json:"prev"`
}

type resource struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Attributes map[string]any `json:"attributes"`
	Links      map[string]any `json:"links,omitempty"`
}

func mustURL(path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		panic(err)
	}
	return u
}

func inNamespace(ns string) client.InNamespace { return client.InNamespace(ns) }
