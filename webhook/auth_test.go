package webhook_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// testClock is a settable time source for token lifetimes.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// tenancyEnv is the API authenticating from custom resources: three tenants
// (demo with an admin and a viewer, other with an admin, nosub without a
// subscription), a generated API key per user, and passwords in Secrets.
type tenancyEnv struct {
	t       *testing.T
	env     *apitest.Env
	k8s     client.Client
	clock   *testClock
	authn   *auth.CRAuthenticator
	jwtNS   string
	tenants map[string]*posturev1.Tenant // demo, other, nosub
	keys    map[string]string            // demo-admin, demo-viewer, other-admin, nosub-admin
	keyObjs map[string]*posturev1.APIKey
	emails  map[string]string // same labels -> email
	pw      map[string]string // email -> password
}

type tenancyOpts struct {
	rate      *webhook.RateLimiter
	maxUpload int64 // the server's default when zero
	// serverClock makes the server (and so the UI session) tell time by
	// the test clock, as the token service does.
	serverClock bool
	// server adjusts the API server before it serves (sign-in guard, log).
	server func(*webhook.Server)
	// keyRecheck is how often the APIKey controller reads key Secrets again
	// (its default when zero).
	keyRecheck time.Duration
	// mute runs the MuteRule controller and gives the admin role
	// mute_findings (the viewer role never has it).
	mute bool
}

func randomSuffix() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func startTenancy(t *testing.T, opts tenancyOpts) *tenancyEnv {
	t.Helper()
	ctx := context.Background()
	k8s, err := client.New(apitest.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	jwtNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "posture-system-"}}
	if err := k8s.Create(ctx, jwtNS); err != nil {
		t.Fatal(err)
	}
	te := &tenancyEnv{
		t: t, k8s: k8s, jwtNS: jwtNS.Name,
		clock:   &testClock{t: time.Now()},
		authn:   &auth.CRAuthenticator{BcryptCost: bcrypt.MinCost},
		tenants: map[string]*posturev1.Tenant{}, keys: map[string]string{}, keyObjs: map[string]*posturev1.APIKey{},
		emails: map[string]string{}, pw: map[string]string{},
	}
	te.env = apitest.Start(t, apitest.Options{
		Auth:   te.authn,
		Tokens: te.authn,
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			te.authn.Reader = mgr.GetClient()
			te.authn.Secrets = mgr.GetAPIReader()
			te.authn.Tokens = &auth.TokenService{
				Keys:  &auth.SecretKeySource{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: jwtNS.Name, Name: "posture-jwt-signing"},
				Now:   te.clock.Now,
				Ended: st.(store.Sessions),
			}
			if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			// The tenant's usage counts the Providers its plan admitted.
			if err := (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			if opts.mute {
				if err := (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(ctx, mgr); err != nil {
					return err
				}
			}
			return (&controllers.APIKeyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
				Recorder: mgr.GetEventRecorder("posture-apikey"), RecheckInterval: opts.keyRecheck}).SetupWithManager(ctx, mgr)
		},
		MaxUploadBytes: opts.maxUpload,
		Server: func(s *webhook.Server) {
			if opts.serverClock {
				s.Now = te.clock.Now
			}
			if opts.rate != nil {
				s.RateLimit = opts.rate
			}
			if opts.server != nil {
				opts.server(s)
			}
		},
	})

	sfx := randomSuffix()
	admin := posturev1.Role{Name: "admin", Permissions: []posturev1.Permission{
		posturev1.PermissionManageIngestions, posturev1.PermissionManageProviders, posturev1.PermissionManageScans,
		posturev1.PermissionManageUsers, posturev1.PermissionManageAccount, posturev1.PermissionManageBilling,
		posturev1.PermissionUnlimitedVisibility,
	}}
	if opts.mute {
		admin.Permissions = append(admin.Permissions, posturev1.PermissionMuteFindings)
	}
	viewer := posturev1.Role{Name: "viewer", Permissions: []posturev1.Permission{posturev1.PermissionUnlimitedVisibility}}
	for _, spec := range []struct {
		label      string
		subscribed bool
		users      []string // roles; user label = tenant-role
	}{
		{"demo", true, []string{"admin", "viewer"}},
		{"other", true, []string{"admin"}},
		{"nosub", false, []string{"admin"}},
	} {
		name := spec.label + "-" + sfx
		ns := "tenant-" + name
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		tn := &posturev1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: posturev1.TenantSpec{
				Subscription: posturev1.Subscription{Active: spec.subscribed, Plan: "test", ProviderLimit: 5},
				Roles:        []posturev1.Role{admin, viewer},
			},
		}
		if !spec.subscribed {
			tn.Spec.Subscription = posturev1.Subscription{}
		}
		for _, role := range spec.users {
			label := spec.label + "-" + role
			email := fmt.Sprintf("%s@%s.example.com", role, name)
			password := "pw-" + randomSuffix() + randomSuffix()
			te.emails[label], te.pw[email] = email, password
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: role + "-password", Namespace: ns},
				StringData: map[string]string{"password": password},
			}
			if err := k8s.Create(ctx, secret); err != nil {
				t.Fatal(err)
			}
			tn.Spec.Users = append(tn.Spec.Users, posturev1.User{Email: email, Role: role,
				PasswordSecretRef: &posturev1.SecretKeyRef{Name: secret.Name, Key: "password"}})
		}
		if err := k8s.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), tn) })
		te.tenants[spec.label] = tn
		for _, role := range spec.users {
			label := spec.label + "-" + role
			te.keys[label], te.keyObjs[label] = te.newKey(ns, role, te.emails[label], nil)
		}
	}
	return te
}

// newKey creates an APIKey and waits for the controller to deliver its key.
func (te *tenancyEnv) newKey(ns, name, user string, mutate func(*posturev1.APIKey)) (string, *posturev1.APIKey) {
	te.t.Helper()
	k := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: posturev1.APIKeySpec{User: user}}
	if mutate != nil {
		mutate(k)
	}
	if err := te.k8s.Create(context.Background(), k); err != nil {
		te.t.Fatal(err)
	}
	var got posturev1.APIKey
	var sec corev1.Secret
	testenv.Eventually(te.t, 30*time.Second, "APIKey "+ns+"/"+name+" to get its key", func() (bool, string) {
		if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(k), &got); err != nil {
			te.t.Fatal(err)
		}
		return got.Status.Hash != "" &&
			te.k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: got.Status.SecretName}, &sec) == nil, fmt.Sprintf("%+v", got.Status)
	})
	return string(sec.Data["api-key"]), &got
}

func (te *tenancyEnv) as(t testing.TB, authorization string) *api {
	return &api{t: t, url: te.env.URL, auth: authorization}
}

func (te *tenancyEnv) key(label string) string { return "Api-Key " + te.keys[label] }

// update changes an object read fresh from the API server, retrying conflicts
// with the controllers' status writes.
func (te *tenancyEnv) update(obj client.Object, change func()) {
	te.t.Helper()
	for range 10 {
		if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			te.t.Fatal(err)
		}
		change()
		err := te.k8s.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			te.t.Fatal(err)
		}
	}
	te.t.Fatalf("could not update %s", obj.GetName())
}

// eventually polls f until it returns "" and returns how long that took.
func eventually(t testing.TB, within time.Duration, what string, f func() string) time.Duration {
	t.Helper()
	start := time.Now()
	testenv.Eventually(t, within, what, func() (bool, string) {
		msg := f()
		return msg == "", msg
	})
	return time.Since(start)
}

func TestAuthStatusCodes(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	demoNS := te.tenants["demo"].NamespaceName()
	revoked, _ := te.newKey(demoNS, "revoked", te.emails["demo-admin"], func(k *posturev1.APIKey) { k.Spec.Revoked = true })
	past := metav1.NewTime(time.Now().Add(-time.Minute))
	expired, _ := te.newKey(demoNS, "expired", te.emails["demo-admin"], func(k *posturev1.APIKey) { k.Spec.ExpiresAt = &past })
	stranger, _ := te.newKey(demoNS, "stranger", "nobody@example.com", nil)
	admin := te.keys["demo-admin"]
	prefix, _, _ := strings.Cut(admin, ".")
	// A key of the right shape whose secret part differs from the issued one.
	forged := prefix + "." + strings.Repeat("A", 43)

	id := accepted(t, te.as(t, te.key("demo-admin")).upload("a.ocsf.json", fixture(t, "aws_3_records.ocsf.json")), 3)
	endpoints := []struct{ method, path string }{
		{http.MethodGet, "/api/v1/ingestions"},
		{http.MethodGet, "/api/v1/ingestions/" + id},
		{http.MethodGet, "/api/v1/ingestions/" + id + "/errors"},
		{http.MethodPost, "/api/v1/ingestions"},
	}
	for _, tc := range []struct {
		name          string
		authorization string
		status        int
		code          string
		detail        string
	}{
		{"missing header", "", 401, "not_authenticated", "not provided"},
		{"wrong scheme", "Basic " + admin, 401, "not_authenticated", "unsupported Authorization scheme"},
		{"API key sent as Bearer", "Bearer " + admin, 401, "not_authenticated", "Api-Key scheme"},
		{"scheme without a value", "Api-Key", 401, "not_authenticated", "malformed Authorization header"},
		{"malformed key", "Api-Key not-a-key", 401, "not_authenticated", "malformed API key"},
		{"unknown key", "Api-Key " + apitest.NewKey(), 401, "not_authenticated", "is not valid"},
		{"known prefix, wrong secret", "Api-Key " + forged, 401, "not_authenticated", "is not valid"},
		{"revoked key", "Api-Key " + revoked, 401, "not_authenticated", "revoked"},
		{"expired key", "Api-Key " + expired, 401, "not_authenticated", "expired"},
		{"key of a user not in the tenant", "Api-Key " + stranger, 401, "not_authenticated", "no longer a user"},
		{"garbage Bearer token", "Bearer abc.def.ghi", 401, "not_authenticated", "token"},
		{"no subscription", te.key("nosub-admin"), 402, "subscription_required", "subscription"},
		{"viewer lacks manage_ingestions", te.key("demo-viewer"), 403, "permission_denied", "manage_ingestions"},
	} {
		for _, ep := range endpoints {
			t.Run(tc.name+" "+ep.method+" "+strings.Replace(ep.path, id, "{id}", 1), func(t *testing.T) {
				a := te.as(t, tc.authorization)
				var r response
				if ep.method == http.MethodPost {
					r = a.upload("a.ocsf.json", fixture(t, "aws_3_records.ocsf.json"))
				} else {
					r = a.get(ep.path, "")
				}
				source := ""
				if tc.status == 401 {
					source = "header:Authorization"
					if r.header.Get("WWW-Authenticate") == "" {
						t.Error("a 401 must carry WWW-Authenticate")
					}
				}
				wantError(t, r, tc.status, tc.code, source, tc.detail)
				if v := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(tc.authorization, "Api-Key"), "Bearer")); len(v) > 12 && strings.Contains(string(r.body), v) {
					t.Error("the response repeats the credential")
				}
			})
		}
	}
	// The control: the admin's key passes everywhere.
	a := te.as(t, te.key("demo-admin"))
	for _, ep := range endpoints[:3] {
		if r := a.get(ep.path, ""); r.status != 200 {
			t.Errorf("admin GET %s: %s", ep.path, r)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	demo, other := te.as(t, te.key("demo-admin")), te.as(t, te.key("other-admin"))
	id := accepted(t, demo.upload("demo.ocsf.json", fixture(t, "aws_3_records.ocsf.json")), 3)
	otherID := accepted(t, other.upload("other.ocsf.json", fixture(t, "aws_3_records.ocsf.json")), 3)

	for _, path := range []string{"/api/v1/ingestions/" + id, "/api/v1/ingestions/" + id + "/errors"} {
		wantError(t, other.get(path, ""), 404, "not_found", "parameter:id")
	}
	if ids := other.list("/api/v1/ingestions", "").ids(); len(ids) != 1 || ids[0] != otherID {
		t.Errorf("other's list = %v, want only its own %s", ids, otherID)
	}
	if ids := demo.list("/api/v1/ingestions", "").ids(); len(ids) != 1 || ids[0] != id {
		t.Errorf("demo's list = %v, want only its own %s", ids, id)
	}
	if got := demo.one("/api/v1/ingestions/"+id, ""); got.Data.ID != id {
		t.Errorf("demo reads its own job: %+v", got.Data)
	}
	// The job was created in the caller's tenant namespace and records who asked.
	var ing posturev1.Ingestion
	if err := te.k8s.Get(context.Background(), types.NamespacedName{Namespace: te.tenants["demo"].NamespaceName(), Name: id}, &ing); err != nil {
		t.Fatal(err)
	}
	if want := te.keyObjs["demo-admin"].Status.Prefix; ing.Spec.RequestedBy.User != te.emails["demo-admin"] || ing.Spec.RequestedBy.APIKeyPrefix != want {
		t.Errorf("requestedBy = %+v, want %s with key %s", ing.Spec.RequestedBy, te.emails["demo-admin"], want)
	}
}

// TestRevocationAndDeletionAreImmediate measures how long a key keeps working
// after it is revoked or deleted.
func TestRevocationAndDeletionAreImmediate(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	ns := te.tenants["demo"].NamespaceName()
	for _, tc := range []struct {
		name   string
		act    func(k *posturev1.APIKey)
		detail string
	}{
		{"revoked", func(k *posturev1.APIKey) { te.update(k, func() { k.Spec.Revoked = true }) }, "revoked"},
		{"deleted", func(k *posturev1.APIKey) {
			if err := te.k8s.Delete(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}, "is not valid"},
		{"expiry moved into the past", func(k *posturev1.APIKey) {
			te.update(k, func() { past := metav1.NewTime(time.Now().Add(-time.Second)); k.Spec.ExpiresAt = &past })
		}, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, obj := te.newKey(ns, "k-"+strings.ReplaceAll(tc.name, " ", "-"), te.emails["demo-admin"], nil)
			a := te.as(t, "Api-Key "+key)
			eventually(t, 10*time.Second, "the new key works", func() string {
				if r := a.get("/api/v1/ingestions", ""); r.status != 200 {
					return r.String()
				}
				return ""
			})
			tc.act(obj)
			took := eventually(t, 5*time.Second, "the key fails", func() string {
				if r := a.get("/api/v1/ingestions", ""); r.status != 401 {
					return r.String()
				}
				return ""
			})
			t.Logf("%s key refused %v after the change", tc.name, took.Round(time.Millisecond))
			wantError(t, a.get("/api/v1/ingestions", ""), 401, "not_authenticated", "header:Authorization", tc.detail)
		})
	}
}

// TestKeyCarriesCurrentRole changes the viewer's role in the Tenant and
// watches the same key gain and lose manage_ingestions.
func TestKeyCarriesCurrentRole(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	viewer := te.as(t, te.key("demo-viewer"))
	wantError(t, viewer.get("/api/v1/ingestions", ""), 403, "permission_denied", "", "manage_ingestions")
	tn := te.tenants["demo"].DeepCopy()
	setViewerRole := func(role string) {
		te.update(tn, func() {
			for i := range tn.Spec.Users {
				if tn.Spec.Users[i].Email == te.emails["demo-viewer"] {
					tn.Spec.Users[i].Role = role
				}
			}
		})
	}
	setViewerRole("admin")
	eventually(t, 5*time.Second, "the promoted viewer may ingest", func() string {
		if r := viewer.get("/api/v1/ingestions", ""); r.status != 200 {
			return r.String()
		}
		return ""
	})
	setViewerRole("viewer")
	eventually(t, 5*time.Second, "the demoted viewer may not", func() string {
		if r := viewer.get("/api/v1/ingestions", ""); r.status != 403 {
			return r.String()
		}
		return ""
	})
	// Losing the subscription turns every key of the tenant to 402 at once.
	te.update(tn, func() { tn.Spec.Subscription.Active = false })
	eventually(t, 5*time.Second, "402 after the subscription ends", func() string {
		if r := te.as(t, te.key("demo-admin")).get("/api/v1/ingestions", ""); r.status != 402 {
			return r.String()
		}
		return ""
	})
	// A user removed from the Tenant: the key is refused.
	te.update(tn, func() {
		tn.Spec.Subscription.Active = true
		tn.Spec.Users = tn.Spec.Users[:1]
	})
	eventually(t, 5*time.Second, "401 after the user is removed", func() string {
		if r := viewer.get("/api/v1/ingestions", ""); r.status != 401 {
			return r.String()
		}
		return ""
	})
	var key posturev1.APIKey
	eventually(t, 10*time.Second, "the removed user's key is not Ready", func() string {
		if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(te.keyObjs["demo-viewer"]), &key); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(key.Status.Conditions, posturev1.ConditionReady); c == nil || c.Reason != controllers.ReasonUserUnknown {
			return fmt.Sprintf("%+v", key.Status.Conditions)
		}
		return ""
	})
}
