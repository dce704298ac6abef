package pushclient

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
	"golang.org/x/net/http/httpproxy"
)

// Environment variables, named exactly as the spec names them.
const (
	EnvAPIKey           = "SERVICE_CLOUD_API_KEY"
	EnvBaseURL          = "SERVICE_CLOUD_API_BASE_URL"
	EnvRequestsCABundle = "REQUESTS_CA_BUNDLE"
	EnvCurlCABundle     = "CURL_CA_BUNDLE"
	// EnvAppURL is ours: the web application's address for the {app_url}/scans
	// link, for installations where it cannot be derived from the API's.
	EnvAppURL = "SERVICE_CLOUD_APP_URL"
)

// Getenv reads one variable of the environment the command was given. The
// push code reads the environment only through it, and never writes it.
type Getenv func(string) string

// Trust is the one set of trust roots an upload uses.
type Trust struct {
	Pool *x509.CertPool
	// System tells whether the operating system's roots could be loaded.
	System bool
	// Bundled is the number of roots added from the bundled (Mozilla NSS)
	// set, golang.org/x/crypto/x509roots/fallback/bundle.
	Bundled int
	// CustomVar is the variable a custom bundle came from (REQUESTS_CA_BUNDLE
	// or CURL_CA_BUNDLE), "" when neither is set; CustomPath its value and
	// Custom the number of certificates it held.
	CustomVar, CustomPath string
	Custom                int
}

// LoadTrust builds the upload's trust roots: the operating system's, plus
// the bundled ones, plus the certificates of REQUESTS_CA_BUNDLE (a file or
// a directory of PEM files) or, when that is unset, CURL_CA_BUNDLE. The
// custom bundle adds to the other roots and never replaces them, so a bundle
// holding only a private CA cannot break trust in public servers.
//
// The bundled roots are added to this pool only: the package that installs
// them as the process-wide fallback (x509roots/fallback) is not imported,
// so no other connection of the process is affected.
func LoadTrust(getenv Getenv) (*Trust, error) {
	t := &Trust{}
	if sys, err := x509.SystemCertPool(); err == nil && sys != nil {
		t.Pool, t.System = sys, true
	} else {
		t.Pool = x509.NewCertPool()
	}
	for root := range bundle.Roots() {
		cert, err := x509.ParseCertificate(root.Certificate)
		if err != nil {
			return nil, fmt.Errorf("parsing a bundled root certificate: %w", err)
		}
		if root.Constraint == nil {
			t.Pool.AddCert(cert)
		} else {
			t.Pool.AddCertWithConstraint(cert, root.Constraint)
		}
		t.Bundled++
	}
	for _, name := range []string{EnvRequestsCABundle, EnvCurlCABundle} {
		path := getenv(name)
		if path == "" {
			continue
		}
		certs, err := readBundle(path)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", name, path, err)
		}
		for _, c := range certs {
			t.Pool.AddCert(c)
		}
		t.CustomVar, t.CustomPath, t.Custom = name, path, len(certs)
		break // REQUESTS_CA_BUNDLE wins; CURL_CA_BUNDLE is only read without it
	}
	return t, nil
}

// readBundle reads a PEM file, or every regular file of a directory (as
// OpenSSL's CApath: hashed names like 9d66eef0.0 as well as *.pem/*.crt;
// files holding no certificate are ignored).
func readBundle(path string) ([]*x509.Certificate, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA bundle: %w", err)
	}
	if !st.IsDir() {
		certs, err := readPEMFile(path)
		if err != nil {
			return nil, err
		}
		if len(certs) == 0 {
			return nil, errors.New("the file holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
		}
		return certs, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA directory: %w", err)
	}
	var all []*x509.Certificate
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		st, err := os.Stat(p) // follows symlinks, as c_rehash directories are made of them
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		certs, err := readPEMFile(p)
		if err != nil {
			return nil, err
		}
		all = append(all, certs...)
	}
	if len(all) == 0 {
		return nil, errors.New("the directory holds no file with a PEM certificate")
	}
	return all, nil
}

func readPEMFile(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: PEM block %d is not a valid certificate: %w", path, n, err)
		}
		certs = append(certs, c)
	}
}

// proxy honours HTTPS_PROXY/HTTP_PROXY/NO_PROXY (and their lower-case forms)
// from the given environment. net/http's ProxyFromEnvironment would read the
// process environment, once, instead.
func proxy(getenv Getenv) func(*http.Request) (*url.URL, error) {
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	fn := (&httpproxy.Config{
		HTTPProxy:  first("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: first("HTTPS_PROXY", "https_proxy"),
		NoProxy:    first("NO_PROXY", "no_proxy"),
	}).ProxyFunc()
	return func(r *http.Request) (*url.URL, error) { return fn(r.URL) }
}

// RedirectError is why a redirect was not followed.
type RedirectError struct {
	Status   int
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("the API answered HTTP %d with a redirect to %s; redirects are not followed", e.Status, e.Location)
}

// ClientOptions shape NewHTTPClient.
type ClientOptions struct {
	// Single makes the client use one connection for one request and close
	// it: what an upload needs. Otherwise connections are kept for reuse
	// (the ingestions commands poll).
	Single bool
	// ResponseTimeout bounds the wait for response headers after the request
	// was sent (0: 10 minutes, time for the API to store a large upload).
	ResponseTimeout time.Duration
}

// NewHTTPClient returns a client with its own transport and TLS context:
// trust roots from t, proxies from getenv, redirects refused.
func NewHTTPClient(t *Trust, getenv Getenv, opts ClientOptions) *http.Client {
	timeout := opts.ResponseTimeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	tr := &http.Transport{
		Proxy:                 proxy(getenv),
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: t.Pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: timeout,
		// For requests that ask for it (uploads): wait this long for the
		// server's "100 Continue" before sending the body anyway.
		ExpectContinueTimeout: 2 * time.Second,
		// HTTP/1.1 only: with a custom TLS config net/http would not offer h2
		// anyway, and saying so keeps "one connection, one request" plain.
		ForceAttemptHTTP2: false,
		DisableKeepAlives: opts.Single,
		MaxConnsPerHost:   1,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			status := 0
			if req.Response != nil {
				status = req.Response.StatusCode
			}
			return &RedirectError{Status: status, Location: req.URL.String()}
		},
	}
}
