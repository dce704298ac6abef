package webhook_test

import (
	"net/http"
	"net/http/cookiejar"
	"testing"
)

// TestSessionCookieNeedsTheUIHeader: a request that the UI's session cookie
// authenticates must carry the UI's header, so that another site's form or
// link cannot act with the cookie; only a GET of the two exports, which the
// Findings page offers as links, goes without it.
func TestSessionCookieNeedsTheUIHeader(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	browser, _ := signInUI(t, te, te.emails["demo-viewer"])

	cases := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/api/v1/findings/export?format=csv", http.StatusOK},
		{http.MethodGet, "/api/v1/findings/latest/export?format=ocsf", http.StatusOK},
		{http.MethodGet, "/api/v1/findings", http.StatusForbidden},
		{http.MethodGet, "/api/v1/findings/latest", http.StatusForbidden},
		{http.MethodGet, "/api/v1/tenant", http.StatusForbidden},
		{http.MethodGet, "/api/v1/findings/export/extra", http.StatusForbidden},
		{http.MethodPost, "/api/v1/findings/export?format=csv", http.StatusForbidden},
		{http.MethodPost, "/api/v1/ingestions", http.StatusForbidden},
		{http.MethodDelete, "/ui/session", http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, te.env.URL+c.path, nil)
			res, err := browser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.want {
				t.Errorf("without the UI header = %d, want %d", res.StatusCode, c.want)
			}
		})
	}
}

// signInUI signs email in through the UI's session endpoint, as the page
// does, and returns the browser-like client holding the session cookie and
// its jar.
func signInUI(t *testing.T, te *tenancyEnv, email string) (*http.Client, *cookiejar.Jar) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodPost, te.env.URL+"/ui/session", tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]}))
	req.Header.Set("Content-Type", "application/vnd.api+json")
	req.Header.Set("X-Posture-UI", "1")
	res, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-in of %s = %d", email, res.StatusCode)
	}
	return browser, jar
}
