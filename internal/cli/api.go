package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/pushclient"
)

// Environment of the ingestions and token commands. The SERVICE_CLOUD_*
// variables of the push are accepted as fallbacks, so one set is enough.
const (
	EnvAPIURL = "POSTURE_API_URL"
	EnvAPIKey = "POSTURE_API_KEY"
	// EnvToken holds a JWT from `postctl token`, sent as a Bearer token
	// when no API key is set.
	EnvToken = "POSTURE_TOKEN"
	// EnvPassword is read by `postctl token` when --password-stdin is not given.
	EnvPassword = "POSTURE_PASSWORD"
)

type apiClient struct {
	base      *url.URL
	baseVar   string // the variable (or flag) the base URL came from
	auth      string // Authorization header value; "" when none
	authVar   string
	http      *http.Client
	userAgent string
}

// newAPIClient reads the address (--api-url, POSTURE_API_URL,
// SERVICE_CLOUD_API_BASE_URL, else the hosted API) and, when needAuth, the
// credentials (POSTURE_API_KEY, SERVICE_CLOUD_API_KEY, else POSTURE_TOKEN).
func (a *app) newAPIClient(flagURL string, needAuth bool) (*apiClient, error) {
	c := &apiClient{userAgent: userAgent()}
	raw, from := flagURL, "--api-url"
	for _, name := range []string{EnvAPIURL, pushclient.EnvBaseURL} {
		if raw != "" {
			break
		}
		raw, from = a.getenv(name), name
	}
	if raw == "" {
		raw, from = pushclient.DefaultBaseURL, "the default"
	}
	base, err := pushclient.ParseBaseURL(raw)
	if err != nil {
		return nil, usageError{fmt.Errorf("API address %q (from %s) is not usable: %w", raw, from, err)}
	}
	c.base, c.baseVar = base, from
	if needAuth {
		for _, name := range []string{EnvAPIKey, pushclient.EnvAPIKey} {
			if k := strings.TrimSpace(a.getenv(name)); k != "" {
				c.auth, c.authVar = "Api-Key "+k, name
				break
			}
		}
		if c.auth == "" {
			if t := strings.TrimSpace(a.getenv(EnvToken)); t != "" {
				c.auth, c.authVar = "Bearer "+t, EnvToken
			}
		}
		if c.auth == "" {
			return nil, exit(ExitError, "no credentials: set %s (or %s) to an API key, or %s to a token from `postctl token`", EnvAPIKey, pushclient.EnvAPIKey, EnvToken)
		}
	}
	trust, err := pushclient.LoadTrust(a.getenv)
	if err != nil {
		return nil, err
	}
	c.http = pushclient.NewHTTPClient(trust, a.getenv, pushclient.ClientOptions{ResponseTimeout: time.Minute})
	return c, nil
}

// apiError is a non-2xx answer.
type apiError struct {
	Status int
	Detail string
	hint   string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Detail)
	if e.hint != "" {
		s += ". " + e.hint
	}
	return s
}

// transient tells whether trying again later may help.
func transient(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// do sends one request and decodes a 2xx JSON answer into out (raw bytes
// are returned too, for -o json).
func (c *apiClient) do(ctx context.Context, method, path string, query url.Values, body any, out any) ([]byte, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", pushclient.MediaType)
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", pushclient.MediaType)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var re *pushclient.RedirectError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("%s %s: %w; set %s to the API's own address", method, u.Redacted(), re, c.baseVar)
		}
		return nil, fmt.Errorf("cannot reach the API at %s (from %s): %w", c.base, c.baseVar, unwrapURL(err))
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer to %s %s: %w", method, u.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &apiError{Status: resp.StatusCode, Detail: pushclient.ErrorDetail(payload)}
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			if c.authVar != "" {
				ae.hint = "Verify " + c.authVar + " (it may be wrong, revoked or expired)"
			}
		case http.StatusForbidden:
			ae.hint = "The user behind the credentials needs the Manage Ingestions permission"
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			ae.Detail = "redirect to " + resp.Header.Get("Location") + " refused"
		}
		return nil, ae
	}
	if out != nil {
		if err := json.Unmarshal(payload, out); err != nil {
			return nil, fmt.Errorf("the answer to %s %s is not the expected JSON: %w", method, u.Path, err)
		}
	}
	return payload, nil
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Resource shapes of the API (DESIGN §7).

type summary struct {
	Total     int64 `json:"total"`
	Processed int64 `json:"processed"`
	Invalid   int64 `json:"invalid"`
}

type ingestion struct {
	ID         string `json:"id"`
	Attributes struct {
		Status      string  `json:"status"`
		Summary     summary `json:"summary"`
		RequestedAt *string `json:"requested_at"`
		StartedAt   *string `json:"started_at"`
		CompletedAt *string `json:"completed_at"`
	} `json:"attributes"`
}

func (i ingestion) done() bool {
	return i.Attributes.Status == "completed" || i.Attributes.Status == "failed"
}

type ingestionError struct {
	ID         string `json:"id"`
	Attributes struct {
		RecordIndex *int64 `json:"record_index"`
		FindingUID  string `json:"finding_uid"`
		Code        string `json:"code"`
		Detail      string `json:"detail"`
		Pointer     string `json:"pointer"`
		Value       string `json:"value"`
	} `json:"attributes"`
}

type pagination struct {
	Page  int `json:"page"`
	Pages int `json:"pages"`
	Count int `json:"count"`
}

type listDoc[T any] struct {
	Data []T `json:"data"`
	Meta struct {
		Version    string     `json:"version"`
		Pagination pagination `json:"pagination"`
	} `json:"meta"`
}
