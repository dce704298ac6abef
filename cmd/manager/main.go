// Command manager runs the Posture operator: the controllers (leader-elected),
// the REST API on every replica, and optionally the in-process ingestion
// executor. `manager worker` runs one ingestion attempt and exits; it is what
// the Job executor's pods run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	// The images hold a static binary and no CA bundle: when the system has
	// no roots, TLS to a report URL, a database or an API falls back to the
	// Mozilla roots compiled in.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/metricsauth"
	"github.com/posture-dev/posture/internal/servingcert"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/engines"
	"github.com/posture-dev/posture/internal/uploads"
	"github.com/posture-dev/posture/internal/workercmd"
	"github.com/posture-dev/posture/webhook"
	"github.com/posture-dev/posture/webhook/aggregated"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workercmd.Main(os.Args[2:]))
	}
	os.Exit(runManager(os.Args[1:]))
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type managerFlags struct {
	tenantDataGrace                 time.Duration
	apiAddr, probeAddr, metricsAddr string
	// aggregatedAddr and aggregatedCertDir serve data.posture.dev.
	aggregatedAddr, aggregatedCertDir string
	leaderElect                       bool
	leaderElectionNamespace           string
	executor                          string
	workers                           int
	storeDriver, storeDSN             string
	maxUploadBytes                    int64
	shutdownDrain                     time.Duration
	job                               controllers.WorkerJobConfig
	jobOwner                          string
	staticTenant, staticNamespace     string
	rateLimit                         float64
	rateBurst                         int
	jwtNamespace, jwtSecret           string
	sessionMaxAge                     time.Duration
	signIn                            *webhook.SignInGuard
	pollInterval                      time.Duration
	ingestBatchSize                   int
	ingestRecordsPerSecond            float64
	reportRetention, stalledUpload    time.Duration
	mcp                               controllers.MCPServerDefaults
	apiTLSCertFile, apiTLSKeyFile     string
	metricsCertDir                    string
	access                            controllers.TenantAccess
	podConfig                         string
	sources                           sources.Options
	aggregatedCert                    aggregatedCertFlags
}

// aggregatedCertFlags: the manager issues and renews the aggregated API's
// serving certificate itself when secret is set (installs without
// cert-manager).
type aggregatedCertFlags struct {
	secret, namespace, service, apiService string
}

func runManager(args []string) int {
	f, opts, err := parseManagerFlags(args)
	if err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(opts)))
	log := ctrl.Log.WithName("setup")
	if err := serve(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), f, log); err != nil {
		log.Error(err, "manager stopped")
		return 1
	}
	return 0
}

func parseManagerFlags(args []string) (managerFlags, *zap.Options, error) {
	f := managerFlags{signIn: &webhook.SignInGuard{}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&f.apiAddr, "api-bind-address", ":8080", "Address of the REST API.")
	fs.StringVar(&f.aggregatedAddr, "aggregated-api-bind-address", aggregated.DefaultBindAddress, "Address of the aggregated API (data.posture.dev, HTTPS, reached through kube-apiserver by an APIService); 0 disables.")
	fs.StringVar(&f.aggregatedCertDir, "aggregated-api-cert-dir", "", "Directory holding tls.crt and tls.key of the aggregated API, reloaded when they change (default: a self-signed certificate generated in memory).")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "Address of Prometheus metrics, served over HTTPS to callers the API server authenticates and authorizes (get on /metrics); 0 disables.")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "Directory holding tls.crt and tls.key of the metrics server (default: a self-signed certificate).")
	fs.StringVar(&f.apiTLSCertFile, "api-tls-cert-file", "", "PEM certificate (chain) of the REST API; with --api-tls-key-file the API serves HTTPS only. Reloaded when the file changes.")
	fs.StringVar(&f.apiTLSKeyFile, "api-tls-key-file", "", "PEM private key of --api-tls-cert-file.")
	fs.StringVar(&f.access.ClusterRole, "tenant-access-role", controllers.DefaultTenantAccessRole, "ClusterRole the manager binds to its ServiceAccount in each tenant namespace (Secrets, Deployments, Services there).")
	fs.StringVar(&f.access.ServiceAccount, "service-account", env("POD_SERVICE_ACCOUNT", ""), "The manager's ServiceAccount, bound to --tenant-access-role in tenant namespaces; empty binds nothing (a manager running with admin rights).")
	fs.StringVar(&f.access.ServiceAccountNamespace, "service-account-namespace", env("POD_NAMESPACE", "posture-system"), "Namespace of --service-account.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader so only one replica runs controllers.")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod's).")
	fs.StringVar(&f.executor, "executor", env("POSTURE_EXECUTOR", "inprocess"), "Where ingestions run: job (a batch/v1 Job each) or inprocess.")
	fs.IntVar(&f.workers, "workers", 2, "In-process executor: ingestions parsed at once.")
	fs.IntVar(&f.ingestBatchSize, "ingest-batch-size", 0, "In-process executor: records written per store transaction (0: the store's preferred size).")
	fs.Float64Var(&f.ingestRecordsPerSecond, "ingest-records-per-second", 0, "In-process executor: paces each ingestion to this many records a second, to watch or test crash recovery locally; 0 does not pace.")
	fs.StringVar(&f.storeDriver, "store-driver", env("POSTURE_STORE_DRIVER", "sqlite"), "Store engine: sqlite or postgres.")
	fs.StringVar(&f.storeDSN, "store-dsn", "", "SQLite file path or PostgreSQL DSN (default: env POSTURE_STORE_DSN).")
	fs.Int64Var(&f.maxUploadBytes, "max-upload-bytes", webhook.DefaultMaxUploadBytes, "Largest accepted report; larger uploads get 413.")
	fs.DurationVar(&f.sources.URLTimeout, "ingestion-url-timeout", time.Minute, "Ingestions with spec.source.url: how long one fetch of the report may take, body included.")
	fs.BoolVar(&f.sources.AllowLoopback, "ingestion-url-allow-loopback", false, "Ingestions with spec.source.url: allow loopback addresses (127.0.0.0/8, ::1). For a single-machine setup only; link-local and metadata addresses stay refused.")
	fs.IntVar(&f.sources.URLFetchesPerTenant, "ingestion-url-fetches-per-tenant", sources.DefaultURLFetchesPerTenant, "Ingestions with spec.source.url: how many of one tenant's URLs are read at once; the others wait their turn. URLs are read in the background, never in a reconcile.")
	fs.DurationVar(&f.sources.Wait, "ingestion-source-wait", 2*time.Minute, "Ingestions with a configMapRef, secretRef or url source: how long after creation a missing object or an unreachable URL is retried before the ingestion fails.")
	fs.DurationVar(&f.shutdownDrain, "shutdown-drain", webhook.DefaultShutdownDrain, "On SIGTERM, how long API requests in flight (uploads) may run on before they are cut off with 503; keep it below the pod's terminationGracePeriodSeconds.")
	fs.DurationVar(&f.pollInterval, "poll-interval", time.Second, "How often progress is mirrored into Ingestion status while processing.")
	fs.DurationVar(&f.reportRetention, "report-retention", 0, "How long an uploaded report is kept after its ingestion ends (completed or failed); 0 deletes it at once. Findings are kept either way.")
	fs.DurationVar(&f.tenantDataGrace, "tenant-data-grace-period", controllers.DefaultTenantDataGracePeriod, "How long a deleted Tenant's findings, scans, runs, error rows and reports stay in the store before they are deleted (the Tenant waits, with a finalizer); 0 deletes them at once.")
	fs.DurationVar(&f.stalledUpload, "stalled-upload-timeout", 15*time.Minute, "An upload that writes nothing for this long (its client or process is gone) is deleted by a sweep that runs every few minutes; at least 5m.")
	fs.StringVar(&f.mcp.Image, "mcp-image", env("POSTURE_MCP_IMAGE", ""), "MCPServer: the image every MCP server runs.")
	fs.StringVar(&f.mcp.APIBaseURL, "mcp-api-base-url", env("POSTURE_MCP_API_BASE_URL", "http://posture-api."+env("POD_NAMESPACE", "posture-system")+".svc/api/v1"), "MCPServer: API address ({base_url}/api/v1) used when spec.apiBaseURL is empty; always allowed.")
	allowedMCPURLs := env("POSTURE_MCP_ALLOWED_API_BASE_URLS", "")
	fs.StringVar(&allowedMCPURLs, "mcp-allowed-api-base-urls", allowedMCPURLs, "MCPServer: comma-separated API addresses spec.apiBaseURL may name besides --mcp-api-base-url; others get no Deployment.")
	fs.StringVar(&f.job.Namespace, "job-namespace", env("POD_NAMESPACE", "posture-system"), "Job executor: namespace of worker Jobs.")
	fs.StringVar(&f.job.Image, "job-image", env("POSTURE_WORKER_IMAGE", ""), "Job executor: worker image (the manager's own).")
	fs.StringVar(&f.podConfig, "pod-config", "", "YAML file with worker: and mcpServer: sections (image, imagePullPolicy, imagePullSecrets, nodeSelector, tolerations, affinity, topologySpreadConstraints, priorityClassName, resources, podLabels, podAnnotations; worker also extraEnv, extraVolumes, extraVolumeMounts) for the pods the manager creates. Unknown keys are an error.")
	fs.StringVar(&f.jobOwner, "job-owner-deployment", "", "Job executor: the manager's Deployment (in --job-namespace), made the owner of every worker Job so that deleting it deletes them; empty: Jobs have no owner.")
	fs.StringVar(&f.job.StoreSecret, "job-store-secret", "posture-store", "Job executor: Secret holding the store DSN.")
	fs.StringVar(&f.job.StoreSecretKey, "job-store-secret-key", "dsn", "Job executor: key of the DSN in that Secret.")
	fs.StringVar(&f.staticTenant, "static-tenant", "", "Authenticate POSTURE_STATIC_API_KEY as an administrator of this tenant.")
	fs.StringVar(&f.staticNamespace, "static-tenant-namespace", "", "Namespace of --static-tenant (default tenant-<name>).")
	fs.Float64Var(&f.rateLimit, "rate-limit", webhook.DefaultRateLimit, "Requests per second allowed per API key or user (429 past it); 0 disables.")
	fs.IntVar(&f.rateBurst, "rate-burst", webhook.DefaultRateBurst, "Requests a key may send at once before --rate-limit applies.")
	fs.StringVar(&f.jwtNamespace, "jwt-secret-namespace", env("POD_NAMESPACE", "posture-system"), "Namespace of the Secret holding the JWT signing key (generated if absent).")
	fs.StringVar(&f.jwtSecret, "jwt-secret-name", "posture-jwt-signing", "Name of the Secret holding the JWT signing key (generated if absent).")
	fs.DurationVar(&f.sessionMaxAge, "session-max-age", auth.DefaultMaxSessionAge, "How long refresh tokens keep working after a password sign-in, however often they are refreshed; then the user signs in again.")
	fs.Float64Var(&f.signIn.FailuresPerMinute, "sign-in-failures-per-minute", webhook.DefaultSignInFailuresPerMinute, "Failed sign-ins allowed per minute per client address and per email, once --sign-in-failure-burst is spent (429 past it).")
	fs.IntVar(&f.signIn.FailureBurst, "sign-in-failure-burst", webhook.DefaultSignInFailureBurst, "Failed sign-ins allowed in a row per client address and per email.")
	fs.IntVar(&f.signIn.Concurrency, "sign-in-concurrency", 0, "Passwords checked (bcrypt) at once; more sign-ins wait up to a second, then get 429 (default: half the CPUs Go uses, at least 1).")
	fs.BoolVar(&f.signIn.TrustForwardedFor, "trust-forwarded-for", false, "Count sign-in failures against the last X-Forwarded-For address, for an API reached only through a reverse proxy that sets it.")
	fs.StringVar(&f.aggregatedCert.secret, "aggregated-api-cert-secret", "", "Secret (in --aggregated-api-cert-namespace) in which the manager keeps a self-signed CA and the aggregated API's serving certificate, renews them, and sets the APIService's caBundle; the aggregated API serves from it. Empty: the certificate comes from elsewhere (cert-manager).")
	fs.StringVar(&f.aggregatedCert.namespace, "aggregated-api-cert-namespace", env("POD_NAMESPACE", "posture-system"), "Namespace of --aggregated-api-cert-secret and of the aggregated API's Service.")
	fs.StringVar(&f.aggregatedCert.service, "aggregated-api-service", "posture-aggregated-api", "Service the APIService routes to: the serving certificate is issued for its DNS names.")
	fs.StringVar(&f.aggregatedCert.apiService, "aggregated-api-apiservice", servingcert.DefaultAPIServiceName, "APIService whose caBundle the manager keeps equal to its CA.")
	opts := zap.Options{}
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return f, nil, err
	}
	var err error
	if f.mcp.AllowedAPIBaseURLs, err = controllers.ParseAPIBaseURLs(allowedMCPURLs); err != nil {
		err = fmt.Errorf("--mcp-allowed-api-base-urls: %w", err)
		fmt.Fprintln(fs.Output(), err)
		return f, nil, err
	}
	if f.storeDSN == "" {
		f.storeDSN = os.Getenv("POSTURE_STORE_DSN")
	}
	if f.podConfig != "" {
		pods, err := controllers.LoadPodConfig(f.podConfig)
		if err != nil {
			err = fmt.Errorf("--pod-config: %w", err)
			fmt.Fprintln(fs.Output(), err)
			return f, nil, err
		}
		f.job.Pod, f.mcp.Pod = pods.Worker, pods.MCPServer
	}
	f.job.StoreDriver = f.storeDriver
	if f.reportRetention < 0 {
		err := fmt.Errorf("--report-retention %s: want 0 or more", f.reportRetention)
		fmt.Fprintln(fs.Output(), err)
		return f, nil, err
	}
	if f.stalledUpload < minStalledUpload {
		err := fmt.Errorf("--stalled-upload-timeout %s: want at least %s", f.stalledUpload, minStalledUpload)
		fmt.Fprintln(fs.Output(), err)
		return f, nil, err
	}
	if f.aggregatedCert.secret != "" && f.aggregatedCertDir != "" {
		err := errors.New("--aggregated-api-cert-secret and --aggregated-api-cert-dir exclude each other: the manager issues the certificate, or it comes from the directory")
		fmt.Fprintln(fs.Output(), err)
		return f, nil, err
	}
	if (f.apiTLSCertFile == "") != (f.apiTLSKeyFile == "") {
		err := errors.New("--api-tls-cert-file and --api-tls-key-file go together")
		fmt.Fprintln(fs.Output(), err)
		return f, nil, err
	}
	return f, &opts, nil
}

func serve(ctx context.Context, cfg *rest.Config, f managerFlags, log logr.Logger) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(posturev1.AddToScheme(scheme))

	st, err := engines.Open(ctx, f.storeDriver, f.storeDSN)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// Metrics name tenants and their volumes: only callers the API server
		// authenticates and authorizes (nonResourceURL /metrics, get) see them.
		Metrics: metricsserver.Options{
			BindAddress:    f.metricsAddr,
			SecureServing:  true,
			CertDir:        f.metricsCertDir,
			FilterProvider: metricsauth.Filter,
		},
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "manager.posture.dev",
		LeaderElectionNamespace: f.leaderElectionNamespace,
		// Hand the lease over as the pod stops (rolling upgrade, drain,
		// uninstall and install again) rather than make the next leader
		// wait out its 15 s: the lease is released only once every
		// controller has stopped, and the process exits right after.
		LeaderElectionReleaseOnCancel: true,
		// The API drains for --shutdown-drain, then needs a moment to answer
		// what it cut off; the rest stops within the margin.
		GracefulShutdownTimeout: ptr.To(f.shutdownDrain + 10*time.Second),
		// Worker Jobs live only in the operator namespace: cache them there alone.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Namespaces: map[string]cache.Config{f.job.Namespace: {}}},
		}},
		// Secrets, Deployments and Services are never cached: the manager may
		// read them only in its own and in tenant namespaces, so a cluster-wide
		// informer would be refused (docs/decisions/0004-manager-rbac.md).
		Client:     controllers.ClientOptions(),
		Controller: controllers.ControllerOptions(),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	controllers.RegisterMetrics(mgr.GetClient())

	var (
		executor controllers.Executor
		done     <-chan event.TypedGenericEvent[*posturev1.Ingestion]
	)
	switch f.executor {
	case "inprocess":
		worker := &ingest.Worker{Store: st, Log: ctrl.Log.WithName("worker"),
			BatchSize: f.ingestBatchSize, RecordsPerSecond: f.ingestRecordsPerSecond}
		executor, done, err = controllers.NewInProcessExecutor(mgr, worker, f.workers)
		if err != nil {
			return err
		}
	case "job":
		if f.job.Image == "" && f.job.Pod.Image == "" {
			return errors.New("the job executor needs --job-image (or POSTURE_WORKER_IMAGE, or worker.image in --pod-config)")
		}
		if f.storeDriver == "sqlite" {
			return errors.New("the job executor needs a store its pods can reach: use --store-driver postgres")
		}
		f.job.ImagePullPolicy = corev1.PullIfNotPresent
		executor = &controllers.JobExecutor{Client: mgr.GetClient(), Config: f.job, OwnerDeployment: f.jobOwner, Reader: mgr.GetAPIReader()}
	default:
		return fmt.Errorf("unknown --executor %q: use job or inprocess", f.executor)
	}

	authn, tokens, err := authenticator(ctx, f, mgr, st)
	if err != nil {
		return err
	}
	// Only the CR authenticator signs users in: a static key has no users.
	staticKey := tokens == nil
	var billing *controllers.Billing
	if !staticKey {
		// A static key's tenant has no Tenant object to bill against.
		billing = &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	}
	if err := (&controllers.TenantReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("posture-tenant"),
		Access: f.access, Store: st, DataGracePeriod: f.tenantDataGrace,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up tenant controller: %w", err)
	}
	if err := (&controllers.APIKeyReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("posture-apikey"),
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up apikey controller: %w", err)
	}
	if err := (&controllers.MCPServerReconciler{
		Client: mgr.GetClient(), Defaults: f.mcp, Recorder: mgr.GetEventRecorder("posture-mcpserver"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up mcpserver controller: %w", err)
	}
	if err := (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up provider controller: %w", err)
	}
	if err := (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up muterule controller: %w", err)
	}

	if err := (&controllers.IngestionReconciler{
		Client:          mgr.GetClient(),
		Store:           st,
		Executor:        executor,
		Recorder:        mgr.GetEventRecorder("posture-ingestion"),
		PollInterval:    f.pollInterval,
		Done:            done,
		Billing:         billing,
		ReportRetention: f.reportRetention,
		Sources:         withUploadLimit(f.sources, f.maxUploadBytes),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up ingestion controller: %w", err)
	}
	janitor, ok := st.(store.Janitor)
	if !ok {
		return fmt.Errorf("the %s store cannot sweep stalled uploads", f.storeDriver)
	}
	if err := mgr.Add(&uploads.Sweeper{
		Store: janitor, StalledAfter: f.stalledUpload, Interval: min(f.stalledUpload/3, 5*time.Minute),
		Log: ctrl.Log.WithName("upload-sweeper"),
	}); err != nil {
		return err
	}

	// The aggregated API's certificate: the manager's own when
	// --aggregated-api-cert-secret is set (the leader renews it, every
	// replica serves it from the Secret), else --aggregated-api-cert-dir.
	var aggregatedCert dynamiccertificates.CertKeyContentProvider
	if f.aggregatedCert.secret != "" {
		rotator := aggregatedCertRotator(mgr.GetClient(), f.aggregatedCert)
		if err := mgr.Add(rotator); err != nil {
			return err
		}
		aggregatedCert = &servingcert.SecretSource{
			Reader: mgr.GetAPIReader(), Namespace: rotator.Namespace, SecretName: rotator.SecretName,
			Bootstrap: rotator.CreateIfMissing, Log: ctrl.Log.WithName("aggregated-api-cert"),
		}
	}

	api := &webhook.Server{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Store:          st,
		Auth:           authn,
		Tokens:         tokens,
		RateLimit:      webhook.NewRateLimiter(f.rateLimit, f.rateBurst),
		Log:            ctrl.Log.WithName("api"),
		Addr:           f.apiAddr,
		MaxUploadBytes: f.maxUploadBytes,
		ShutdownDrain:  f.shutdownDrain,
		TLSCertFile:    f.apiTLSCertFile,
		TLSKeyFile:     f.apiTLSKeyFile,
		SignIn:         f.signIn,
	}
	if err := mgr.Add(api); err != nil {
		return err
	}
	if f.aggregatedAddr != "0" {
		if staticKey {
			// The aggregated API finds a namespace's Tenant through these
			// indexes; a static key's setup skipped them (and has no Tenant
			// objects, so every namespace answers 404 there).
			if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
				return err
			}
		}
		agg, err := aggregated.New(aggregated.Options{
			BindAddress: f.aggregatedAddr, CertDir: f.aggregatedCertDir, Cert: aggregatedCert,
			DNSNames:   aggregatedDNSNames(f.aggregatedCert),
			RESTConfig: cfg, Client: mgr.GetClient(), Store: st, MaxUploadBytes: f.maxUploadBytes,
			Log: ctrl.Log.WithName("aggregated-api"),
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(agg); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("api", api.Ready); err != nil {
		return err
	}
	log.Info("starting manager", "executor", executor.Name(), "store", f.storeDriver, "api", f.apiAddr, "apiTLS", f.apiTLSCertFile != "")
	return mgr.Start(ctx)
}

// authenticator is the CR authenticator (APIKeys and JWTs of Tenant users),
// which also issues the JWTs, unless --static-tenant and
// POSTURE_STATIC_API_KEY ask for one static key: an override for
// single-tenant installs without Tenant objects, which issues no tokens.
func authenticator(ctx context.Context, f managerFlags, mgr ctrl.Manager, st store.Store) (auth.Authenticator, webhook.TokenIssuer, error) {
	key := os.Getenv("POSTURE_STATIC_API_KEY")
	if f.staticTenant != "" || key != "" {
		if f.staticTenant == "" || key == "" {
			return nil, nil, errors.New("a static key needs both --static-tenant and POSTURE_STATIC_API_KEY")
		}
		ns := f.staticNamespace
		if ns == "" {
			ns = "tenant-" + f.staticTenant
		}
		return auth.StaticKey{
			KeyHash: auth.HashKey(key),
			Principal: auth.Principal{
				Tenant: f.staticTenant, Namespace: ns, User: "static-key",
				KeyPrefix: keyPrefix(key), Permissions: auth.AllPermissions(), Subscribed: true,
			},
		}, nil, nil
	}
	if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, nil, err
	}
	keys := &auth.SecretKeySource{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: f.jwtNamespace, Name: f.jwtSecret}
	if err := mgr.Add(keys); err != nil {
		return nil, nil, err
	}
	// Sign-outs go to the store, which every replica reads.
	ended, ok := st.(store.Sessions)
	if !ok {
		return nil, nil, fmt.Errorf("the %s store cannot record sign-outs", f.storeDriver)
	}
	cr := &auth.CRAuthenticator{
		Reader:  mgr.GetClient(),
		Secrets: mgr.GetAPIReader(),
		Tokens:  &auth.TokenService{Keys: keys, MaxSessionAge: f.sessionMaxAge, Ended: ended},
	}
	return cr, cr, nil
}

// aggregatedDNSNames are the names of the aggregated API's Service;
// kube-aggregator checks the first.
func aggregatedDNSNames(f aggregatedCertFlags) []string {
	svc := f.service + "." + f.namespace
	return []string{svc + ".svc", svc + ".svc.cluster.local", svc, f.service}
}

func aggregatedCertRotator(c client.Client, f aggregatedCertFlags) *servingcert.Rotator {
	return &servingcert.Rotator{
		Client:      c,
		Namespace:   f.namespace,
		SecretName:  f.secret,
		APIServices: []string{f.apiService},
		Policy:      servingcert.Policy{DNSNames: aggregatedDNSNames(f)},
		Log:         ctrl.Log.WithName("aggregated-api-cert"),
	}
}

// minStalledUpload keeps the sweep well clear of uploads in progress, which
// record activity once a minute.
const minStalledUpload = 5 * time.Minute

func keyPrefix(key string) string {
	if p, _, ok := strings.Cut(key, "."); ok {
		return p
	}
	return ""
}

// withUploadLimit caps declared reports at the upload limit: a report from a
// ConfigMap, Secret or URL is never larger than one the API would accept.
func withUploadLimit(o sources.Options, maxUpload int64) sources.Options {
	o.MaxBytes = maxUpload
	return o
}
