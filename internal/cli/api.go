package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/pushclient"
	"github.com/posture-dev/posture/internal/restapi"
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

// apiClient is the API client of the ingestions and token commands; it
// remembers where its address and credentials came from, to name them when
// they fail.
type apiClient struct {
	*restapi.Client
	baseVar string // the variable (or flag) the base URL came from
	authVar string // the variable the credentials came from; "" when none
}

// newAPIClient reads the address (--api-url, POSTURE_API_URL,
// SERVICE_CLOUD_API_BASE_URL, else the hosted API) and, when needAuth, the
// credentials (POSTURE_API_KEY, SERVICE_CLOUD_API_KEY, else POSTURE_TOKEN).
func (a *app) newAPIClient(flagURL string, needAuth bool) (*apiClient, error) {
	c := &apiClient{}
	raw, from := flagURL, "--api-url"
	for _, name := range []string{EnvAPIURL, pushclient.EnvBaseURL} {
		if raw != "" {
			break
		}
		raw, from = a.getenv(name), name
	}
	if raw == "" {
		raw, from = restapi.DefaultBaseURL, "the default"
	}
	base, err := restapi.ParseBaseURL(raw)
	if err != nil {
		return nil, usageError{fmt.Errorf("API address %q (from %s) is not usable: %w", restapi.Redact(raw), from, err)}
	}
	c.baseVar = from
	var authz string
	if needAuth {
		for _, name := range []string{EnvAPIKey, pushclient.EnvAPIKey} {
			if k := strings.TrimSpace(a.getenv(name)); k != "" {
				authz, c.authVar = "Api-Key "+k, name
				break
			}
		}
		if authz == "" {
			if t := strings.TrimSpace(a.getenv(EnvToken)); t != "" {
				authz, c.authVar = "Bearer "+t, EnvToken
			}
		}
		if authz == "" {
			return nil, exit(ExitError, "no credentials: set %s (or %s) to an API key, or %s to a token from `postctl token`", EnvAPIKey, pushclient.EnvAPIKey, EnvToken)
		}
	}
	trust, err := pushclient.LoadTrust(a.getenv)
	if err != nil {
		return nil, err
	}
	hc := pushclient.NewHTTPClient(trust, a.getenv, pushclient.ClientOptions{ResponseTimeout: time.Minute})
	c.Client = restapi.New(base, hc, userAgent())
	c.Authorization = authz
	return c, nil
}

// apiError is a non-2xx answer.
type apiError struct {
	Status int
	Detail string
	hint   string
	cause  *restapi.Error
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Detail)
	if e.hint != "" {
		s += ". " + e.hint
	}
	return s
}

func (e *apiError) Unwrap() error { return e.cause }

// do sends one request to path (relative to {base_url}/api/v1) and decodes
// a 2xx JSON answer into out (raw bytes are returned too, for -o json).
func (c *apiClient) do(ctx context.Context, method, path string, query url.Values, body any, out any) ([]byte, error) {
	call := restapi.Call{Method: method, Path: path, Query: query}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		call.Body, call.ContentType = bytes.NewReader(b), restapi.MediaType
	}
	u := c.URL(path, query)
	resp, err := c.Do(ctx, call)
	var fail *restapi.Error
	switch {
	case err == nil:
	case !errors.As(err, &fail):
		return nil, err
	case fail.TooLarge:
		return nil, fmt.Errorf("the answer to %s %s: %w", method, u.Path, fail.Cause)
	case fail.Status != 0 && fail.Cause != nil:
		return nil, fmt.Errorf("reading the answer to %s %s: %w", method, u.Path, fail.Cause)
	case fail.Status == 0:
		var re *pushclient.RedirectError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("%s %s: %w; set %s to the API's own address", method, u.Redacted(), re, c.baseVar)
		}
		return nil, fmt.Errorf("cannot reach the API at %s (from %s): %w", c.Base(), c.baseVar, fail.Cause)
	default:
		ae := &apiError{Status: fail.Status, Detail: fail.Detail(), cause: fail}
		switch fail.Status {
		case http.StatusUnauthorized:
			if c.authVar != "" {
				ae.hint = "Verify " + c.authVar + " (it may be wrong, revoked or expired)"
			}
		case http.StatusForbidden:
			ae.hint = "The user behind the credentials needs the Manage Ingestions permission"
		}
		if fail.Status >= 300 && fail.Status < 400 {
			ae.Detail = "redirect to " + fail.Location() + " refused"
		}
		return nil, ae
	}
	if out != nil {
		if err := resp.Decode(out); err != nil {
			return nil, fmt.Errorf("the answer to %s %s is not the expected JSON: %w", method, u.Path, err)
		}
	}
	return resp.Body, nil
}
