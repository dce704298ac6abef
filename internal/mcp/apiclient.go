package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/restapi"
)

// apiClient calls the Posture REST API. It holds no credential: each call
// carries the Authorization value of the MCP caller it acts for.
type apiClient struct {
	api *restapi.Client
}

// APIError is a failed API call, described so that an agent (and the person
// behind it) can act on it.
type APIError struct {
	// Status is the HTTP status; 0 when the API could not be reached.
	Status     int
	Code       string
	Detail     string
	Source     string // parameter, pointer or header the API blamed
	RetryAfter string
	// Endpoint is the method and URL called (never with credentials).
	Endpoint string
	// Cause is the transport error when Status is 0.
	Cause error
}

func (e *APIError) Unwrap() error { return e.Cause }

func (e *APIError) Error() string {
	var b strings.Builder
	switch e.Status {
	case 0:
		fmt.Fprintf(&b, "cannot reach the Posture API (%s): %v. Check the API address (API_BASE_URL, of the form {base_url}/api/v1) and the network", e.Endpoint, e.Cause)
		return b.String()
	case http.StatusUnauthorized:
		b.WriteString("authentication failed (HTTP 401)")
	case http.StatusPaymentRequired:
		b.WriteString("subscription required (HTTP 402)")
	case http.StatusForbidden:
		b.WriteString("permission denied (HTTP 403)")
	case http.StatusNotFound:
		b.WriteString("not found (HTTP 404)")
	case http.StatusRequestEntityTooLarge:
		b.WriteString("report too large (HTTP 413)")
	case http.StatusTooManyRequests:
		b.WriteString("rate limited (HTTP 429)")
	default:
		if e.Status >= 500 {
			fmt.Fprintf(&b, "the Posture API failed (HTTP %d)", e.Status)
		} else {
			fmt.Fprintf(&b, "the Posture API rejected the request (HTTP %d)", e.Status)
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Source != "" {
		fmt.Fprintf(&b, " (at %s)", e.Source)
	}
	// The API's own detail usually says already what to do about a 402 or
	// a 403: its hint is added only when it does not, so that no sentence
	// is said twice.
	detail := strings.ToLower(e.Detail)
	switch e.Status {
	case http.StatusUnauthorized:
		b.WriteString(". The API key is wrong, revoked or expired (a JWT lasts 30 minutes), or the API address is not the one that issued it")
	case http.StatusPaymentRequired:
		if !strings.Contains(detail, "subscription") {
			b.WriteString(". The tenant needs an active subscription")
		}
	case http.StatusForbidden:
		if !strings.Contains(detail, "administrator") {
			b.WriteString(". An administrator must grant the permission to the user behind the key")
		}
	case http.StatusTooManyRequests:
		if e.RetryAfter != "" {
			fmt.Fprintf(&b, "; retry after %s seconds", e.RetryAfter)
		} else {
			b.WriteString("; retry later")
		}
	}
	fmt.Fprintf(&b, " [%s]", e.Endpoint)
	return b.String()
}

// newAPIClient reads the API address with the one rule of restapi:
// {base_url} and {base_url}/api/v1 both name the same API.
func newAPIClient(baseURL string, hc *http.Client, userAgent string) (*apiClient, error) {
	u, err := restapi.ParseBaseURL(baseURL)
	if err != nil {
		return nil, fmt.Errorf("API address %q is not usable: %w", restapi.Redact(strings.TrimSpace(baseURL)), err)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &apiClient{api: restapi.New(u, hc, userAgent)}, nil
}

// BaseURL is the API address in use, {base_url}/api/v1.
func (c *apiClient) BaseURL() string { return restapi.APIRoot(c.api.Base()).String() }

// get reads path (relative to {base_url}/api/v1, e.g. "/ingestions") as authz.
func (c *apiClient) get(ctx context.Context, authz, path string, q url.Values) (*restapi.Document, error) {
	resp, err := c.api.Do(ctx, restapi.Call{Method: http.MethodGet, Path: path, Query: q, Authorization: authz})
	return document(resp, err)
}

// post sends body, a JSON:API document, to path as authz.
func (c *apiClient) post(ctx context.Context, authz, path string, body []byte) (*restapi.Document, error) {
	resp, err := c.api.Do(ctx, restapi.Call{Method: http.MethodPost, Path: path, Body: bytes.NewReader(body),
		ContentType: restapi.MediaType, ContentLength: int64(len(body)), Authorization: authz})
	return document(resp, err)
}

// upload posts a report as the multipart part "file", streaming it.
func (c *apiClient) upload(ctx context.Context, authz, filename string, content io.Reader) (*restapi.Document, error) {
	call, err := restapi.UploadCall(filename, content, -1)
	if err != nil {
		return nil, err
	}
	call.Authorization = authz
	resp, err := c.api.Do(ctx, call)
	return document(resp, err)
}

// notJSONAPI is the hint of an answer in another format: most likely
// something other than the API answered at that address.
const notJSONAPI = "is the API address right? It must be {base_url} or {base_url}/api/v1"

// document is a 2xx answer's JSON:API document, or the call's failure as an
// *APIError.
func document(resp *restapi.Response, err error) (*restapi.Document, error) {
	var fail *restapi.Error
	switch {
	case err == nil && resp.Document == nil:
		return nil, &APIError{Status: resp.Status, Endpoint: resp.Endpoint(),
			Detail: fmt.Sprintf("the answer is not JSON:API (Content-Type %q); %s", resp.Header.Get("Content-Type"), notJSONAPI)}
	case err == nil:
		return resp.Document, nil
	case !errors.As(err, &fail):
		return nil, err
	}
	ae := &APIError{Status: fail.Status, Endpoint: fail.Endpoint(), RetryAfter: fail.RetryAfter()}
	switch {
	case fail.TooLarge:
		ae.Detail = fmt.Sprintf("the response is larger than %d bytes; ask for a smaller page", restapi.DefaultMaxResponseBytes)
	case fail.Cause != nil:
		ae.Status, ae.Cause, ae.RetryAfter = 0, fail.Cause, ""
	case len(fail.Errors) > 0:
		e := fail.Errors[0]
		ae.Code, ae.Detail, ae.Source = e.Code, e.Detail, e.Source.Where()
		for _, more := range fail.Errors[1:] {
			ae.Detail += "; " + more.Detail
		}
	default:
		ae.Detail = fmt.Sprintf("the answer is not a JSON:API error (Content-Type %q): %s; %s",
			fail.ContentType(), restapi.Snippet(fail.Body, 200, "(empty body)"), notJSONAPI)
	}
	return nil, ae
}

// isStatus reports whether err is an API error with the given status.
func isStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}
