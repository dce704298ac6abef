package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/webhook"
)

func TestGetTenant(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	demo := te.tenants["demo"]
	for _, uid := range []string{"111111111111", "222222222222"} {
		p := &posturev1.Provider{
			ObjectMeta: metav1.ObjectMeta{Name: "aws-" + uid, Namespace: demo.NamespaceName()},
			Spec:       posturev1.ProviderSpec{Type: "aws", UID: uid},
		}
		if err := te.k8s.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	type usage struct {
		active          bool
		plan            string
		limit, count    float64
		remaining       any
		ingestAllowed   bool
		permissionCount int
	}
	for _, tc := range []struct {
		label string
		want  usage
	}{
		{"demo-admin", usage{true, "test", 5, 2, 3.0, true, 7}},
		{"demo-viewer", usage{true, "test", 5, 2, 3.0, false, 1}},
		{"other-admin", usage{true, "test", 5, 0, 5.0, true, 7}},
		// Without a subscription the tenant is still readable: that is how a
		// client learns why it gets 402 elsewhere.
		{"nosub-admin", usage{false, "", 0, 0, nil, true, 7}},
	} {
		t.Run(tc.label, func(t *testing.T) {
			a := te.as(t, te.key(tc.label))
			var d resourceDoc
			eventually(t, 5*time.Second, "provider usage", func() string {
				d = a.one("/api/v1/tenant", "")
				if d.Data.Attributes["providers"].(map[string]any)["count"] != tc.want.count {
					return "count " + strconv.Quote(string(mustMarshal(d.Data.Attributes)))
				}
				return ""
			})
			attrs := d.Data.Attributes
			sub := attrs["subscription"].(map[string]any)
			prov := attrs["providers"].(map[string]any)
			user := attrs["user"].(map[string]any)
			perms, _ := user["permissions"].([]any)
			hasIngest := false
			for _, p := range perms {
				hasIngest = hasIngest || p == "manage_ingestions"
			}
			tenantLabel := tc.label[:len(tc.label)-len("-admin")]
			if tc.label == "demo-viewer" {
				tenantLabel = "demo"
			}
			if d.Data.Type != "tenants" || d.Data.ID != te.tenants[tenantLabel].Name || attrs["namespace"] != te.tenants[tenantLabel].NamespaceName() ||
				sub["active"] != tc.want.active || sub["plan"] != tc.want.plan || sub["provider_limit"] != tc.want.limit ||
				prov["limit"] != tc.want.limit || prov["remaining"] != tc.want.remaining ||
				user["email"] != te.emails[tc.label] || hasIngest != tc.want.ingestAllowed || len(perms) != tc.want.permissionCount {
				t.Errorf("GET /api/v1/tenant = %s", mustMarshal(d.Data))
			}
		})
	}
	a := te.as(t, "")
	wantError(t, a.get("/api/v1/tenant", ""), 401, "not_authenticated", "header:Authorization")
	wantError(t, te.as(t, te.key("demo-admin")).get("/api/v1/tenant", "x=1"), 400, "invalid", "parameter:x")
	wantError(t, te.as(t, te.key("demo-admin")).request(http.MethodPost, "/api/v1/tenant", nil, nil), 405, "method_not_allowed", "")
}

func TestRateLimit(t *testing.T) {
	clock := &testClock{t: time.Now()}
	limiter := webhook.NewRateLimiter(1, 3)
	limiter.Now = clock.Now
	te := startTenancy(t, tenancyOpts{rate: limiter})
	admin, other := te.as(t, te.key("demo-admin")), te.as(t, te.key("other-admin"))
	for i := range 3 {
		if r := admin.get("/api/v1/ingestions", ""); r.status != 200 {
			t.Fatalf("request %d within the burst: %s", i+1, r)
		}
	}
	r := admin.get("/api/v1/ingestions", "")
	wantError(t, r, 429, "rate_limited", "", "1 requests per second", "bursts of 3")
	if ra := r.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1", ra)
	}
	// Limits are per key; and a limited key is limited everywhere.
	if r := other.get("/api/v1/ingestions", ""); r.status != 200 {
		t.Errorf("another key is limited too: %s", r)
	}
	wantError(t, admin.get("/api/v1/tenant", ""), 429, "rate_limited", "")
	// Unauthenticated requests are refused as 401, never counted against a key.
	wantError(t, te.as(t, "Api-Key "+te.keys["demo-admin"]+"x").get("/api/v1/ingestions", ""), 401, "not_authenticated", "*")
	clock.Advance(time.Second)
	if r := admin.get("/api/v1/ingestions", ""); r.status != 200 {
		t.Fatalf("after a second one more request is allowed: %s", r)
	}
	wantError(t, admin.get("/api/v1/ingestions", ""), 429, "rate_limited", "")

	// A user's tokens share one bucket, and guessing passwords is limited per email.
	email := te.emails["other-admin"]
	for i := range 3 {
		r := te.post(t, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": email, "password": "wrong"}), "application/json")
		if r.status != 401 {
			t.Fatalf("attempt %d: %s", i+1, r)
		}
	}
	r = te.post(t, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]}), "application/json")
	wantError(t, r, 429, "rate_limited", "")
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
}

func TestRateLimiterRefills(t *testing.T) {
	clock := &testClock{t: time.Now()}
	l := webhook.NewRateLimiter(10, 5)
	l.Now = clock.Now
	for i := range 5 {
		if _, ok := l.Allow("k"); !ok {
			t.Fatalf("request %d refused within the burst", i+1)
		}
	}
	wait, ok := l.Allow("k")
	if ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("sixth request: ok=%v wait=%v, want refused with a wait of at most 100ms", ok, wait)
	}
	clock.Advance(wait)
	if _, ok := l.Allow("k"); !ok {
		t.Fatal("refused after waiting as told")
	}
	if _, ok := l.Allow("other"); !ok {
		t.Fatal("another key shares the bucket")
	}
	if webhook.NewRateLimiter(0, 10) != nil {
		t.Fatal("a zero rate must turn limiting off")
	}
	var off *webhook.RateLimiter
	if _, ok := off.Allow("k"); !ok {
		t.Fatal("a nil limiter must allow everything")
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
