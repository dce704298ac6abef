// Package apitest runs the whole API for tests: a real kube-apiserver and etcd
// (envtest) with the CRDs, a manager running the ingestion controller with the
// in-process executor, a real store, and the REST API served over loopback HTTP.
// Tests of the API, the CLI and the MCP server use it as their backend.
//
//	func TestMain(m *testing.M) { apitest.Main(m) }
//	env := apitest.Start(t, apitest.Options{})
//	env.API().Get(ctx, restapi.PathIngestions, nil)
//	or raw: http.Post(env.URL+"/api/v1/ingestions", ...) with env.Authorization()
package apitest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/pgtest"
	"github.com/posture-dev/posture/internal/store/postgres"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook"
)

var restConfig *rest.Config

// Main starts one control plane for the test binary, runs the tests, and
// stops the control plane (and any throwaway PostgreSQL) afterwards.
func Main(m *testing.M) { MainWith(m) }

// MainWith is Main with options for the control plane (such as an
// AggregatorRoute's).
func MainWith(m *testing.M, opts ...testenv.Option) {
	level := 2 // errors only
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		level = -1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(level))))
	env, cfg, err := testenv.Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restConfig = cfg
	code := m.Run()
	_ = env.Stop()
	pgtest.Stop()
	os.Exit(code)
}

// RESTConfig is the control plane's admin config (for tests that need more).
func RESTConfig() *rest.Config { return restConfig }

// Options tunes an Env.
type Options struct {
	// Postgres selects the PostgreSQL engine (a fresh database on a throwaway
	// server); the default is SQLite in a temp dir.
	Postgres bool
	// Auth replaces the default static key authenticator.
	Auth auth.Authenticator
	// Tokens signs users in and out (the token endpoints); nil answers
	// them 404, as a static key's server does.
	Tokens webhook.TokenIssuer
	// Unsubscribed makes the default principal's tenant lack a subscription.
	Unsubscribed bool
	// Permissions replaces the default principal's (all permissions).
	Permissions    []string
	MaxUploadBytes int64
	// Billing, when set, creates a Tenant object for the env's tenant with this
	// subscription and runs the ingestion controller with billing through
	// Provider objects, as the manager does.
	Billing *posturev1.Subscription
	// BillProviders runs the ingestion controller with billing, as the
	// manager does, for tenants the test declares itself (Billing makes one).
	BillProviders bool
	// Setup runs against the manager before it starts (extra controllers).
	Setup func(ctrl.Manager, store.Store) error
	// Server is called with the API server before it starts serving.
	Server func(*webhook.Server)
	// ReportRetention is the ingestion controller's: zero deletes a report
	// as soon as its ingestion ends, as the manager does by default.
	ReportRetention time.Duration
}

// Env is a running API.
type Env struct {
	URL      string
	Store    store.Store
	StoreDSN string // the SQLite file or PostgreSQL DSN of Store
	// Client is the manager's, whose reads come from its cache and may
	// lag behind the API server; APIReader reads the API server itself,
	// as kubectl does.
	Client    client.Client
	APIReader client.Reader
	Tenant    string
	Namespace string
	// APIKey authenticates as an administrator of Tenant (static key).
	APIKey string
	Server *webhook.Server
}

// Authorization is the header value for APIKey.
func (e *Env) Authorization() string { return "Api-Key " + e.APIKey }

// Ingest stores report in the tenant and runs the worker on it in the test's
// process, as ingestion id: no Job, no controller, and its findings stored
// when Ingest returns.
func (e *Env) Ingest(t testing.TB, id string, report io.Reader) {
	t.Helper()
	ctx := context.Background()
	blob, err := e.Store.PutBlob(ctx, e.Tenant, report)
	if err != nil {
		t.Fatal(err)
	}
	w := &ingest.Worker{Store: e.Store, Log: logr.Discard()}
	if err := w.Run(ctx, ingest.Attempt{Tenant: e.Tenant, IngestionID: id, BlobID: blob.ID, Attempt: 1, ReportSHA256: blob.SHA256}); err != nil {
		t.Fatalf("ingest %s: %v", id, err)
	}
}

// API is a client of the env's API, the one postctl and the MCP server use,
// authenticated as APIKey.
func (e *Env) API() *restapi.Client {
	base, err := restapi.ParseBaseURL(e.URL)
	if err != nil {
		panic(err) // httptest's URL is always a base URL
	}
	c := restapi.New(base, nil, "apitest")
	c.Authorization = e.Authorization()
	return c
}

// Start brings up an API for one test; everything stops when the test ends.
// Its manager watches every namespace (tenants, keys and providers live in
// several), so two Envs must not run at the same time: tests using Start do
// not call t.Parallel.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if restConfig == nil {
		t.Fatal("apitest.Start needs apitest.Main in the package's TestMain")
	}
	ctx, cancel := context.WithCancel(context.Background())

	var st store.Store
	var err error
	var dsn string
	if opts.Postgres {
		dsn = pgtest.FreshDatabase(t)
		st, err = postgres.Open(ctx, dsn)
	} else {
		dsn = filepath.Join(t.TempDir(), "posture.db")
		st, err = sqlite.Open(ctx, dsn)
	}
	if err != nil {
		t.Fatal(err)
	}

	k8s, err := client.New(restConfig, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	tenant := ns.Name

	controllerOptions := controllers.ControllerOptions()
	controllerOptions.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerOptions,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Namespaces: map[string]cache.Config{"default": {}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	worker := &ingest.Worker{Store: st, Log: ctrl.Log.WithName("worker"), ProgressInterval: 20 * time.Millisecond}
	exec, done, err := controllers.NewInProcessExecutor(mgr, worker, 2)
	if err != nil {
		t.Fatal(err)
	}
	var billing *controllers.Billing
	if opts.Billing != nil || opts.BillProviders {
		billing = &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
		if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Billing != nil {
		tenantObj := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Spec: posturev1.TenantSpec{Namespace: tenant, Subscription: *opts.Billing}}
		if err := k8s.Create(ctx, tenantObj); err != nil {
			t.Fatal(err)
		}
	}
	if err := (&controllers.IngestionReconciler{
		Client: mgr.GetClient(), Store: st, Executor: exec, Done: done, Billing: billing,
		Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
		ReportRetention: opts.ReportRetention,
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if opts.Setup != nil {
		if err := opts.Setup(mgr, st); err != nil {
			t.Fatal(err)
		}
	}

	key := NewKey()
	authn := opts.Auth
	if authn == nil {
		perms := auth.AllPermissions()
		if opts.Permissions != nil {
			perms = map[posturev1.Permission]bool{}
			for _, p := range opts.Permissions {
				perms[posturev1.Permission(p)] = true
			}
		}
		authn = auth.StaticKey{KeyHash: auth.HashKey(key), Principal: auth.Principal{
			Tenant: tenant, Namespace: tenant, User: "admin@example.com", KeyPrefix: "pk_test",
			Permissions: perms, Subscribed: !opts.Unsubscribed,
		}}
	}
	api := &webhook.Server{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Store: st, Auth: authn, Tokens: opts.Tokens,
		Log: ctrl.Log.WithName("api"), MaxUploadBytes: opts.MaxUploadBytes,
	}
	if opts.Server != nil {
		opts.Server(api)
	}

	mgrDone := make(chan struct{})
	go func() {
		defer close(mgrDone)
		if err := mgr.Start(ctx); err != nil {
			// A runnable that outlives the grace period is a stop bug; the
			// stacks say which one.
			stacks := make([]byte, 4<<20)
			stacks = stacks[:goruntime.Stack(stacks, true)]
			t.Errorf("manager: %v\ngoroutines:\n%s", err, stacks)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache never synced")
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-mgrDone
		st.Close()
		// The next Env's manager watches every namespace: leave it no
		// unfinished Ingestions whose reports live in this Env's store.
		removeIngestions(t, k8s)
	})
	return &Env{URL: srv.URL, Store: st, StoreDSN: dsn, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Tenant: tenant, Namespace: tenant, APIKey: key, Server: api}
}

func removeIngestions(t testing.TB, c client.Client) {
	t.Helper()
	ctx := context.Background()
	var list posturev1.IngestionList
	if err := c.List(ctx, &list); err != nil {
		t.Errorf("clean up Ingestions: %v", err)
		return
	}
	for i := range list.Items {
		if err := c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Errorf("clean up Ingestion %s/%s: %v", list.Items[i].Namespace, list.Items[i].Name, err)
		}
	}
}

// NewKey returns a key in the API key format (pk_<prefix>.<secret>).
func NewKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	p := make([]byte, 6)
	_, _ = rand.Read(p)
	return "pk_" + base64.RawURLEncoding.EncodeToString(p) + "." + base64.RawURLEncoding.EncodeToString(b)
}
