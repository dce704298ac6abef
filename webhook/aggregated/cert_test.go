package aggregated_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook/aggregated"
)

// Without a certificate directory the server makes its own certificate;
// CABundle is what an APIService's caBundle must hold to trust it under
// the Service's name, and only under the names it was made for.
func TestSelfSignedCertificateVerifiesWithCABundle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const svc = "posture-aggregated-api.posture-system.svc"
	srv, err := aggregated.New(aggregated.Options{Listener: ln, DNSNames: []string{svc},
		RESTConfig: apitest.RESTConfig(), Log: ctrl.Log.WithName("aggregated")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CABundle()) {
		t.Fatalf("CABundle holds no certificate: %q", srv.CABundle())
	}
	for _, tc := range []struct {
		serverName string
		ok         bool
	}{
		{svc, true},
		{"other.posture-system.svc", false},
	} {
		t.Run(tc.serverName, func(t *testing.T) {
			var err error
			// Until the server listens, a dial fails before any handshake.
			testenv.Eventually(t, 10*time.Second, "the server to answer a handshake", func() (bool, string) {
				var conn *tls.Conn
				conn, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: tc.serverName})
				if err == nil {
					conn.Close()
				}
				var opErr *net.OpError
				return !asOpError(err, &opErr), fmt.Sprint(err)
			})
			if (err == nil) != tc.ok {
				t.Errorf("TLS handshake as %s: %v, want success %v", tc.serverName, err, tc.ok)
			}
		})
	}
}

// asOpError is a dial that did not reach TLS yet (the server still starting).
func asOpError(err error, target **net.OpError) bool {
	if err == nil {
		return false
	}
	op, ok := err.(*net.OpError)
	if ok && op.Op == "dial" {
		*target = op
		return true
	}
	return false
}
