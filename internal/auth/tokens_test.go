package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// clock is a settable time source for lifetime tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T) (*TokenService, *clock, []byte) {
	t.Helper()
	key := make([]byte, 64)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	return &TokenService{Keys: StaticKeySource(key), Now: c.Now}, c, key
}

func TestTokenLifetimes(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newService(t)
	pair, err := s.Issue(ctx, Session{Tenant: "demo", User: "admin@demo.test", PasswordBinding: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := pair.AccessExpiresAt.Sub(c.Now()); got != 30*time.Minute {
		t.Errorf("access lifetime = %v, want 30m", got)
	}
	if got := pair.RefreshExpiresAt.Sub(c.Now()); got != 24*time.Hour {
		t.Errorf("refresh lifetime = %v, want 24h", got)
	}
	steps := []struct {
		at            time.Duration // since issue
		access, fresh bool          // still valid?
	}{
		{0, true, true},
		{29*time.Minute + 59*time.Second, true, true},
		{30 * time.Minute, false, true},
		{23*time.Hour + 59*time.Minute, false, true},
		{24 * time.Hour, false, false},
	}
	start := c.Now()
	for _, st := range steps {
		c.t = start.Add(st.at)
		claims, err := s.Verify(ctx, pair.Access, TokenAccess)
		if (err == nil) != st.access {
			t.Errorf("access token at +%v: err = %v, want valid=%v", st.at, err, st.access)
		}
		if err == nil && (claims.Subject != "admin@demo.test" || claims.Tenant != "demo") {
			t.Errorf("claims = %+v", claims)
		}
		if _, err := s.Verify(ctx, pair.Refresh, TokenRefresh); (err == nil) != st.fresh {
			t.Errorf("refresh token at +%v: err = %v, want valid=%v", st.at, err, st.fresh)
		}
	}
	c.t = start.Add(31 * time.Minute)
	_, err = s.Verify(ctx, pair.Access, TokenAccess)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired access token must say so, got %v", err)
	}
}

func TestTokenTypesAreNotInterchangeable(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newService(t)
	pair, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, pair.Refresh, TokenAccess); err == nil {
		t.Error("a refresh token was accepted as an access token")
	}
	if _, err := s.Redeem(ctx, pair.Access); err == nil {
		t.Error("an access token was redeemed as a refresh token")
	}
}

func TestRefreshTokenSingleUse(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newService(t)
	pair, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Redeem(ctx, pair.Refresh); err != nil {
		t.Fatalf("first redemption: %v", err)
	}
	if _, err := s.Redeem(ctx, pair.Refresh); err == nil || !strings.Contains(err.Error(), "already been used") {
		t.Fatalf("second redemption: err = %v, want already used", err)
	}
	// Spent ids are forgotten once the token could not be used anyway.
	other, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b"})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(25 * time.Hour)
	if _, err := s.Redeem(ctx, other.Refresh); err == nil {
		t.Fatal("an expired refresh token was redeemed")
	}
	s.mu.Lock()
	n := len(s.used)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d spent ids kept after their tokens expired", n)
	}
}

// forge builds a token with any header and claims, signed by sign.
func forge(t *testing.T, header map[string]any, claims map[string]any, sign func(signingInput string) []byte) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign(input))
}

func TestTokenAlgorithmIsPinned(t *testing.T) {
	ctx := context.Background()
	s, c, key := newService(t)
	now := c.Now()
	claims := map[string]any{
		"iss": "posture", "aud": []string{"posture-api"}, "sub": "admin@demo.test", "tenant": "demo",
		"token_type": "access", "jti": "x1", "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	hmacWith := func(m jwt.SigningMethod, k []byte) func(string) []byte {
		return func(in string) []byte {
			sig, err := m.Sign(in, k)
			if err != nil {
				t.Fatal(err)
			}
			return sig
		}
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The control: the same claims, HS256 with the real key, are accepted.
	good := forge(t, map[string]any{"alg": "HS256", "typ": "JWT"}, claims, hmacWith(jwt.SigningMethodHS256, key))
	if _, err := s.Verify(ctx, good, TokenAccess); err != nil {
		t.Fatalf("the control token was refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"alg none, empty signature", forge(t, map[string]any{"alg": "none", "typ": "JWT"}, claims, func(string) []byte { return nil })},
		{"alg None, empty signature", forge(t, map[string]any{"alg": "None"}, claims, func(string) []byte { return nil })},
		{"alg none with the HS256 signature", forge(t, map[string]any{"alg": "none"}, claims, hmacWith(jwt.SigningMethodHS256, key))},
		{"HS384 with the real key", forge(t, map[string]any{"alg": "HS384"}, claims, hmacWith(jwt.SigningMethodHS384, key))},
		{"HS512 with the real key", forge(t, map[string]any{"alg": "HS512"}, claims, hmacWith(jwt.SigningMethodHS512, key))},
		{"RS256 with an attacker's key", forge(t, map[string]any{"alg": "RS256"}, claims, func(in string) []byte {
			sig, err := jwt.SigningMethodRS256.Sign(in, rsaKey)
			if err != nil {
				t.Fatal(err)
			}
			return sig
		})},
		{"RS256 header, HMAC-signed with the real key (confusion)", forge(t, map[string]any{"alg": "RS256"}, claims, hmacWith(jwt.SigningMethodHS256, key))},
		{"ES256 with an attacker's key", forge(t, map[string]any{"alg": "ES256"}, claims, func(in string) []byte {
			sig, err := jwt.SigningMethodES256.Sign(in, ecKey)
			if err != nil {
				t.Fatal(err)
			}
			return sig
		})},
		{"HS256 with another key", forge(t, map[string]any{"alg": "HS256"}, claims, hmacWith(jwt.SigningMethodHS256, []byte("not-the-server-key-not-the-server-key")))},
		{"tampered claims", func() string {
			parts := strings.Split(good, ".")
			c2 := map[string]any{}
			for k, v := range claims {
				c2[k] = v
			}
			c2["tenant"] = "other"
			b, _ := json.Marshal(c2)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		}()},
		{"wrong issuer", forge(t, map[string]any{"alg": "HS256"}, with(claims, "iss", "someone-else"), hmacWith(jwt.SigningMethodHS256, key))},
		{"wrong audience", forge(t, map[string]any{"alg": "HS256"}, with(claims, "aud", []string{"other-api"}), hmacWith(jwt.SigningMethodHS256, key))},
		{"no expiry", forge(t, map[string]any{"alg": "HS256"}, with(claims, "exp", nil), hmacWith(jwt.SigningMethodHS256, key))},
		{"issued in the future", forge(t, map[string]any{"alg": "HS256"}, with(claims, "iat", now.Add(time.Hour).Unix()), hmacWith(jwt.SigningMethodHS256, key))},
		{"not a JWT", "definitely-not-a-jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Verify(ctx, tc.token, TokenAccess); err == nil {
				t.Fatal("accepted")
			} else if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T %v must be an *Error (a 401)", err, err)
			}
		})
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for kk, vv := range m {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// TestSessionMaxAge follows a chain refreshed every 23 hours: each refresh
// token carries the first sign-in's time, and none works, nor is issued, past
// MaxSessionAge after it.
func TestSessionMaxAge(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		every  time.Duration
		want   int // refreshes granted before the chain ends
	}{
		{"default seven days", 0, 23 * time.Hour, 7},
		{"two days", 48 * time.Hour, 23 * time.Hour, 2},
		{"an hour", time.Hour, 20 * time.Minute, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, _ := newService(t)
			s.MaxSessionAge = tc.maxAge
			signIn := c.Now()
			pair, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b"})
			if err != nil {
				t.Fatal(err)
			}
			end := signIn.Add(s.maxSessionAge())
			granted := 0
			for {
				if pair.RefreshExpiresAt.After(end) || pair.AccessExpiresAt.After(end) {
					t.Fatalf("after %d refreshes a pair expires at %v/%v, past the session's end %v", granted, pair.AccessExpiresAt, pair.RefreshExpiresAt, end)
				}
				c.Advance(tc.every)
				claims, err := s.Redeem(ctx, pair.Refresh)
				if err != nil {
					if !c.Now().Before(end) {
						break
					}
					t.Fatalf("refresh %d at +%v, before the session's end: %v", granted+1, c.Now().Sub(signIn), err)
				}
				if !claims.AuthTime.Time.Equal(signIn) {
					t.Fatalf("refresh %d: auth_time %v, want the sign-in's %v", granted+1, claims.AuthTime.Time, signIn)
				}
				if pair, err = s.Issue(ctx, Session{Tenant: claims.Tenant, User: claims.Subject, AuthTime: claims.AuthTime.Time, PasswordBinding: claims.PasswordBinding}); err != nil {
					if !c.Now().Before(end) {
						break
					}
					t.Fatalf("issue after refresh %d: %v", granted+1, err)
				}
				granted++
				if granted > 100 {
					t.Fatal("the chain never ends")
				}
			}
			if granted != tc.want {
				t.Errorf("%d refreshes granted, want %d", granted, tc.want)
			}
		})
	}
}

func TestRedeemRefusesUnboundTokens(t *testing.T) {
	ctx := context.Background()
	s, c, key := newService(t)
	now := c.Now()
	base := map[string]any{
		"iss": "posture", "aud": []string{"posture-api"}, "sub": "a@b.test", "tenant": "demo",
		"token_type": "refresh", "jti": "r1", "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"auth_time": now.Unix(), "pwb": "b", "sid": "s1",
	}
	sign := func(in string) []byte {
		sig, err := jwt.SigningMethodHS256.Sign(in, key)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		ok     bool
	}{
		{"bound", base, true},
		{"no auth_time (issued before chains were bounded)", with(base, "auth_time", nil), false},
		{"no password binding", with(base, "pwb", nil), false},
		{"no session (issued before sign-out ended sessions)", with(base, "sid", nil), false},
		{"signed in eight days ago", with(base, "auth_time", now.Add(-8*24*time.Hour).Unix()), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := forge(t, map[string]any{"alg": "HS256", "typ": "JWT"}, with(tc.claims, "jti", tc.name), sign)
			_, err := s.Redeem(ctx, tok)
			if (err == nil) != tc.ok {
				t.Fatalf("redeem: err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if _, isAuth := err.(*Error); !isAuth || !strings.Contains(err.Error(), "sign in again") {
					t.Errorf("error %T %v must be an *Error asking to sign in again", err, err)
				}
			}
		})
	}
}

// TestEndEndsTheWholeSession: ending a session with either of its tokens
// refuses both, and every pair refreshed from them; another sign-in of the
// same user lives on; a token that is not valid ends nothing.
func TestEndEndsTheWholeSession(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		with func(p TokenPair) string
	}{
		{"with the access token", func(p TokenPair) string { return p.Access }},
		{"with the refresh token", func(p TokenPair) string { return p.Refresh }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newService(t)
			first, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b"})
			if err != nil {
				t.Fatal(err)
			}
			claims, err := s.Redeem(ctx, first.Refresh)
			if err != nil {
				t.Fatal(err)
			}
			refreshed, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b", AuthTime: claims.AuthTime.Time, ID: claims.SessionID})
			if err != nil {
				t.Fatal(err)
			}
			elsewhere, err := s.Issue(ctx, Session{Tenant: "demo", User: "a@b.test", PasswordBinding: "b"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.End(ctx, tc.with(first)); err != nil {
				t.Fatalf("End: %v", err)
			}
			for _, tok := range []struct{ name, token, typ string }{
				{"the access token", first.Access, TokenAccess},
				{"the refreshed access token", refreshed.Access, TokenAccess},
				{"the refreshed refresh token", refreshed.Refresh, TokenRefresh},
			} {
				if _, err := s.Verify(ctx, tok.token, tok.typ); err == nil || !strings.Contains(err.Error(), "signed out") {
					t.Errorf("%s after sign-out: %v, want refused as signed out", tok.name, err)
				}
			}
			if _, err := s.Redeem(ctx, refreshed.Refresh); err == nil {
				t.Error("a refresh of the ended session was granted")
			}
			if _, err := s.Verify(ctx, elsewhere.Access, TokenAccess); err != nil {
				t.Errorf("another sign-in of the same user: %v", err)
			}
			if _, err := s.End(ctx, "not.a.token"); err == nil {
				t.Error("a malformed token ended a session")
			}
		})
	}
}
