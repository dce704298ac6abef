// Package pushclient uploads an OCSF report to the ingestion API exactly as
// the spec's "Command-line scanner behaviour (--push-to-cloud)" describes:
// one TLS context, one connection, one POST, no retry, no fallback,
// redirects refused, and one console outcome per push.
package pushclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/posture-dev/posture/internal/restapi"
)

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
		rawBase = restapi.DefaultBaseURL
	}
	base, err := restapi.ParseBaseURL(rawBase)
	if err != nil {
		return invalid(res, fmt.Errorf("%s=%q is not a usable API address: %w", EnvBaseURL, restapi.Redact(rawBase), err))
	}
	api := restapi.New(base, nil, req.UserAgent)
	res.Endpoint = api.URL(restapi.PathIngestions, nil).String()
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
	if !strings.HasSuffix(name, restapi.ReportSuffix) {
		return invalid(res, fmt.Errorf("%s: the API only accepts files whose name ends in %s", req.File, restapi.ReportSuffix))
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

	call, err := restapi.UploadCall(name, f, st.Size())
	if err != nil {
		return invalid(res, err)
	}
	call.Authorization = "Api-Key " + key
	// The API refuses a bad key, a missing subscription or permission before
	// reading the body. Without 100-continue the client would be writing
	// megabytes when the server answers and closes, and could see the
	// connection reset instead of the 401/402/403 the console must report.
	call.Header = http.Header{"Expect": {"100-continue"}}

	api.HTTP = NewHTTPClient(trust, getenv, ClientOptions{Single: true})
	api.MaxResponseBytes = 1 << 20
	defer api.HTTP.CloseIdleConnections()
	resp, err := api.Do(ctx, call)
	var fail *restapi.Error
	switch {
	case err == nil:
		res.HTTPStatus = resp.Status
		var doc restapi.ResourceDocument[restapi.Ingestion]
		if err := resp.Decode(&doc); err != nil || doc.Data.ID == "" {
			res.Outcome = HTTPError
			res.Detail = fmt.Sprintf("the API accepted the upload (HTTP %d) but its answer names no ingestion job: %s", resp.Status, restapi.Snippet(resp.Body, 300, "no details in the response"))
			return res
		}
		res.Outcome = Pushed
		res.JobID, res.JobStatus, res.Total = doc.Data.ID, doc.Data.Attributes.Status, doc.Data.Attributes.Summary.Total
		return res
	case !errors.As(err, &fail) || fail.Status == 0:
		return transportFailure(res, err)
	}
	res.HTTPStatus = fail.Status
	switch {
	case fail.Status >= 300 && fail.Status < 400:
		// 307/308 arrive here: without GetBody net/http returns them as is.
		res.Outcome, res.Location = Redirected, fail.Location()
		res.Err = &RedirectError{Status: fail.Status, Location: res.Location}
		return res
	case fail.TooLarge:
		res.Detail = fail.Cause.Error()
	default:
		res.Detail = fail.Detail()
	}
	switch fail.Status {
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

// cause drops the method and URL an error repeats; the message names the
// URL itself.
func cause(err error) string {
	var fail *restapi.Error
	if errors.As(err, &fail) && fail.Cause != nil {
		err = fail.Cause
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
