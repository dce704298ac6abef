// Package pushtest provides what tests of uploads need: private certificate
// authorities made on the fly, and HTTPS servers on loopback that count the
// TCP connections and requests they receive.
package pushtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a private certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA makes a CA valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"postctl tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ServerCert issues a serving certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) ServerCert(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key}
}

// WriteFile writes the CA's PEM to dir/name and returns the path.
func (ca *CA) WriteFile(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Server is an HTTPS (or HTTP) server on loopback that counts what reaches it.
type Server struct {
	*httptest.Server
	// Conns counts accepted TCP connections (before any TLS handshake);
	// Requests counts HTTP requests that reached the handler.
	Conns, Requests atomic.Int64
}

// NewTLSServer serves handler over TLS with a certificate of ca. The server
// is closed when the test ends.
func NewTLSServer(t testing.TB, ca *CA, handler http.Handler) *Server {
	t.Helper()
	s := newServer(t, handler)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert(t)}}
	s.StartTLS()
	return s
}

// NewServer serves handler over plain HTTP.
func NewServer(t testing.TB, handler http.Handler) *Server {
	t.Helper()
	s := newServer(t, handler)
	s.Start()
	return s
}

func newServer(t testing.TB, handler http.Handler) *Server {
	s := &Server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		handler.ServeHTTP(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.Conns.Add(1)
		}
	}
	// Refused handshakes are the point of some tests; keep them off the log.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(s.Close)
	return s
}

// Accepted answers an upload like the API: 202 with a pending job.
func Accepted(id string, total int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.api+json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"data":{"type":"ingestions","id":"`+id+`","attributes":{"status":"pending","summary":{"total":`+itoa(total)+`,"processed":0,"invalid":0},"requested_at":"2026-11-21T12:00:00Z","started_at":null,"completed_at":null}},"meta":{"version":"v1"}}`)
	}
}

// Error answers with a JSON:API error document.
func Error(status int, code, detail string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// no body read: like the API, answer before reading
		w.Header().Set("Content-Type", "application/vnd.api+json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"errors":[{"status":"`+itoa(status)+`","code":"`+code+`","detail":"`+detail+`"}],"meta":{"version":"v1"}}`)
	}
}

func itoa(n int) string { return big.NewInt(int64(n)).String() }
