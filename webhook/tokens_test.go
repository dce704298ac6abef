package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
)

type tokenDoc struct {
	Data struct {
		Type       string `json:"type"`
		ID         string `json:"id"`
		Attributes struct {
			Access           string `json:"access"`
			Refresh          string `json:"refresh"`
			AccessExpiresAt  string `json:"access_expires_at"`
			RefreshExpiresAt string `json:"refresh_expires_at"`
		} `json:"attributes"`
	} `json:"data"`
	Meta struct {
		Version string `json:"version"`
	} `json:"meta"`
}

func tokensBody(typ string, attrs map[string]string) *bytes.Buffer {
	b, _ := json.Marshal(map[string]any{"data": map[string]any{"type": typ, "attributes": attrs}})
	return bytes.NewBuffer(b)
}

func (te *tenancyEnv) post(t testing.TB, path string, body *bytes.Buffer, contentType string) response {
	return te.as(t, "").request(http.MethodPost, path, body, http.Header{"Content-Type": {contentType}})
}

// signIn asks for a token pair and checks the 200 document.
func (te *tenancyEnv) signIn(t testing.TB, label string) tokenDoc {
	t.Helper()
	email := te.emails[label]
	r := te.post(t, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]}), "application/vnd.api+json")
	return wantTokens(t, r)
}

func wantTokens(t testing.TB, r response) tokenDoc {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("token request: %s", r)
	}
	var d tokenDoc
	decode(t, r, &d)
	if d.Data.Type != "tokens" || d.Meta.Version != "v1" || d.Data.Attributes.Access == "" || d.Data.Attributes.Refresh == "" {
		t.Fatalf("token document = %s", r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("tokens must not be cached: Cache-Control = %q", r.header.Get("Cache-Control"))
	}
	return d
}

func TestTokenSignIn(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	d := te.signIn(t, "demo-admin")
	issued := te.clock.Now().Truncate(time.Second)
	for name, tc := range map[string]struct {
		at   string
		want time.Duration
	}{"access": {d.Data.Attributes.AccessExpiresAt, 30 * time.Minute}, "refresh": {d.Data.Attributes.RefreshExpiresAt, 24 * time.Hour}} {
		exp, err := time.Parse(time.RFC3339, tc.at)
		if err != nil || exp.Sub(issued) != tc.want {
			t.Errorf("%s expires at %q, want issue time + %v", name, tc.at, tc.want)
		}
	}
	// The access token is an HS256 JWT naming the user and tenant.
	parts := strings.Split(d.Data.Attributes.Access, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if !strings.Contains(string(header), `"HS256"`) || !strings.Contains(string(payload), te.emails["demo-admin"]) || !strings.Contains(string(payload), te.tenants["demo"].Name) {
		t.Errorf("access token header %s payload %s", header, payload)
	}

	// Bearer works like the user's API key: same tenant, same permissions.
	bearer := te.as(t, "Bearer "+d.Data.Attributes.Access)
	id := accepted(t, bearer.upload("a.ocsf.json", fixture(t, "aws_3_records.ocsf.json")), 3)
	if got := te.as(t, te.key("demo-admin")).one("/api/v1/ingestions/"+id, ""); got.Data.ID != id {
		t.Errorf("the job uploaded with a token is not in the tenant")
	}
	var ing posturev1.Ingestion
	if err := te.k8s.Get(context.Background(), types.NamespacedName{Namespace: te.tenants["demo"].NamespaceName(), Name: id}, &ing); err != nil {
		t.Fatal(err)
	}
	if ing.Spec.RequestedBy.User != te.emails["demo-admin"] || ing.Spec.RequestedBy.APIKeyPrefix != "" {
		t.Errorf("requestedBy = %+v", ing.Spec.RequestedBy)
	}
	wantError(t, te.as(t, "Bearer "+te.signIn(t, "demo-viewer").Data.Attributes.Access).get("/api/v1/ingestions", ""), 403, "permission_denied", "")
	wantError(t, te.as(t, "Bearer "+te.signIn(t, "nosub-admin").Data.Attributes.Access).get("/api/v1/ingestions", ""), 402, "subscription_required", "")
	wantError(t, te.as(t, "Bearer "+te.signIn(t, "other-admin").Data.Attributes.Access).get("/api/v1/ingestions/"+id, ""), 404, "not_found", "parameter:id")

	// The signing key lives in a Secret the operator generated.
	var sec corev1.Secret
	if err := te.k8s.Get(context.Background(), types.NamespacedName{Namespace: te.jwtNS, Name: "posture-jwt-signing"}, &sec); err != nil {
		t.Fatalf("signing Secret: %v", err)
	}
	if len(sec.Data[auth.SigningKeySecretKey]) < 32 || sec.Labels[posturev1.LabelManagedBy] != posturev1.ManagedByValue {
		t.Errorf("signing Secret: %d key bytes, labels %v", len(sec.Data[auth.SigningKeySecretKey]), sec.Labels)
	}
}

func TestTokenRequestErrors(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	email := te.emails["demo-admin"]
	right := te.pw[email]
	for _, tc := range []struct {
		name        string
		body        string
		contentType string
		status      int
		code        string
		source      string
	}{
		{"wrong password", mustJSON("tokens", map[string]string{"email": email, "password": right + "x"}), "application/vnd.api+json", 401, "not_authenticated", "pointer:/data/attributes"},
		{"unknown email", mustJSON("tokens", map[string]string{"email": "nobody@example.com", "password": right}), "application/vnd.api+json", 401, "not_authenticated", "pointer:/data/attributes"},
		{"another user's password", mustJSON("tokens", map[string]string{"email": te.emails["demo-viewer"], "password": right}), "application/vnd.api+json", 401, "not_authenticated", "pointer:/data/attributes"},
		{"another tenant named", mustJSON("tokens", map[string]string{"email": email, "password": right, "tenant": te.tenants["other"].Name}), "application/vnd.api+json", 401, "not_authenticated", "pointer:/data/attributes"},
		{"missing email", mustJSON("tokens", map[string]string{"password": right}), "application/vnd.api+json", 400, "invalid", "pointer:/data/attributes/email"},
		{"missing password", mustJSON("tokens", map[string]string{"email": email}), "application/vnd.api+json", 400, "invalid", "pointer:/data/attributes/password"},
		{"wrong type", mustJSON("users", map[string]string{"email": email, "password": right}), "application/vnd.api+json", 400, "invalid", "pointer:/data/type"},
		{"no data", `{"email":"x"}`, "application/vnd.api+json", 400, "invalid", "pointer:/data"},
		{"not JSON", `{"data":`, "application/vnd.api+json", 400, "invalid", "*"},
		{"empty body", ``, "application/json", 400, "invalid", "pointer:/data"},
		{"form post", "email=x&password=y", "application/x-www-form-urlencoded", 415, "unsupported_media_type", "header:Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := te.post(t, "/api/v1/tokens", bytes.NewBufferString(tc.body), tc.contentType)
			wantError(t, r, tc.status, tc.code, tc.source)
			if strings.Contains(string(r.body), right) {
				t.Error("the response repeats the password")
			}
		})
	}
	wantError(t, te.as(t, "").get("/api/v1/tokens", ""), 405, "method_not_allowed", "")
	// The right credentials, with the tenant named, still work.
	wantTokens(t, te.post(t, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": strings.ToUpper(email), "password": right, "tenant": te.tenants["demo"].Name}), "application/json"))
}

func mustJSON(typ string, attrs map[string]string) string { return tokensBody(typ, attrs).String() }

func TestTokenLifetimeAndRefresh(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	d := te.signIn(t, "demo-admin")
	access := te.as(t, "Bearer "+d.Data.Attributes.Access)
	refresh := func(token string) response {
		return te.post(t, "/api/v1/tokens/refresh", tokensBody("tokens-refresh", map[string]string{"refresh": token}), "application/vnd.api+json")
	}

	// Tokens are not interchangeable.
	wantError(t, te.as(t, "Bearer "+d.Data.Attributes.Refresh).get("/api/v1/ingestions", ""), 401, "not_authenticated", "header:Authorization", "refresh token")
	wantError(t, refresh(d.Data.Attributes.Access), 401, "not_authenticated", "*", "access token")

	te.clock.Advance(29 * time.Minute)
	if r := access.get("/api/v1/ingestions", ""); r.status != 200 {
		t.Fatalf("access token at 29 minutes: %s", r)
	}
	te.clock.Advance(time.Minute + time.Second)
	wantError(t, access.get("/api/v1/ingestions", ""), 401, "not_authenticated", "header:Authorization", "expired")

	// The refresh token buys one new pair, once.
	next := wantTokens(t, refresh(d.Data.Attributes.Refresh))
	if r := te.as(t, "Bearer "+next.Data.Attributes.Access).get("/api/v1/ingestions", ""); r.status != 200 {
		t.Fatalf("refreshed access token: %s", r)
	}
	wantError(t, refresh(d.Data.Attributes.Refresh), 401, "not_authenticated", "*", "already been used")
	wantError(t, te.post(t, "/api/v1/tokens/refresh", tokensBody("tokens", map[string]string{"refresh": next.Data.Attributes.Refresh}), "application/vnd.api+json"),
		400, "invalid", "pointer:/data/type")
	wantError(t, te.post(t, "/api/v1/tokens/refresh", tokensBody("tokens-refresh", nil), "application/vnd.api+json"),
		400, "invalid", "pointer:/data/attributes/refresh")

	// A refresh token lives 24 hours.
	te.clock.Advance(24*time.Hour + time.Second)
	wantError(t, refresh(next.Data.Attributes.Refresh), 401, "not_authenticated", "*", "expired")
}

func TestTokenRejectedWhenUserLeavesOrAlgorithmForged(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	viewer := te.signIn(t, "demo-viewer")
	admin := te.signIn(t, "demo-admin")

	// alg none and a foreign algorithm over HTTP, with claims copied from a real token.
	parts := strings.Split(admin.Data.Attributes.Access, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	hs512, err := jwt.SigningMethodHS512.Sign(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS512","typ":"JWT"}`))+"."+parts[1], []byte("guessed-key-guessed-key-guessed-key"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"alg none":         none,
		"HS512 forgery":    base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS512","typ":"JWT"}`)) + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(hs512),
		"signature copied": base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS384","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2],
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, te.as(t, "Bearer "+tok).get("/api/v1/ingestions", ""), 401, "not_authenticated", "header:Authorization")
		})
	}

	tn := te.tenants["demo"].DeepCopy()
	te.update(tn, func() { tn.Spec.Users = tn.Spec.Users[:1] })
	bearer := te.as(t, "Bearer "+viewer.Data.Attributes.Access)
	eventually(t, 5*time.Second, "the removed user's token fails", func() string {
		if r := bearer.get("/api/v1/tenant", ""); r.status != 401 {
			return r.String()
		}
		return ""
	})
	wantError(t, te.post(t, "/api/v1/tokens/refresh", tokensBody("tokens-refresh", map[string]string{"refresh": viewer.Data.Attributes.Refresh}), "application/json"),
		401, "not_authenticated", "*", "no longer a user")
	email := te.emails["demo-viewer"]
	wantError(t, te.post(t, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]}), "application/json"),
		401, "not_authenticated", "*", "invalid email or password")
	if r := te.as(t, "Bearer "+admin.Data.Attributes.Access).get("/api/v1/ingestions", ""); r.status != 200 {
		t.Errorf("the remaining admin's token: %s", r)
	}
}

// TestRefreshChainEnds signs a user in, changes something about that user,
// and checks the next refresh is refused, over HTTP against a real API server.
func TestRefreshChainEnds(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	refresh := func(token string) response {
		return te.post(t, "/api/v1/tokens/refresh", tokensBody("tokens-refresh", map[string]string{"refresh": token}), "application/vnd.api+json")
	}
	for _, tc := range []struct {
		name  string
		label string
		// change happens between the sign-in and the refresh; it returns the
		// refresh token to present (the chain may have moved on meanwhile).
		change func(t *testing.T, d tokenDoc) string
		detail string
	}{
		{"password changed", "demo-admin", func(t *testing.T, d tokenDoc) string {
			email := te.emails["demo-admin"]
			te.pw[email] = "new-" + randomSuffix() + randomSuffix()
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: te.tenants["demo"].NamespaceName(), Name: "admin-password"}}
			te.update(sec, func() { sec.Data = map[string][]byte{"password": []byte(te.pw[email])} })
			return d.Data.Attributes.Refresh
		}, "password of"},
		{"user removed", "demo-viewer", func(t *testing.T, d tokenDoc) string {
			tn := te.tenants["demo"].DeepCopy()
			te.update(tn, func() {
				tn.Spec.Users = slices.DeleteFunc(tn.Spec.Users, func(u posturev1.User) bool { return u.Email == te.emails["demo-viewer"] })
			})
			// The authenticator reads Tenants from the manager's cache.
			bearer := te.as(t, "Bearer "+d.Data.Attributes.Access)
			eventually(t, 5*time.Second, "the removed user's access token fails", func() string {
				if r := bearer.get("/api/v1/tenant", ""); r.status != 401 {
					return r.String()
				}
				return ""
			})
			return d.Data.Attributes.Refresh
		}, "no longer a user"},
		{"signed in more than seven days ago", "other-admin", func(t *testing.T, d tokenDoc) string {
			// Refreshing every 23 hours keeps each token alive, but the chain
			// as a whole ends seven days after the sign-in.
			token := d.Data.Attributes.Refresh
			for day := 1; day <= 7; day++ {
				te.clock.Advance(23 * time.Hour)
				next := wantTokens(t, refresh(token))
				token = next.Data.Attributes.Refresh
				exp, err := time.Parse(time.RFC3339, next.Data.Attributes.RefreshExpiresAt)
				if err != nil {
					t.Fatal(err)
				}
				if limit := te.clock.Now().Add(-time.Duration(day) * 23 * time.Hour).Add(7 * 24 * time.Hour); exp.After(limit) {
					t.Fatalf("refresh %d: refresh_expires_at %v is past the sign-in + 7 days (%v)", day, exp, limit)
				}
			}
			te.clock.Advance(23 * time.Hour)
			return token
		}, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := te.signIn(t, tc.label)
			token := tc.change(t, d)
			wantError(t, refresh(token), 401, "not_authenticated", "*", tc.detail)
		})
	}
	// A new sign-in with the new password starts a new chain.
	d := te.signIn(t, "demo-admin")
	wantTokens(t, refresh(d.Data.Attributes.Refresh))
}
