package restapi_test

import (
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/restapi"
)

// TestParseBaseURL: every form the docs tell users to type (postctl's
// {base_url}, the MCP server's {base_url}/api/v1, with a trailing slash,
// under a path prefix) names one base URL, and the API at {base_url}/api/v1.
func TestParseBaseURL(t *testing.T) {
	for _, tc := range []struct {
		in, base, api, err string
	}{
		// postctl: SERVICE_CLOUD_API_BASE_URL, POSTURE_API_URL, --api-url.
		{in: "https://api.example.com", base: "https://api.example.com", api: "https://api.example.com/api/v1"},
		{in: "https://api.example.com/", base: "https://api.example.com", api: "https://api.example.com/api/v1"},
		{in: "https://gw.example.com/posture", base: "https://gw.example.com/posture", api: "https://gw.example.com/posture/api/v1"},
		{in: "https://posture.internal:8443/posture/", base: "https://posture.internal:8443/posture", api: "https://posture.internal:8443/posture/api/v1"},
		{in: "http://127.0.0.1:8080", base: "http://127.0.0.1:8080", api: "http://127.0.0.1:8080/api/v1"},
		{in: restapi.DefaultBaseURL, base: "https://api.posture.dev", api: "https://api.posture.dev/api/v1"},
		// The MCP server: API_BASE_URL, --api-base-url, an MCPServer's apiBaseURL.
		{in: "https://api.posture.dev/api/v1", base: "https://api.posture.dev", api: "https://api.posture.dev/api/v1"},
		{in: "https://api.posture.dev/api/v1/", base: "https://api.posture.dev", api: "https://api.posture.dev/api/v1"},
		{in: " http://proxy/posture/api/v1 ", base: "http://proxy/posture", api: "http://proxy/posture/api/v1"},
		{in: "http://posture-api.posture-system.svc:8080/api/v1", base: "http://posture-api.posture-system.svc:8080", api: "http://posture-api.posture-system.svc:8080/api/v1"},
		// Only a whole trailing /api/v1 segment is the API's.
		{in: "https://x.example/my/api/v1x", base: "https://x.example/my/api/v1x", api: "https://x.example/my/api/v1x/api/v1"},
		{in: "api.example.com", err: "must start with https://"},
		{in: "ftp://x/api/v1", err: "scheme"},
		{in: "https://", err: "no host"},
		{in: "http:///api/v1", err: "no host"},
		{in: "https://u:p@api.example.com", err: "credentials"},
		{in: "https://api.example.com/?x=1", err: "query"},
		{in: "https://api.example.com/api/v1#top", err: "fragment"},
		{in: "https://api.example.com/%zz", err: "not a URL"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			u, err := restapi.ParseBaseURL(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseBaseURL(%q) = %v, %v; want an error saying %q", tc.in, u, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBaseURL(%q): %v", tc.in, err)
			}
			if u.String() != tc.base || restapi.APIRoot(u).String() != tc.api {
				t.Fatalf("ParseBaseURL(%q) = %s (API %s); want %s (API %s)", tc.in, u, restapi.APIRoot(u), tc.base, tc.api)
			}
			// Normalising is idempotent: the base given back is read the same.
			again, err := restapi.ParseBaseURL(u.String())
			if err != nil || again.String() != tc.base {
				t.Fatalf("ParseBaseURL(%q) = %v, %v; want %s again", u, again, err, tc.base)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:s3cret@api.example.com/api/v1": "https://u:xxxxx@api.example.com/api/v1",
		"https://api.example.com":                 "https://api.example.com",
		"api.example.com":                         "api.example.com",
		"https://%zz":                             "https://%zz",
	} {
		if got := restapi.Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
