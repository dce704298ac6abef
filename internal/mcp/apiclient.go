package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// mediaType is the JSON:API media type the Posture API speaks.
const mediaType = "application/vnd.api+json"

// maxResponseBytes bounds what one API response may occupy in memory; a
// page of 100 findings with their full OCSF records stays well below it.
const maxResponseBytes = 32 << 20

// apiClient calls the Posture REST API. It holds no credential: each call
// carries the Authorization value of the MCP caller it acts for.
type apiClient struct {
	base      *url.URL // {base_url}/api/v1, without a trailing slash
	http      *http.Client
	userAgent string
}

// document is a JSON:API response body.
type document struct {
	Data  json.RawMessage `json:"data"`
	Links *struct {
		Next *string `json:"next"`
	} `json:"links,omitempty"`
	Meta   documentMeta     `json:"meta"`
	Errors []apiErrorObject `json:"errors,omitempty"`
}

type documentMeta struct {
	Version    string      `json:"version"`
	Pagination *pagination `json:"pagination,omitempty"`
}

type pagination struct {
	Page  int `json:"page"`
	Pages int `json:"pages"`
	Count int `json:"count"`
}

// apiResource is one JSON:API resource object.
type apiResource struct {
	Type          string                     `json:"type"`
	ID            string                     `json:"id"`
	Attributes    map[string]any             `json:"attributes"`
	Relationships map[string]json.RawMessage `json:"relationships,omitempty"`
}

type apiErrorObject struct {
	Status string `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Source *struct {
		Pointer   string `json:"pointer,omitempty"`
		Parameter string `json:"parameter,omitempty"`
		Header    string `json:"header,omitempty"`
	} `json:"source,omitempty"`
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
	switch e.Status {
	case http.StatusUnauthorized:
		b.WriteString(". The API key is wrong, revoked or expired (a JWT lasts 30 minutes), or the API address is not the one that issued it")
	case http.StatusPaymentRequired:
		b.WriteString(". The tenant needs an active subscription")
	case http.StatusForbidden:
		b.WriteString(". An administrator must grant the permission to the user behind the key")
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

func newAPIClient(baseURL string, hc *http.Client, userAgent string) (*apiClient, error) {
	u, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &apiClient{base: u, http: hc, userAgent: userAgent}, nil
}

// ParseBaseURL checks an API address. The spec's form is {base_url}/api/v1;
// a bare {base_url} (no path) is completed with /api/v1 because that is the
// only API there is, and a mistake here shows up as confusing 404s later.
func ParseBaseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("API address %q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("API address %q must start with http:// or https://", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("API address %q has no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("API address %q must not carry a query or fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if u.Path == "" {
		u.Path = "/api/v1"
	}
	u.RawPath = ""
	return u, nil
}

// BaseURL is the API address in use.
func (c *apiClient) BaseURL() string { return c.base.String() }

func (c *apiClient) endpoint(path string, q url.Values) *url.URL {
	u := *c.base
	u.Path = c.base.Path + path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return &u
}

// get reads path (relative to the base, e.g. "/ingestions") as authz.
func (c *apiClient) get(ctx context.Context, authz, path string, q url.Values) (*document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint(path, q).String(), nil)
	if err != nil {
		return nil, err
	}
	return c.do(req, authz)
}

// upload posts a report as the multipart part "file", streaming it.
func (c *apiClient) upload(ctx context.Context, authz, filename string, content io.Reader) (*document, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", filename)
		if err == nil {
			_, err = io.Copy(part, content)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint("/ingestions", nil).String(), pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.do(req, authz)
}

func (c *apiClient) do(req *http.Request, authz string) (*document, error) {
	shown := req.URL.Redacted()
	if u, err := url.PathUnescape(shown); err == nil {
		shown = u // page[size] reads better than page%5Bsize%5D
	}
	endpoint := req.Method + " " + shown
	req.Header.Set("Accept", mediaType)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			err = ctxErr
		}
		// url.Error repeats the method and URL the message already names.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &APIError{Endpoint: endpoint, Cause: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, &APIError{Endpoint: endpoint, Cause: fmt.Errorf("reading the response: %w", err)}
	}
	if len(body) > maxResponseBytes {
		return nil, &APIError{Status: resp.StatusCode, Endpoint: endpoint, Detail: fmt.Sprintf("the response is larger than %d bytes; ask for a smaller page", maxResponseBytes)}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := mt == mediaType || mt == "application/json"
	var doc document
	if isJSON {
		if err := json.Unmarshal(body, &doc); err != nil {
			isJSON = false
		}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if !isJSON {
			return nil, &APIError{Status: resp.StatusCode, Endpoint: endpoint,
				Detail: fmt.Sprintf("the answer is not JSON:API (Content-Type %q); is the API address right? It must end in /api/v1", resp.Header.Get("Content-Type"))}
		}
		return &doc, nil
	}
	ae := &APIError{Status: resp.StatusCode, Endpoint: endpoint, RetryAfter: resp.Header.Get("Retry-After")}
	switch {
	case isJSON && len(doc.Errors) > 0:
		e := doc.Errors[0]
		ae.Code, ae.Detail = e.Code, e.Detail
		if e.Source != nil {
			ae.Source = firstNonEmpty(e.Source.Parameter, e.Source.Pointer, e.Source.Header)
		}
		for _, more := range doc.Errors[1:] {
			ae.Detail += "; " + more.Detail
		}
	default:
		ae.Detail = fmt.Sprintf("the answer is not a JSON:API error (Content-Type %q): %s; is the API address right? It must end in /api/v1",
			resp.Header.Get("Content-Type"), snippet(body, 200))
	}
	return nil, ae
}

// resources decodes a list document's data.
func (d *document) resources() ([]apiResource, error) {
	var rs []apiResource
	if err := json.Unmarshal(d.Data, &rs); err != nil {
		return nil, fmt.Errorf("the API answered with an unexpected list shape: %v", err)
	}
	return rs, nil
}

// resource decodes a single-resource document's data.
func (d *document) resource() (apiResource, error) {
	var r apiResource
	if err := json.Unmarshal(d.Data, &r); err != nil {
		return r, fmt.Errorf("the API answered with an unexpected resource shape: %v", err)
	}
	return r, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func snippet(b []byte, n int) string {
	s := strings.TrimSpace(string(bytes.ToValidUTF8(b, []byte("?"))))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// isStatus reports whether err is an API error with the given status.
func isStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}
