package restapi

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ParseBaseURL reads the API's address and returns its base URL, the
// server's root without /api/v1. Both forms users are told to type work:
// {base_url} (postctl's SERVICE_CLOUD_API_BASE_URL and POSTURE_API_URL)
// and {base_url}/api/v1 (the MCP server's API_BASE_URL); a trailing slash
// is dropped, a path prefix before /api/v1 is kept. The address must be
// http or https with a host, and carry no credentials, query or fragment.
// http is accepted for local installations and tests.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("it is not a URL: %w", unwrapURL(err))
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("the scheme must be https (or http for a local installation): the URL must start with https://, as in %s", DefaultBaseURL)
	case u.Host == "":
		return nil, errors.New("the URL has no host")
	case u.User != nil:
		return nil, errors.New("the URL must not hold credentials; the API key goes in its own variable")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, errors.New("the URL must not have a query or fragment")
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimRight(strings.TrimSuffix(p, Prefix), "/")
	u.Path, u.RawPath = p, ""
	return u, nil
}

// Redact is an address as it may be shown: with the password of a
// user:password@ part replaced, since an address ParseBaseURL refuses is
// echoed back to the console or log that will show the error.
func Redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// APIRoot is base's {base_url}/api/v1.
func APIRoot(base *url.URL) *url.URL { return join(base, Prefix) }

// join appends an escaped path to u without resolving "." or ".."
// segments: an id that is ".." must stay an id, not climb to another
// endpoint.
func join(u *url.URL, escaped string) *url.URL {
	out := *u
	full := strings.TrimRight(u.EscapedPath(), "/") + escaped
	if p, err := url.PathUnescape(full); err == nil {
		out.Path, out.RawPath = p, full
	} else {
		out.Path, out.RawPath = full, ""
	}
	out.RawQuery, out.Fragment = "", ""
	return &out
}
