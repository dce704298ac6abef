package webhook_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/webhook"
)

// TestSignOutEndsTheSession: sign-out ends the session on the server, on
// every replica: a copy of the UI's cookie taken before, and the access and
// refresh tokens inside it, stop working on the replica that signed out and
// on another one sharing the store, which keeps sign-outs.
func TestSignOutEndsTheSession(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	// A second replica: its own token service (its own memory of spent
	// refresh tokens), the same signing key and store.
	otherAuth := &auth.CRAuthenticator{Reader: te.env.Client, Secrets: te.env.APIReader, Tokens: &auth.TokenService{
		Keys:  &auth.SecretKeySource{Client: te.env.Client, Reader: te.env.APIReader, Namespace: te.jwtNS, Name: "posture-jwt-signing"},
		Ended: te.env.Store.(store.Sessions),
	}}
	other := &webhook.Server{
		Client: te.env.Client, APIReader: te.env.APIReader, Store: te.env.Store, Log: testLog(t),
		Auth: otherAuth, Tokens: otherAuth,
	}
	otherSrv := httptest.NewServer(other.Handler())
	t.Cleanup(otherSrv.Close)
	replicas := map[string]string{"the replica signed out on": te.env.URL, "another replica": otherSrv.URL}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	email := te.emails["demo-viewer"]
	session := func(method string) int {
		t.Helper()
		req, _ := http.NewRequest(method, te.env.URL+"/ui/session", tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]}))
		req.Header.Set("Content-Type", "application/vnd.api+json")
		req.Header.Set("X-Posture-UI", "1")
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := session(http.MethodPost); code != http.StatusNoContent {
		t.Fatalf("sign-in = %d", code)
	}
	base, _ := url.Parse(te.env.URL)
	var copied string
	for _, ck := range jar.Cookies(base) {
		if ck.Name == "posture_session" {
			copied = ck.Value
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(copied)
	if err != nil {
		t.Fatalf("the session cookie %q: %v", copied, err)
	}
	var tokens struct {
		Access  string `json:"a"`
		Refresh string `json:"r"`
	}
	if err := json.Unmarshal(raw, &tokens); err != nil || tokens.Access == "" || tokens.Refresh == "" {
		t.Fatalf("the session cookie holds no token pair: %s", raw)
	}

	uses := []struct {
		name string
		do   func(base string) int
	}{
		{"a copy of the cookie", func(base string) int {
			req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/tenant", nil)
			req.Header.Set("X-Posture-UI", "1")
			req.AddCookie(&http.Cookie{Name: "posture_session", Value: copied})
			return status(t, req)
		}},
		{"its access token as a Bearer token", func(base string) int {
			req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/tenant", nil)
			req.Header.Set("Authorization", "Bearer "+tokens.Access)
			return status(t, req)
		}},
	}
	for name, base := range replicas {
		for _, u := range uses {
			if code := u.do(base); code != http.StatusOK {
				t.Fatalf("before sign-out, %s on %s = %d, want 200", u.name, name, code)
			}
		}
	}

	if code := session(http.MethodDelete); code != http.StatusNoContent {
		t.Fatalf("sign-out = %d", code)
	}
	uses = append(uses, struct {
		name string
		do   func(base string) int
	}{"its refresh token", func(base string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/tokens/refresh", tokensBody("tokens-refresh", map[string]string{"refresh": tokens.Refresh}))
		req.Header.Set("Content-Type", "application/vnd.api+json")
		return status(t, req)
	}})
	for name, base := range replicas {
		for _, u := range uses {
			t.Run(u.name+" on "+name, func(t *testing.T) {
				if code := u.do(base); code != http.StatusUnauthorized {
					t.Errorf("after sign-out = %d, want 401", code)
				}
			})
		}
	}

	// The user signs in again: a new session, not the one that ended.
	if code := session(http.MethodPost); code != http.StatusNoContent {
		t.Fatalf("sign-in after sign-out = %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, te.env.URL+"/api/v1/tenant", nil)
	req.Header.Set("X-Posture-UI", "1")
	if res, err := browser.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a new sign-in after sign-out: %v %v", res, err)
	}
}

func status(t *testing.T, req *http.Request) int {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
