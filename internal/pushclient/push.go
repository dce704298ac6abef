// Package pushclient uploads an OCSF report to the ingestion API exactly as
// the spec's "Command-line scanner behaviour (--push-to-cloud)" describes:
// one TLS context, one connection, one POST, no retry, no fallback,
// redirects refused, and one console outcome per push.
package pushclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultBaseURL is the hosted API, used when SERVICE_CLOUD_API_BASE_URL is unset.
const DefaultBaseURL = "https://api.posture.dev"

// IngestionsPath is where reports are uploaded, relative to the base URL.
const IngestionsPath = "/api/v1/ingestions"

// FileSuffix is the ending the API requires of an uploaded file's name.
const FileSuffix = ".ocsf.json"

// MediaType is the API's JSON:API media type.
const MediaType = "application/vnd.api+json"

// ParseBaseURL checks an API base URL: http or https, a host, no query or
// fragment. The base is the server's address, without /api/v1 (paths are
// appended to it); a trailing slash, and a trailing /api/v1 given by
// habit (the MCP server's API_BASE_URL includes it), are removed. http is
// accepted for local installations and tests.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, err
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("the scheme must be https (or http), as in %s", DefaultBaseURL)
	case u.Host == "":
		return nil, errors.New("the URL has no host")
	case u.User != nil:
		return nil, errors.New("the URL must not hold credentials; the API key goes in " + EnvAPIKey)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("the URL must not have a query or fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.Path = strings.TrimSuffix(u.Path, "/api/v1")
	u.RawPath = ""
	return u, nil
}

// AppURL is the web application's address: SERVICE_CLOUD_APP_URL when set;
// otherwise the API's, with a leading "api." host label turned into "app."
// (the hosted service: api.posture.dev → app.posture.dev), since a
// self-hosted manager serves the UI on the API's own address.
func AppURL(getenv Getenv, base *url.URL) string {
	if v := strings.TrimSpace(getenv(EnvAppURL)); v != "" {
		return strings.TrimRight(v, "/")
	}
	u := *base
	if h := u.Hostname(); strings.HasPrefix(h, "api.") {
		u.Host = "app." + strings.TrimPrefix(u.Host, "api.")
		u.Path = ""
	}
	return strings.TrimRight(u.String(), "/")
}

// Outcome classifies a push; each has its own console message.
type Outcome string

// Outcomes.
const (
	Pushed               Outcome = "pushed"
	Skipped              Outcome = "skipped"               // no API key configured
	Unreachable          Outcome = "unreachable"           // no HTTP response
	SubscriptionRequired Outcome = "subscription_required" // 402
	Unauthorized         Outcome = "unauthorized"          // 401
	HTTPError            Outcome = "http_error"            // any other non-2xx status
	Redirected           Outcome = "redirected"            // a 3xx, refused
	Untrusted            Outcome = "untrusted"             // TLS certificate verification failed
	Invalid              Outcome = "invalid"               // bad configuration or file: nothing was sent
	Interrupted          Outcome = "interrupted"           // cancelled (Ctrl-C) before the API answered
)

// Result of a push.
type Result struct {
	Outcome Outcome
	// Endpoint is the upload URL; AppURL the web application's address.
	Endpoint, AppURL string
	// JobID, JobStatus and Total describe the accepted ingestion job.
	JobID, JobStatus string
	Total            int64
	// HTTPStatus and Detail describe a refusal; Detail is the API's error
	// detail, or what went wrong locally.
	HTTPStatus int
	Detail     string
	// Location is where a refused redirect pointed.
	Location string
	Err      error
}

// OK tells whether the findings were pushed.
func (r Result) OK() bool { return r.Outcome == Pushed }

// Request is one upload.
type Request struct {
	// File is the .ocsf.json report to send.
	File string
	// Name is the file name sent to the API (default: File's base name);
	// it must end in .ocsf.json. A temporary file is sent under the name
	// the scan's own OCSF output would have had.
	Name      string
	Getenv    Getenv
	UserAgent string
}

// Push uploads one report. It never retries, never follows a redirect and
// never changes the environment; every failure is a Result, not a panic or
// an exit.
func Push(ctx context.Context, req Request) Result {
	getenv := req.Getenv
	res := Result{}
	rawBase := getenv(EnvBaseURL)
	if rawBase == "" {
		rawBase = DefaultBaseURL
	}
	base, err := ParseBaseURL(rawBase)
	if err != nil {
		return invalid(res, fmt.Errorf("%s=%q is not a usable API address: %w", EnvBaseURL, rawBase, err))
	}
	res.Endpoint = base.JoinPath(IngestionsPath).String()
	res.AppURL = AppURL(getenv, base)

	key := strings.TrimSpace(getenv(EnvAPIKey))
	if key == "" {
		res.Outcome = Skipped
		return res
	}
	if strings.ContainsAny(key, "\r\n\t\x00") || !isPrintableASCII(key) {
		return invalid(res, fmt.Errorf("%s holds characters an HTTP header cannot carry; copy the key again", EnvAPIKey))
	}

	name := req.Name
	if name == "" {
		name = filepath.Base(req.File)
	}
	if !strings.HasSuffix(name, FileSuffix) {
		return invalid(res, fmt.Errorf("%s: the API only accepts files whose name ends in %s", req.File, FileSuffix))
	}
	f, err := os.Open(req.File)
	if err != nil {
		return invalid(res, fmt.Errorf("cannot open the report: %w", err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return invalid(res, fmt.Errorf("cannot read the report: %w", err))
	}
	if !st.Mode().IsRegular() {
		return invalid(res, fmt.Errorf("%s is not a regular file", req.File))
	}
	if st.Size() == 0 {
		return invalid(res, fmt.Errorf("%s is empty", req.File))
	}

	trust, err := LoadTrust(getenv)
	if err != nil {
		return invalid(res, err)
	}

	// The multipart framing is built around the file so the request has a
	// Content-Length and streams the file without holding it in memory.
	var frame bytes.Buffer
	mw := multipart.NewWriter(&frame)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", "application/json")
	if _, err := mw.CreatePart(h); err != nil {
		return invalid(res, err)
	}
	head := bytes.Clone(frame.Bytes())
	frame.Reset()
	if err := mw.Close(); err != nil {
		return invalid(res, err)
	}
	tail := bytes.Clone(frame.Bytes())
	body := io.MultiReader(bytes.NewReader(head), io.LimitReader(f, st.Size()), bytes.NewReader(tail))

	// Wrapping the body hides its type from net/http, which therefore sets no
	// GetBody: the request cannot be replayed, so neither the transport nor
	// a 307/308 can send it twice.
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, res.Endpoint, io.NopCloser(body))
	if err != nil {
		return invalid(res, err)
	}
	httpReq.ContentLength = int64(len(head)) + st.Size() + int64(len(tail))
	httpReq.Header.Set("Content-Type", mw.FormDataContentType())
	httpReq.Header.Set("Accept", MediaType)
	httpReq.Header.Set("Authorization", "Api-Key "+key)
	// The API refuses a bad key, a missing subscription or permission before
	// reading the body. Without 100-continue the client would be writing
	// megabytes when the server answers and closes, and could see the
	// connection reset instead of the 401/402/403 the console must report.
	httpReq.Header.Set("Expect", "100-continue")
	if req.UserAgent != "" {
		httpReq.Header.Set("User-Agent", req.UserAgent)
	}

	client := NewHTTPClient(trust, getenv, ClientOptions{Single: true})
	defer client.CloseIdleConnections()
	resp, err := client.Do(httpReq)
	if err != nil {
		return transportFailure(res, err)
	}
	defer resp.Body.Close()
	payload, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	res.HTTPStatus = resp.StatusCode

	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// 307/308 arrive here: without GetBody net/http returns them as is.
		res.Outcome, res.Location = Redirected, resp.Header.Get("Location")
		res.Err = &RedirectError{Status: resp.StatusCode, Location: res.Location}
		return res
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		var doc struct {
			Data struct {
				Type       string `json:"type"`
				ID         string `json:"id"`
				Attributes struct {
					Status  string `json:"status"`
					Summary struct {
						Total int64 `json:"total"`
					} `json:"summary"`
				} `json:"attributes"`
			} `json:"data"`
		}
		if err := json.Unmarshal(payload, &doc); err != nil || doc.Data.ID == "" {
			res.Outcome = HTTPError
			res.Detail = fmt.Sprintf("the API accepted the upload (HTTP %d) but its answer names no ingestion job: %s", resp.StatusCode, snippet(payload))
			return res
		}
		res.Outcome = Pushed
		res.JobID, res.JobStatus, res.Total = doc.Data.ID, doc.Data.Attributes.Status, doc.Data.Attributes.Summary.Total
		return res
	}
	res.Detail = ErrorDetail(payload)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		res.Outcome = Unauthorized
	case http.StatusPaymentRequired:
		res.Outcome = SubscriptionRequired
	default:
		res.Outcome = HTTPError
	}
	return res
}

func invalid(res Result, err error) Result {
	res.Outcome, res.Err, res.Detail = Invalid, err, err.Error()
	return res
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// transportFailure classifies an error without an HTTP response.
func transportFailure(res Result, err error) Result {
	res.Err = err
	var redirect *RedirectError
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	switch {
	case errors.As(err, &redirect):
		res.Outcome, res.HTTPStatus, res.Location = Redirected, redirect.Status, redirect.Location
	case errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalidCert):
		res.Outcome = Untrusted
		res.Detail = cause(err)
	case errors.Is(err, context.Canceled):
		res.Outcome, res.Detail = Interrupted, "interrupted"
	default:
		res.Outcome = Unreachable
		res.Detail = cause(err)
		if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) {
			res.Detail = cause(err) + " (the connection was cut during the upload)"
		}
	}
	return res
}

// cause drops net/http's `Post "url": ` prefix; the message names the URL itself.
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// ErrorDetail extracts the details of a JSON:API error document, or a
// snippet of a body that is not one.
func ErrorDetail(body []byte) string {
	var doc struct {
		Errors []struct {
			Status string `json:"status"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
			Title  string `json:"title"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &doc); err == nil && len(doc.Errors) > 0 {
		var parts []string
		for _, e := range doc.Errors {
			d := e.Detail
			if d == "" {
				d = e.Title
			}
			if d == "" {
				d = e.Code
			}
			if d != "" {
				parts = append(parts, d)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return snippet(body)
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")
	if s == "" {
		return "no details in the response"
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
