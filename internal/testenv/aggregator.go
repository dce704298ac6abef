package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The aggregated API is routed to a manager on this machine, not in a
// cluster: kube-apiserver refuses loopback Endpoints, so the route is
// built from parts it does accept.
//
//   - Dialing: kube-aggregator dials an APIService's backend through the
//     egress selector's cluster dialer. The cluster egress is an HTTP CONNECT
//     proxy on a Unix socket; the route answers every CONNECT and pipes the
//     tunnel to the manager's local port. Nothing is sent to the ClusterIP.
//   - Availability is judged from EndpointSlices, which nothing mirrors here:
//     the route creates one with a documentation address (never dialed).
//   - Identity: front-proxy flags make kube-apiserver present a client
//     certificate and pass the caller in X-Remote-* headers; the aggregated
//     server trusts them through extension-apiserver-authentication.

// Names of the objects AggregatorRoute.Register creates.
const (
	AggregatedAPIGroup    = "data.posture.dev"
	AggregatedAPIVersion  = "v1alpha1"
	AggregatedServiceName = "posture-aggregated-api"
	aggregatedPortName    = "https"
	// unroutedAddress is TEST-NET-1 (RFC 5737): an EndpointSlice address
	// that marks the Service available and is never dialed.
	unroutedAddress = "192.0.2.10"
	// frontProxyName is the common name of kube-apiserver's proxy client
	// certificate, the only one the backend accepts X-Remote-* headers from.
	frontProxyName = "front-proxy-client"
)

// AggregatorRoute is everything a control plane needs to reach a local
// aggregated API server: front-proxy certificates, an egress selector
// configuration, the CONNECT proxy on its Unix socket, and a serving
// certificate for the backend with the CA that verifies it.
type AggregatorRoute struct {
	// Dir holds the files (certificates, egress configuration, socket).
	Dir string
	// ServingCertDir holds tls.crt and tls.key for the aggregated server,
	// valid for the Service's DNS names.
	ServingCertDir string
	// CABundle verifies the serving certificate (the APIService's caBundle).
	CABundle []byte
	// Namespace is where Register puts the Service.
	Namespace string

	backend atomic.Value // string, host:port
	ln      net.Listener
	wg      sync.WaitGroup
}

// NewAggregatorRoute writes the route's files under dir (a temporary
// directory when empty; a Unix socket path must stay short) and starts the
// CONNECT proxy. Its backend is set with SetBackend.
func NewAggregatorRoute(dir, namespace string) (*AggregatorRoute, error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "pagg"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r := &AggregatorRoute{Dir: dir, ServingCertDir: filepath.Join(dir, "serving"), Namespace: namespace}
	r.backend.Store("")

	proxyCA, err := newCA("posture front-proxy CA")
	if err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := proxyCA.issue(frontProxyName, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	servingCA, err := newCA("posture aggregated API CA")
	if err != nil {
		return nil, err
	}
	svc := AggregatedServiceName + "." + namespace + ".svc"
	servingCert, servingKey, err := servingCA.issue(svc, []string{svc, svc + ".cluster.local", "localhost"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	r.CABundle = servingCA.certPEM
	if err := os.MkdirAll(r.ServingCertDir, 0o700); err != nil {
		return nil, err
	}
	egress := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, r.socket())
	for name, data := range map[string][]byte{
		"front-proxy-ca.crt":     proxyCA.certPEM,
		"front-proxy-client.crt": proxyCert,
		"front-proxy-client.key": proxyKey,
		"egress-selector.yaml":   []byte(egress),
		"serving/tls.crt":        servingCert,
		"serving/tls.key":        servingKey,
		"serving/ca.crt":         servingCA.certPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	_ = os.Remove(r.socket())
	if r.ln, err = net.Listen("unix", r.socket()); err != nil {
		return nil, fmt.Errorf("listen on the egress socket %s: %w", r.socket(), err)
	}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *AggregatorRoute) socket() string { return filepath.Join(r.Dir, "egress.sock") }

// SetBackend points every tunnel opened from now on at addr (host:port of
// the aggregated server).
func (r *AggregatorRoute) SetBackend(addr string) { r.backend.Store(addr) }

// Close stops the proxy; tunnels already open end with their connections.
func (r *AggregatorRoute) Close() error {
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

// Flags are the kube-apiserver flags of the route.
func (r *AggregatorRoute) Flags() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       filepath.Join(r.Dir, "front-proxy-ca.crt"),
		"proxy-client-cert-file":             filepath.Join(r.Dir, "front-proxy-client.crt"),
		"proxy-client-key-file":              filepath.Join(r.Dir, "front-proxy-client.key"),
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"requestheader-allowed-names":        frontProxyName,
		"enable-aggregator-routing":          "false",
		"egress-selector-config-file":        filepath.Join(r.Dir, "egress-selector.yaml"),
	}
}

// Option gives a control plane started with Start the route's flags.
func (r *AggregatorRoute) Option() Option {
	return func(env *envtest.Environment) {
		args := env.ControlPlane.GetAPIServer().Configure()
		for k, v := range r.Flags() {
			args.Set(k, v)
		}
	}
}

func (r *AggregatorRoute) serve() {
	defer r.wg.Done()
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.tunnel(conn)
	}
}

// tunnel reads one CONNECT request, whatever address it names, and pipes
// the connection to the backend.
func (r *AggregatorRoute) tunnel(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	addr, _ := r.backend.Load().(string)
	if addr == "" {
		_, _ = io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// br may hold bytes the client sent right after the CONNECT line.
		_, _ = io.Copy(up, br)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, up)
		if uc, ok := conn.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// Register creates (or updates) the Service, its EndpointSlice and the
// APIService of data.posture.dev/v1alpha1, whose caBundle is r.CABundle.
func (r *AggregatorRoute) Register(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", r.Namespace, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: AggregatedServiceName, Namespace: r.Namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: aggregatedPortName, Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP,
		}}},
	}
	if err := c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service %s/%s: %w", r.Namespace, AggregatedServiceName, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: AggregatedServiceName, Namespace: r.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: AggregatedServiceName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{unroutedAddress},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(aggregatedPortName), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := c.Create(ctx, slice); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create EndpointSlice %s/%s: %w", r.Namespace, AggregatedServiceName, err)
	}
	api := APIService(r.Namespace, r.CABundle)
	err := c.Create(ctx, api)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create APIService %s: %w", api.GetName(), err)
		}
		return nil
	}
	// A kept APIService (make dev on kept data) is updated. kube-aggregator
	// writes its status meanwhile, so the version read may be stale by the
	// time of the update: read it again and retry, as its other writers do.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current := APIService(r.Namespace, nil)
		if err := c.Get(ctx, client.ObjectKeyFromObject(current), current); err != nil {
			return err
		}
		api = APIService(r.Namespace, r.CABundle)
		api.SetResourceVersion(current.GetResourceVersion())
		return c.Update(ctx, api)
	})
	if err != nil {
		return fmt.Errorf("update APIService %s: %w", api.GetName(), err)
	}
	return nil
}

// APIService is the registration of data.posture.dev/v1alpha1 served by
// the Service in namespace.
func APIService(namespace string, caBundle []byte) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	u.SetName(AggregatedAPIVersion + "." + AggregatedAPIGroup)
	spec := map[string]any{
		"group": AggregatedAPIGroup, "version": AggregatedAPIVersion,
		"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		"service": map[string]any{"namespace": namespace, "name": AggregatedServiceName, "port": int64(443)},
	}
	if caBundle != nil {
		spec["caBundle"] = caBundleField(caBundle)
	}
	u.Object["spec"] = spec
	return u
}

// WaitAvailable waits until the APIService reads Available=True, and says
// why it is not when ctx ends first.
func WaitAvailable(ctx context.Context, c client.Client) error {
	last := "not read yet"
	for {
		api := APIService("", nil)
		if err := c.Get(ctx, client.ObjectKeyFromObject(api), api); err == nil {
			conds, _, _ := unstructured.NestedSlice(api.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return nil
					}
					last = fmt.Sprintf("Available=%v reason %v: %v", m["status"], m["reason"], m["message"])
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("APIService %s never became available (%s): %w", api.GetName(), last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(cn string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func (c *ca) issue(cn string, dns []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(errors.New("no randomness for a certificate serial"))
	}
	return n
}

// caBundleField is how an unstructured object carries []byte: base64, as
// JSON encodes it.
func caBundleField(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// ApplyFile creates every object of a multi-document YAML file of the
// repository (path relative to its root); objects that exist are left as
// they are.
func ApplyFile(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(filepath.Join(Root(), path))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 0; ; i++ {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s, document %d: %w", path, i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, &u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s, document %d: create %s %s: %w", path, i, u.GetKind(), u.GetName(), err)
		}
	}
}
