// Package aggregated is the Kubernetes front door of Posture: an aggregated
// API server for data.posture.dev/v1alpha1 that kube-apiserver proxies to
// through an APIService. Kubernetes authenticates and authorizes every
// request (front-proxy headers, TokenReview, SubjectAccessReview), so
// kubectl, ServiceAccounts and RBAC work unchanged. A tenant namespace is
// the tenant. Uploads and finding reads call the same use cases as the REST
// API (internal/uploads, internal/findings).
package aggregated

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/compatibility"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	"github.com/posture-dev/posture/internal/ingestions"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/uploads"
)

// DefaultBindAddress is the aggregated API's port in the manager.
const DefaultBindAddress = ":8443"

// ServiceName is the Service an APIService names to reach the manager; the
// self-signed certificate is valid for it.
const ServiceName = "posture-aggregated-api"

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	must(datav1.AddToScheme(scheme))
	// The generic server decodes list and get options, and writes Status,
	// Table and discovery documents, with these.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	must(metainternalversion.AddToScheme(scheme))
	scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Options configure the aggregated API server.
type Options struct {
	// BindAddress is host:port to serve on (port 0 picks one); ignored
	// when Listener is set.
	BindAddress string
	// Listener, when set, is served instead of binding BindAddress.
	Listener net.Listener
	// CertDir holds tls.crt and tls.key, read again when they change. Empty
	// generates a self-signed certificate in memory for DNSNames (see
	// CABundle).
	CertDir  string
	DNSNames []string
	// Cert, when set, serves the certificate it provides instead of CertDir:
	// the manager's own (servingcert.SecretSource), reread from its Secret
	// and reloaded without a restart when the manager renews it.
	Cert dynamiccertificates.CertKeyContentProvider
	// RESTConfig reaches kube-apiserver for delegated authentication and
	// authorization (TokenReview, SubjectAccessReview, and the
	// extension-apiserver-authentication ConfigMap).
	RESTConfig *restclient.Config
	// Client creates Ingestions and reads Tenants (cache-backed, with the
	// auth.SetupIndexes indexes).
	Client client.Client
	// Store answers the reads of findings, scans and error rows, and
	// stores uploaded reports.
	Store interface {
		store.FindingReads
		store.IngestionErrors
		store.Blobs
	}
	MaxUploadBytes int64
	Log            logr.Logger
}

// Server is the aggregated API server; a manager.Runnable.
type Server struct {
	opts       Options
	generic    *genericapiserver.GenericAPIServer
	caBundle   []byte
	tmpDir     string
	uploads    *uploads.Service
	ingestions *ingestions.Reader
	tenants    tenants
}

// New builds the server; it listens once Start runs.
func New(o Options) (*Server, error) {
	quietClientAborts()
	s := &Server{opts: o,
		uploads:    &uploads.Service{Client: o.Client, Store: o.Store, Log: o.Log.WithName("uploads"), MaxBytes: o.MaxUploadBytes},
		ingestions: &ingestions.Reader{Client: o.Client, Store: o.Store},
		tenants:    tenants{reader: o.Client},
	}
	secure := genericoptions.NewSecureServingOptions().WithLoopback()
	ln := o.Listener
	if ln == nil {
		addr := o.BindAddress
		if addr == "" {
			addr = DefaultBindAddress
		}
		var err error
		// Listening here, not in the generic server, lets a port of 0 pick
		// a free one.
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("aggregated API: listen on %s: %w", addr, err)
		}
	}
	secure.Listener = ln
	secure.BindPort = ln.Addr().(*net.TCPAddr).Port
	switch {
	case o.Cert != nil:
		// Set on the serving config below.
	case o.CertDir != "":
		secure.ServerCert.CertKey.CertFile = filepath.Join(o.CertDir, "tls.crt")
		secure.ServerCert.CertKey.KeyFile = filepath.Join(o.CertDir, "tls.key")
	default:
		// The options default to writing the certificate under the working
		// directory; an empty one keeps it in memory.
		secure.ServerCert.CertDirectory = ""
		if err := secure.MaybeDefaultWithSelfSignedCerts("localhost", o.DNSNames, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
			return nil, fmt.Errorf("generate the aggregated API's self-signed certificate: %w", err)
		}
		// The generated PEM is the serving certificate followed by the CA
		// that signed it: trusting it trusts the CA.
		s.caBundle, _ = secure.ServerCert.GeneratedCert.CurrentCertKeyContent()
	}

	var err error
	if s.tmpDir, err = os.MkdirTemp("", "posture-aggregated-"); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(s.tmpDir, "kubeconfig")
	if err := writeKubeconfig(o.RESTConfig, kubeconfig); err != nil {
		return nil, err
	}
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = kubeconfig
	// Without read access to kube-system/extension-apiserver-authentication
	// the server still starts; it then trusts no front-proxy headers, so
	// every request through kube-apiserver is refused until the RBAC exists.
	authn.TolerateInClusterLookupFailure = true
	authz := genericoptions.NewDelegatingAuthorizationOptions().WithAlwaysAllowPaths("/healthz", "/readyz", "/livez")
	authz.RemoteKubeConfigFile = kubeconfig

	cfg := genericapiserver.NewRecommendedConfig(codecs)
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.36", "", "")
	// The generic server builds the type converter of its resources from
	// OpenAPI definitions, and kube-aggregator merges the documents.
	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Posture data.posture.dev"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Posture data.posture.dev"
	if err := secure.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("aggregated API serving: %w", err)
	}
	if o.Cert != nil {
		cfg.SecureServing.Cert = o.Cert
	}
	if err := authn.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("aggregated API delegated authentication: %w", err)
	}
	if err := authz.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("aggregated API delegated authorization: %w", err)
	}
	// An upload streams a report of up to a gigabyte: the generic server's
	// one-minute timeout for ordinary requests must not cut it off.
	basic := genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString())
	cfg.LongRunningFunc = func(r *http.Request, info *apirequest.RequestInfo) bool {
		return isUpload(info) || basic(r, info)
	}
	var frontProxyCA dynamiccertificates.CAContentProvider
	if rh := cfg.Authentication.RequestHeaderConfig; rh != nil {
		frontProxyCA = rh.CAContentProvider
	}
	cfg.BuildHandlerChainFunc = func(api http.Handler, c *genericapiserver.Config) http.Handler {
		return untilFrontProxyTrusted(genericapiserver.DefaultBuildHandlerChain(s.interceptUploads(withRecordsOption(api)), c), frontProxyCA)
	}
	// No admission plugins, no etcd, no priority-and-fairness state of its
	// own: the server only reads the store and creates Ingestions.
	cfg.FlowControl = nil
	cfg.SharedInformerFactory = nil

	gs, err := cfg.Complete().New("posture-aggregated-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("build the aggregated API server: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(datav1.GroupName, scheme, metav1.ParameterCodec, codecs)
	group.VersionedResourcesStorageMap[datav1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"findings":        &findingStorage{s: s},
		"scans":           &scanStorage{s: s},
		"ingestionerrors": &errorStorage{s: s},
		"uploads":         &uploadStorage{},
	}
	if err := gs.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("install data.posture.dev: %w", err)
	}
	s.generic = gs
	return s, nil
}

// untilFrontProxyTrusted answers 503 with Retry-After to a request that
// presents a client certificate while the front proxy's CA is not loaded.
// The CA comes from kube-system/extension-apiserver-authentication through
// an informer that starts, and syncs, only once the server serves; until
// then kube-apiserver's proxied requests cannot be verified, and the
// generic chain would take them for system:anonymous and answer RBAC's 403
// for a caller who may well be allowed. Callers without a certificate
// (bearer tokens, reviewed by kube-apiserver) pass.
func untilFrontProxyTrusted(next http.Handler, ca dynamiccertificates.CAContentProvider) http.Handler {
	if ca == nil {
		// The lookup failed at start (tolerated): no CA will come, and the
		// generic chain's answer stands.
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && len(ca.CurrentCABundleContent()) == 0 {
			w.Header().Set("Retry-After", "1")
			err := apierrors.NewServiceUnavailable("the aggregated API is starting: it has not yet loaded the front-proxy CA " +
				"from kube-system/extension-apiserver-authentication, so it cannot yet verify requests kube-apiserver proxies; retry")
			responsewriters.ErrorNegotiated(err, codecs, schema.GroupVersion{}, w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// openAPIDefinitions are the served kinds' and the apimachinery types'
// they and the server's own routes (Status, version.Info) refer to, taken
// from apiextensions-apiserver's generated set of the same release.
func openAPIDefinitions(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
	defs := apiextensionsopenapi.GetOpenAPIDefinitions(ref)
	for k, v := range datav1.GetOpenAPIDefinitions(ref) {
		defs[k] = v
	}
	return defs
}

// CABundle is the PEM that verifies the self-signed serving certificate; nil
// when the certificate comes from CertDir.
func (s *Server) CABundle() []byte { return s.caBundle }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	defer os.RemoveAll(s.tmpDir)
	s.opts.Log.Info("serving the aggregated API", "group", datav1.SchemeGroupVersion.String())
	err := s.generic.PrepareRun().RunWithContext(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("aggregated API: %w", err)
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the aggregated API.
func (s *Server) NeedLeaderElection() bool { return false }

// writeKubeconfig writes cfg where the generic server's delegating options
// read their client from. Credentials kept in files stay references to
// those files (an in-cluster token is re-read as it rotates).
func writeKubeconfig(cfg *restclient.Config, path string) error {
	if cfg == nil {
		return errors.New("the aggregated API needs a REST config to reach kube-apiserver")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["k"] = &clientcmdapi.Cluster{
		Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName,
	}
	kc.AuthInfos["k"] = &clientcmdapi.AuthInfo{
		Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
		ClientCertificate: cfg.CertFile, ClientCertificateData: cfg.CertData,
		ClientKey: cfg.KeyFile, ClientKeyData: cfg.KeyData,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["k"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "k"}
	kc.CurrentContext = "k"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write the aggregated API's kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}
