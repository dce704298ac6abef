package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// DefaultMaxResponseBytes bounds what one response may occupy in memory; a
// page of 100 findings with their full OCSF records stays well below it.
const DefaultMaxResponseBytes = 32 << 20

// Client calls the API at one base URL. It holds no state between calls
// but its configuration, so one Client serves concurrent callers.
type Client struct {
	base *url.URL
	// HTTP sends the requests; its redirect and TLS policy is the caller's.
	HTTP *http.Client
	// UserAgent, when set, is sent on every request.
	UserAgent string
	// Authorization is sent on calls that do not bring their own.
	Authorization string
	// MaxResponseBytes bounds a response body (DefaultMaxResponseBytes
	// when 0).
	MaxResponseBytes int64
}

// New is a client of the API at base, a URL from ParseBaseURL.
func New(base *url.URL, hc *http.Client, userAgent string) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	b := *base
	return &Client{base: &b, HTTP: hc, UserAgent: userAgent}
}

// Base is the base URL, without /api/v1.
func (c *Client) Base() *url.URL { b := *c.base; return &b }

// URL is the address of path (relative to {base_url}/api/v1, escaped:
// "/ingestions/" + url.PathEscape(id)) with the query q.
func (c *Client) URL(path string, q url.Values) *url.URL {
	u := join(APIRoot(c.base), path)
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u
}

// IDSegment is id as one escaped path segment: "/ingestions/" +
// IDSegment(id) addresses that resource and no other. url.PathEscape keeps
// dots, and "." or ".." would be a dot segment, which the API redirects to
// the parent endpoint (a list, or the API root).
func IDSegment(id string) (string, error) {
	id = strings.TrimSpace(id)
	switch id {
	case "":
		return "", errors.New("an id is required")
	case ".", "..":
		return "", fmt.Errorf("%q is not an id", id)
	}
	return url.PathEscape(id), nil
}

// Call is one request.
type Call struct {
	Method string
	// Path is relative to {base_url}/api/v1 and escaped.
	Path  string
	Query url.Values
	// Body, when not nil, is sent with ContentType; ContentLength is set
	// when known (> 0). A body that is neither a *bytes.Reader nor a
	// *bytes.Buffer nor a *strings.Reader cannot be replayed: not by the
	// transport, not by a 307 or 308.
	Body          io.Reader
	ContentType   string
	ContentLength int64
	// Authorization overrides the client's for this call.
	Authorization string
	// Header adds headers to the request.
	Header http.Header
}

// Response is a 2xx answer.
type Response struct {
	Method string
	URL    *url.URL
	Status int
	Header http.Header
	Body   []byte
	// Document is the body decoded, nil when it is not JSON.
	Document *Document
}

// Decode decodes the body into v.
func (r *Response) Decode(v any) error { return json.Unmarshal(r.Body, v) }

// Error is a call that got no 2xx answer. Cause is set when something
// failed on the way: with Status 0 no HTTP response came; with a status the
// body could not be read (or, TooLarge, was larger than allowed). Without
// Cause the API answered Status, and Body is what it said.
type Error struct {
	Method string
	URL    *url.URL
	Status int
	Header http.Header
	Body   []byte
	// Errors are the error objects of a JSON:API error document; empty when
	// the body is not one.
	Errors []ErrorObject
	// TooLarge is set when the body exceeded the client's bound (and so was
	// not read).
	TooLarge bool
	Cause    error
}

func (e *Error) Unwrap() error { return e.Cause }

// Endpoint is the method and URL called, credentials redacted and the query
// unescaped (page[size] reads better than page%5Bsize%5D).
func (e *Error) Endpoint() string { return endpoint(e.Method, e.URL) }

// Endpoint is the method and URL called, as Error.Endpoint.
func (r *Response) Endpoint() string { return endpoint(r.Method, r.URL) }

func endpoint(method string, u *url.URL) string {
	shown := u.Redacted()
	if s, err := url.PathUnescape(shown); err == nil {
		shown = s
	}
	return method + " " + shown
}

// Detail is what the answer said: its errors' details, or a snippet of a
// body that is not an error document.
func (e *Error) Detail() string {
	if e.Cause != nil {
		return e.Cause.Error()
	}
	return ErrorDetail(e.Body)
}

// RetryAfter is the Retry-After header, "" when there is none.
func (e *Error) RetryAfter() string { return e.Header.Get("Retry-After") }

// Location is where a redirect pointed.
func (e *Error) Location() string { return e.Header.Get("Location") }

// ContentType is the answer's Content-Type header.
func (e *Error) ContentType() string { return e.Header.Get("Content-Type") }

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %v", e.Endpoint(), e.Cause)
	}
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Endpoint(), e.Status, http.StatusText(e.Status), e.Detail())
}

// Transient tells whether trying a read again later may help: the API did
// not answer, answered 5xx, or rate limited the call. A cancelled or
// timed-out context is not transient.
func Transient(err error) bool {
	var e *Error
	switch {
	case errors.As(err, &e) && e.TooLarge:
		return false
	case e != nil && e.Cause == nil:
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// StatusOf is the HTTP status of an *Error in err's chain, 0 for none.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// send sends call asking for accept and returns the answer with its body
// unread, or nil and the *Error of a request that got none. The *Error is
// returned either way, named for the call, for the caller to fill in.
func (c *Client) send(ctx context.Context, call Call, accept string) (*http.Response, *Error) {
	u := c.URL(call.Path, call.Query)
	fail := &Error{Method: call.Method, URL: u, Header: http.Header{}}
	req, err := http.NewRequestWithContext(ctx, call.Method, u.String(), call.Body)
	if err != nil {
		fail.Cause = err
		return nil, fail
	}
	if call.ContentLength > 0 {
		req.ContentLength = call.ContentLength
	}
	for k, v := range call.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", accept)
	if call.Body != nil && call.ContentType != "" {
		req.Header.Set("Content-Type", call.ContentType)
	}
	if authz := firstNonEmpty(call.Authorization, c.Authorization); authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = ctxErr
		}
		// url.Error repeats the method and URL Endpoint names.
		fail.Cause = UnwrapURLError(err)
		return nil, fail
	}
	return resp, fail
}

// Do sends one call. Any answer but a 2xx is an *Error.
func (c *Client) Do(ctx context.Context, call Call) (*Response, error) {
	resp, fail := c.send(ctx, call, MediaType)
	if resp == nil {
		return nil, fail
	}
	u := fail.URL
	defer resp.Body.Close()
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	fail.Status, fail.Header = resp.StatusCode, resp.Header
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		fail.Cause = fmt.Errorf("reading the response: %w", UnwrapURLError(err))
		return nil, fail
	}
	if int64(len(body)) > limit {
		fail.TooLarge = true
		fail.Cause = fmt.Errorf("the response is larger than %d bytes", limit)
		return nil, fail
	}
	var doc *Document
	if IsJSON(resp.Header.Get("Content-Type")) {
		var d Document
		if json.Unmarshal(body, &d) == nil {
			doc = &d
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fail.Body = body
		if doc != nil {
			fail.Errors = doc.Errors
		}
		return nil, fail
	}
	return &Response{Method: call.Method, URL: u, Status: resp.StatusCode, Header: resp.Header, Body: body, Document: doc}, nil
}

// Get reads path.
func (c *Client) Get(ctx context.Context, path string, q url.Values) (*Response, error) {
	return c.Do(ctx, Call{Method: http.MethodGet, Path: path, Query: q})
}

// SendJSON sends body, marshalled, as a JSON:API request body.
func (c *Client) SendJSON(ctx context.Context, method, path string, body any) (*Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.Do(ctx, Call{Method: method, Path: path, Body: bytes.NewReader(b), ContentType: MediaType})
}

// UnwrapURLError drops net/http's "Get \"url\": " wrapping, whose method and URL
// the caller names itself.
func UnwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// IsJSON tells whether a Content-Type header names JSON:API or JSON.
func IsJSON(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == MediaType || mt == "application/json"
}

// Open sends one call that asks for accept and returns a 2xx answer with
// its body unread, for an answer too large to hold (an export): the caller
// reads and closes it. Any other answer is an *Error, as from Do.
func (c *Client) Open(ctx context.Context, call Call, accept string) (*http.Response, error) {
	resp, fail := c.send(ctx, call, accept)
	if resp == nil {
		return nil, fail
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	defer resp.Body.Close()
	fail.Status, fail.Header = resp.StatusCode, resp.Header
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		fail.Cause = fmt.Errorf("reading the response: %w", UnwrapURLError(err))
		return nil, fail
	}
	fail.Body = body
	if IsJSON(resp.Header.Get("Content-Type")) {
		var d Document
		if json.Unmarshal(body, &d) == nil {
			fail.Errors = d.Errors
		}
	}
	return nil, fail
}
