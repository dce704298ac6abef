package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/restapi"
)

// The contract's constants and shapes are restapi's, which the clients
// share; the OpenAPI test holds both to openapi.yaml.

// APIVersion is the label every response body carries in meta.version.
const APIVersion = restapi.Version

// MediaType is JSON:API's media type, used for every response.
const MediaType = restapi.MediaType

// Error codes.
const (
	CodeInvalid              = restapi.CodeInvalid
	CodeNotAuthenticated     = restapi.CodeNotAuthenticated
	CodeSubscriptionRequired = restapi.CodeSubscriptionRequired
	CodePermissionDenied     = restapi.CodePermissionDenied
	CodeNotFound             = restapi.CodeNotFound
	CodeFileTooLarge         = restapi.CodeFileTooLarge
	CodeRateLimited          = restapi.CodeRateLimited
	CodeNotAcceptable        = restapi.CodeNotAcceptable
	CodeMethodNotAllowed     = restapi.CodeMethodNotAllowed
	CodeUnsupportedMedia     = restapi.CodeUnsupportedMedia
	CodeServerError          = restapi.CodeServerError
	CodeUnavailable          = restapi.CodeUnavailable
)

type (
	meta       = restapi.Meta
	pagination = restapi.Pagination
	listLink   = restapi.Links
	// ErrorObject is one JSON:API error.
	ErrorObject = restapi.ErrorObject
	// ErrorSource points at what was wrong: a body member, a query
	// parameter or a header.
	ErrorSource = restapi.ErrorSource
)

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

// acceptsJSONAPI reports whether the Accept header allows a JSON:API body,
// which plain-JSON clients can read too. curl sends */*, browsers send lists;
// an explicit q=0 refuses a type. Each type takes the quality of the most
// specific range that matches it (RFC 9110, section 12.5.1).
func acceptsJSONAPI(accept []string) bool {
	all := strings.Join(accept, ",")
	if strings.TrimSpace(all) == "" {
		return true
	}
	return quality(all, MediaType) > 0 || quality(all, "application/json") > 0
}

// quality is the weight the Accept header gives to the media type
// mediaType (type/subtype, lower case).
func quality(accept, mediaType string) float64 {
	wantType, wantSub, _ := strings.Cut(mediaType, "/")
	best, q := -1, 0.0
	for _, r := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(r, ";")
		typ, subtype, ok := strings.Cut(strings.ToLower(strings.TrimSpace(mt)), "/")
		if !ok {
			continue
		}
		var specificity int
		switch {
		case typ == wantType && subtype == wantSub:
			specificity = 2
		case typ == wantType && subtype == "*":
			specificity = 1
		case typ == "*" && subtype == "*":
			specificity = 0
		default:
			continue
		}
		weight := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					weight = f
				}
			}
		}
		if specificity > best || specificity == best && weight > q {
			best, q = specificity, weight
		}
	}
	return q
}

// checkQuery refuses a query string that cannot be read one way only: a
// broken escape, or a parameter given twice (which of the two would count is
// not something a client should have to guess).
func checkQuery(r *http.Request) *apiError {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return errorf(400, CodeInvalid, "the query string is malformed: %v", err)
	}
	for name, v := range values {
		if len(v) > 1 {
			return errorf(400, CodeInvalid, "query parameter %q is given %d times; give it once", name, len(v)).parameter(name)
		}
	}
	return nil
}

// document is a single-resource or list response.
type document struct {
	Data  any       `json:"data"`
	Links *listLink `json:"links,omitempty"`
	Meta  meta      `json:"meta"`
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
