package aggregated_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook/aggregated"
)

// A request kube-apiserver proxies carries its front-proxy client
// certificate and the caller in X-Remote-* headers. The server loads the
// CA that verifies that certificate from extension-apiserver-authentication
// through an informer, which syncs only once the server serves: in the
// first moments after every start (a restart, a new replica) it cannot
// tell such a request from an anonymous one. It must then answer that it
// is not ready (503, retry), never decide as if the caller were
// system:anonymous (403, which kubectl reports as final). make soak found
// kubectl's reads refused with 403 for system:anonymous right after a
// restart of the manager. Calling the handler before Start is that moment,
// held still.
func TestNotReadyUntilItTrustsTheFrontProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := client.New(apitest.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := aggregated.New(aggregated.Options{
		Listener: ln, CertDir: route.ServingCertDir, RESTConfig: apitest.RESTConfig(), Client: c, Log: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(route.Dir, "front-proxy-client.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	proxyCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "https://posture/apis/data.posture.dev/v1alpha1/namespaces/tenant-x/findings", nil)
	req.TLS = &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{proxyCert}}
	req.Header.Set("X-Remote-User", "alice")
	req.Header.Set("X-Remote-Group", "system:authenticated")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), "system:anonymous") {
		t.Fatalf("a proxied request before the front-proxy CA is loaded: %d %s; want 503, and no decision about system:anonymous", rec.Code, rec.Body)
	}
	if rec.Header().Get("Retry-After") == "" {
		t.Errorf("the 503 has no Retry-After")
	}
	if !strings.Contains(rec.Body.String(), "extension-apiserver-authentication") {
		t.Errorf("the 503 does not say what the server waits for: %s", rec.Body)
	}

	// A caller without a client certificate (a bearer token, reviewed by
	// kube-apiserver) does not depend on that CA: it is not held up.
	req = httptest.NewRequest(http.MethodGet, "https://posture/apis/data.posture.dev/v1alpha1/namespaces/tenant-x/findings", nil)
	req.TLS = &tls.ConnectionState{HandshakeComplete: true}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code == http.StatusServiceUnavailable {
		t.Errorf("a request without a client certificate was held up: %d %s", rec.Code, rec.Body)
	}
}
