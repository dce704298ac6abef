package auth_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook"
)

// captured holds every log line of the test process, at every verbosity:
// the first logger set wins, so TestMain sets this one before apitest.Main.
var captured = &logCapture{}

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.New(&captureSink{c: captured}))
	apitest.Main(m)
}

type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (c *logCapture) add(s string) {
	c.mu.Lock()
	c.lines = append(c.lines, s)
	c.mu.Unlock()
}

func (c *logCapture) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// captureSink records each call as text, including names, values and errors,
// at every V level, and passes errors on to stderr.
type captureSink struct {
	c      *logCapture
	name   string
	values []any
}

func (s *captureSink) Init(logr.RuntimeInfo) {}
func (s *captureSink) Enabled(int) bool      { return true }
func (s *captureSink) Info(level int, msg string, kv ...any) {
	s.c.add(fmt.Sprintf("V(%d) %s: %s %v", level, s.name, msg, append(append([]any{}, s.values...), kv...)))
}
func (s *captureSink) Error(err error, msg string, kv ...any) {
	line := fmt.Sprintf("ERROR %s: %s: %v %v", s.name, msg, err, append(append([]any{}, s.values...), kv...))
	s.c.add(line)
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		fmt.Fprintln(os.Stderr, line)
	}
}
func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	return &captureSink{c: s.c, name: s.name, values: append(append([]any{}, s.values...), kv...)}
}
func (s *captureSink) WithName(n string) logr.LogSink {
	return &captureSink{c: s.c, name: s.name + "/" + n, values: s.values}
}

// TestNoKeyMaterialAnywhere walks a key, a password and tokens through every
// path that logs or records something — generation, successful and refused
// requests, an ingestion, sign-in, refresh, revocation — then searches every
// log line, event and custom resource for them.
func TestNoKeyMaterialAnywhere(t *testing.T) {
	ctx := context.Background()
	k8s, err := client.New(apitest.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	authn := &auth.CRAuthenticator{BcryptCost: bcrypt.MinCost}
	env := apitest.Start(t, apitest.Options{
		Auth:   authn,
		Tokens: authn,
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			authn.Reader, authn.Secrets = mgr.GetClient(), mgr.GetAPIReader()
			authn.Tokens = &auth.TokenService{Keys: &auth.SecretKeySource{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: "default", Name: "leak-test-jwt"}}
			if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("posture-tenant")}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			if err := (&controllers.APIKeyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("posture-apikey")}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			if err := (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			return nil
		},
		Server: func(s *webhook.Server) { s.RateLimit = webhook.NewRateLimiter(100, 100) },
	})

	// A tenant (reusing the harness's namespace) with a password user and a key.
	ns := env.Namespace
	password := "Leak-Test-Password-" + apitest.NewKey()[3:11]
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-password", Namespace: ns},
		StringData: map[string]string{"password": password}}); err != nil {
		t.Fatal(err)
	}
	email := "admin@leak.example.com"
	tn := &posturev1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: env.Tenant},
		Spec: posturev1.TenantSpec{
			Namespace:    ns,
			Subscription: posturev1.Subscription{Active: true, ProviderLimit: 5},
			Roles:        []posturev1.Role{{Name: "admin", Permissions: []posturev1.Permission{posturev1.PermissionManageIngestions}}},
			Users:        []posturev1.User{{Email: email, Role: "admin", PasswordSecretRef: &posturev1.SecretKeyRef{Name: "admin-password"}}},
		},
	}
	if err := k8s.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), tn) })
	apiKey := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns}, Spec: posturev1.APIKeySpec{User: email}}
	if err := k8s.Create(ctx, apiKey); err != nil {
		t.Fatal(err)
	}
	var key string
	waitUntil(t, "the key is delivered", func() bool {
		var s corev1.Secret
		if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ci-api-key"}, &s) != nil {
			return false
		}
		key = string(s.Data["api-key"])
		return key != ""
	})
	prefix, secretPart, _ := strings.Cut(key, ".")

	call := func(method, path, authorization, contentType string, body io.Reader) (int, []byte) {
		req, _ := http.NewRequest(method, env.URL+path, body)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var responses [][]byte
	expect := func(want int, method, path, authorization, contentType string, body io.Reader) []byte {
		t.Helper()
		got, b := call(method, path, authorization, contentType, body)
		if got != want {
			t.Fatalf("%s %s: %d %s; want %d", method, path, got, b, want)
		}
		responses = append(responses, b)
		return b
	}
	waitUntil(t, "the key authenticates", func() bool {
		code, _ := call(http.MethodGet, "/api/v1/ingestions", "Api-Key "+key, "", nil)
		return code == 200
	})

	// Refused requests carrying the key or parts of it.
	last := "A"
	if key[len(key)-1] == 'A' {
		last = "B"
	}
	mangled := key[:len(key)-1] + last
	for _, a := range []string{"Bearer " + key, "Api-Key " + mangled, "Api-Key " + key + "!", "Basic " + key, "Api-Key " + secretPart, "Api-Key " + prefix + "." + secretPart[:20]} {
		expect(401, http.MethodGet, "/api/v1/ingestions", a, "", nil)
	}
	// An upload and its processing.
	report, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "leak.ocsf.json")
	_, _ = fw.Write(report)
	_ = mw.Close()
	var created struct{ Data struct{ ID string } }
	_ = json.Unmarshal(expect(202, http.MethodPost, "/api/v1/ingestions", "Api-Key "+key, mw.FormDataContentType(), &form), &created)
	waitUntil(t, "the ingestion completes", func() bool {
		var ing posturev1.Ingestion
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: created.Data.ID}, &ing) == nil && ing.Status.Phase == posturev1.IngestionCompleted
	})

	// Sign-in, a wrong password, refresh, and the tokens in use.
	body := func(typ string, attrs map[string]string) io.Reader {
		b, _ := json.Marshal(map[string]any{"data": map[string]any{"type": typ, "attributes": attrs}})
		return bytes.NewReader(b)
	}
	expect(401, http.MethodPost, "/api/v1/tokens", "", "application/json", body("tokens", map[string]string{"email": email, "password": password + "x"}))
	var pair struct {
		Data struct {
			Attributes struct{ Access, Refresh string }
		}
	}
	_ = json.Unmarshal(expect(200, http.MethodPost, "/api/v1/tokens", "", "application/json", body("tokens", map[string]string{"email": email, "password": password})), &pair)
	expect(200, http.MethodGet, "/api/v1/ingestions", "Bearer "+pair.Data.Attributes.Access, "", nil)
	expect(401, http.MethodGet, "/api/v1/ingestions", "Bearer "+pair.Data.Attributes.Refresh, "", nil)
	var next struct {
		Data struct {
			Attributes struct{ Access, Refresh string }
		}
	}
	_ = json.Unmarshal(expect(200, http.MethodPost, "/api/v1/tokens/refresh", "", "application/json", body("tokens-refresh", map[string]string{"refresh": pair.Data.Attributes.Refresh})), &next)
	expect(401, http.MethodPost, "/api/v1/tokens/refresh", "", "application/json", body("tokens-refresh", map[string]string{"refresh": pair.Data.Attributes.Refresh}))

	// Revocation and the refused key afterwards.
	waitUntil(t, "the key is revoked", func() bool {
		var cur posturev1.APIKey
		if k8s.Get(ctx, client.ObjectKeyFromObject(apiKey), &cur) != nil {
			return false
		}
		cur.Spec.Revoked = true
		return k8s.Update(ctx, &cur) == nil
	})
	waitUntil(t, "the revoked key fails", func() bool {
		code, _ := call(http.MethodGet, "/api/v1/ingestions", "Api-Key "+key, "", nil)
		return code == 401
	})
	// What the controllers do about the revocation is done once the key's
	// status records it for the generation that revoked it.
	waitUntil(t, "the controller records the revocation", func() bool {
		var cur posturev1.APIKey
		return k8s.Get(ctx, client.ObjectKeyFromObject(apiKey), &cur) == nil && cur.Status.RevokedAt != nil &&
			cur.Status.ObservedGeneration == cur.Generation
	})

	var signing corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "leak-test-jwt"}, &signing); err != nil {
		t.Fatal(err)
	}
	signingKey := signing.Data[auth.SigningKeySecretKey]
	needles := map[string]string{
		"API key":                   key,
		"API key secret part":       secretPart,
		"password":                  password,
		"access token":              pair.Data.Attributes.Access,
		"refresh token":             pair.Data.Attributes.Refresh,
		"refreshed access token":    next.Data.Attributes.Access,
		"refreshed refresh token":   next.Data.Attributes.Refresh,
		"signing key (base64)":      base64.StdEncoding.EncodeToString(signingKey),
		"signing key (raw, 16 B)":   string(signingKey[:16]),
		"mangled key secret part":   mangled[len(prefix)+1:],
		"access token signature":    pair.Data.Attributes.Access[strings.LastIndexByte(pair.Data.Attributes.Access, '.')+1:],
		"password (base64, Secret)": base64.StdEncoding.EncodeToString([]byte(password)),
	}

	haystacks := map[string]string{}
	for i, l := range captured.all() {
		haystacks[fmt.Sprintf("log line %d", i)] = l
	}
	for i, b := range responses {
		if !bytes.Contains(b, []byte(`"access"`)) { // token responses carry tokens by design
			haystacks[fmt.Sprintf("response %d", i)] = string(b)
		}
	}
	var evs eventsv1.EventList
	if err := k8s.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	var coreEvs corev1.EventList
	if err := k8s.List(ctx, &coreEvs); err != nil {
		t.Fatal(err)
	}
	for _, list := range []client.ObjectList{&evs, &coreEvs, &posturev1.TenantList{}, &posturev1.APIKeyList{}, &posturev1.IngestionList{}, &posturev1.ProviderList{}} {
		if err := k8s.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(list)
		haystacks[fmt.Sprintf("%T", list)] = string(b)
	}
	// The Secret holding the key: its metadata only (the data is the delivery).
	var keySecret corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ci-api-key"}, &keySecret); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(keySecret.ObjectMeta)
	haystacks["key Secret metadata"] = string(meta)

	for where, hay := range haystacks {
		for what, needle := range needles {
			if needle != "" && strings.Contains(hay, needle) {
				t.Errorf("%s found in %s", what, where)
			}
		}
	}

	// The scan looked at real material: the logs have the API's lines, the
	// events name the key by its prefix, and the APIKey holds its hash.
	all := strings.Join(captured.all(), "\n")
	for _, want := range []string{"signed in", "ingestion accepted", email} {
		if !strings.Contains(all, want) {
			t.Errorf("the captured log has no %q: the capture does not see the process's logs", want)
		}
	}
	if !strings.Contains(haystacks[fmt.Sprintf("%T", &evs)], prefix) {
		t.Errorf("no event names the key's prefix %s", prefix)
	}
	if !strings.Contains(haystacks[fmt.Sprintf("%T", &posturev1.APIKeyList{})], auth.HashKey(key)) {
		t.Error("the APIKey does not carry the key's hash")
	}
	t.Logf("scanned %d log lines, %d events, %d responses", len(captured.all()), len(evs.Items)+len(coreEvs.Items), len(responses))
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, what, func() (bool, string) { return cond(), "not yet" })
}
