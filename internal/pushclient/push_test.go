package pushclient_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"

	"github.com/posture-dev/posture/internal/pushclient"
	"github.com/posture-dev/posture/internal/pushclient/pushtest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

const jobID = "6b1f0c7e-3d9a-4f1e-9a51-0d2c8e7b4a10"

func envOf(kv ...string) pushclient.Getenv {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

var report = testenv.Fixture("aws_3_records.ocsf.json")

func push(t *testing.T, getenv pushclient.Getenv) pushclient.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pushclient.Push(ctx, pushclient.Request{File: report, Getenv: getenv, UserAgent: "postctl-test"})
}

// TestTrustSources: the private CA is trusted only through REQUESTS_CA_BUNDLE
// (file or directory) or CURL_CA_BUNDLE, and REQUESTS_CA_BUNDLE wins.
func TestTrustSources(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	other := pushtest.NewCA(t, "unrelated CA")
	srv := pushtest.NewTLSServer(t, ca, pushtest.Accepted(jobID, 3))
	dir := t.TempDir()
	caFile := ca.WriteFile(t, dir, "private.pem")
	otherFile := other.WriteFile(t, dir, "other.pem")
	caDir := filepath.Join(dir, "capath")
	must(t, os.Mkdir(caDir, 0o755))
	other.WriteFile(t, caDir, "3a1b2c3d.0") // an OpenSSL-style hashed name
	ca.WriteFile(t, caDir, "private.crt")
	must(t, os.WriteFile(filepath.Join(caDir, "README"), []byte("not a certificate\n"), 0o644))
	noCerts := filepath.Join(dir, "empty.pem")
	must(t, os.WriteFile(noCerts, []byte("# nothing here\n"), 0o644))
	emptyDir := filepath.Join(dir, "empty-dir")
	must(t, os.Mkdir(emptyDir, 0o755))
	brokenPEM := filepath.Join(dir, "broken.pem")
	must(t, os.WriteFile(brokenPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), 0o644))

	for _, tc := range []struct {
		name           string
		requests, curl string
		want           pushclient.Outcome
		conns, reqs    int64
		detail         string
	}{
		{name: "no bundle: the private CA is not trusted", want: pushclient.Untrusted, conns: 1},
		{name: "REQUESTS_CA_BUNDLE file", requests: caFile, want: pushclient.Pushed, conns: 1, reqs: 1},
		{name: "REQUESTS_CA_BUNDLE directory", requests: caDir, want: pushclient.Pushed, conns: 1, reqs: 1},
		{name: "CURL_CA_BUNDLE file", curl: caFile, want: pushclient.Pushed, conns: 1, reqs: 1},
		{name: "CURL_CA_BUNDLE directory", curl: caDir, want: pushclient.Pushed, conns: 1, reqs: 1},
		{name: "REQUESTS_CA_BUNDLE wins over CURL_CA_BUNDLE", requests: otherFile, curl: caFile, want: pushclient.Untrusted, conns: 1},
		{name: "CURL_CA_BUNDLE is not read when REQUESTS_CA_BUNDLE is set", requests: caFile, curl: filepath.Join(dir, "missing.pem"), want: pushclient.Pushed, conns: 1, reqs: 1},
		{name: "missing bundle file", requests: filepath.Join(dir, "missing.pem"), want: pushclient.Invalid, detail: "REQUESTS_CA_BUNDLE=" + filepath.Join(dir, "missing.pem")},
		{name: "bundle without certificates", curl: noCerts, want: pushclient.Invalid, detail: "no PEM certificate"},
		{name: "directory without certificates", requests: emptyDir, want: pushclient.Invalid, detail: "no file with a PEM certificate"},
		{name: "broken certificate", requests: brokenPEM, want: pushclient.Invalid, detail: "PEM block 1 is not a valid certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns, reqs := srv.Conns.Load(), srv.Requests.Load()
			res := push(t, envOf(pushclient.EnvAPIKey, "pk_test.key", pushclient.EnvBaseURL, srv.URL,
				pushclient.EnvRequestsCABundle, tc.requests, pushclient.EnvCurlCABundle, tc.curl))
			if res.Outcome != tc.want {
				t.Fatalf("outcome %s (%s, %v), want %s", res.Outcome, res.Detail, res.Err, tc.want)
			}
			if got := srv.Conns.Load() - conns; got != tc.conns {
				t.Errorf("%d TCP connections, want %d", got, tc.conns)
			}
			if got := srv.Requests.Load() - reqs; got != tc.reqs {
				t.Errorf("%d requests, want %d", got, tc.reqs)
			}
			if !strings.Contains(res.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", res.Detail, tc.detail)
			}
			if tc.want == pushclient.Pushed && res.JobID != jobID {
				t.Errorf("job id %q", res.JobID)
			}
		})
	}
}

// TestPrivateBundleKeepsPublicRoots: a bundle holding only a private CA adds
// to the operating system's and the bundled roots; it replaces neither.
func TestPrivateBundleKeepsPublicRoots(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	file := ca.WriteFile(t, t.TempDir(), "only-private.pem")
	trust, err := pushclient.LoadTrust(envOf(pushclient.EnvRequestsCABundle, file))
	must(t, err)
	if trust.CustomVar != pushclient.EnvRequestsCABundle || trust.Custom != 1 || trust.Bundled < 100 {
		t.Fatalf("trust: %+v", trust)
	}
	privateOnly := x509.NewCertPool()
	privateOnly.AddCert(ca.Cert)

	// A root certificate verifies against a pool exactly when the pool holds it.
	verifies := func(pool *x509.CertPool, c *x509.Certificate) bool {
		_, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		return err == nil
	}
	checked := 0
	now := time.Now()
	for root := range bundle.Roots() {
		c, err := x509.ParseCertificate(root.Certificate)
		must(t, err)
		if root.Constraint != nil || now.Before(c.NotBefore) || now.After(c.NotAfter) {
			continue
		}
		checked++
		if !verifies(trust.Pool, c) {
			t.Errorf("bundled root %s is not trusted next to the private bundle", c.Subject)
		}
		if verifies(privateOnly, c) {
			t.Fatalf("control: %s verified against a pool without it", c.Subject)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d bundled roots checked", checked)
	}
	if !verifies(trust.Pool, ca.Cert) {
		t.Error("the private CA itself is not trusted")
	}

	// The operating system's roots stay too.
	if !trust.System {
		t.Fatal("the operating system's roots could not be loaded")
	}
	sys := systemRoot(t)
	if !verifies(trust.Pool, sys) {
		t.Errorf("system root %s is not trusted next to the private bundle", sys.Subject)
	}
}

// systemRoot returns a currently valid certificate of the OS trust store
// that is not in the bundled set, so it can only be trusted through the
// system pool.
func systemRoot(t *testing.T) *x509.Certificate {
	t.Helper()
	bundled := map[string]bool{}
	for root := range bundle.Roots() {
		bundled[string(root.Certificate)] = true
	}
	var all []*x509.Certificate
	for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for {
			var b *pem.Block
			b, data = pem.Decode(data)
			if b == nil {
				break
			}
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				all = append(all, c)
			}
		}
		break
	}
	now := time.Now()
	for _, c := range all {
		if !bundled[string(c.Raw)] && now.After(c.NotBefore) && now.Before(c.NotAfter) {
			return c
		}
	}
	for _, c := range all {
		if now.After(c.NotBefore) && now.Before(c.NotAfter) {
			return c
		}
	}
	t.Fatal("no system trust store file found")
	return nil
}

// TestRedirectsRejected: a redirect is an outcome, never followed.
func TestRedirectsRejected(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	var targetHits atomic.Int64
	target := pushtest.NewTLSServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		pushtest.Accepted(jobID, 3)(w, r)
	}))
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := pushtest.NewTLSServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+r.URL.Path, status)
			}))
			res := push(t, envOf(pushclient.EnvAPIKey, "pk_test.key", pushclient.EnvBaseURL, srv.URL, pushclient.EnvRequestsCABundle, caFile))
			if res.Outcome != pushclient.Redirected || res.HTTPStatus != status {
				t.Fatalf("outcome %s, status %d (%v)", res.Outcome, res.HTTPStatus, res.Err)
			}
			if !strings.HasPrefix(res.Location, target.URL) {
				t.Errorf("location %q", res.Location)
			}
			if srv.Conns.Load() != 1 || srv.Requests.Load() != 1 {
				t.Errorf("%d connections, %d requests to the API; want 1 and 1", srv.Conns.Load(), srv.Requests.Load())
			}
			if targetHits.Load() != 0 || target.Conns.Load() != 0 {
				t.Errorf("the redirect was followed: %d requests, %d connections at the target", targetHits.Load(), target.Conns.Load())
			}
			msg := res.Message("Scan results saved in out/x.csv")
			for _, want := range []string{"Push failed", "redirect", "not followed", pushclient.EnvBaseURL, "Scan results saved in out/x.csv"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}

// TestOneRequest: the upload is one multipart POST with the key, a
// Content-Length and the file's exact bytes, on one connection.
func TestOneRequest(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	want, err := os.ReadFile(report)
	must(t, err)
	var seen struct {
		method, path, auth, accept, filename, ctype string
		length                                      int64
		body                                        []byte
		parts                                       int
	}
	srv := pushtest.NewTLSServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.method, seen.path, seen.auth, seen.accept, seen.length = r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.ContentLength
		mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt == "multipart/form-data" {
			mr := multipart.NewReader(r.Body, params["boundary"])
			for {
				p, err := mr.NextPart()
				if err != nil {
					break
				}
				seen.parts++
				if p.FormName() == "file" {
					seen.filename, seen.ctype = p.FileName(), p.Header.Get("Content-Type")
					seen.body, _ = io.ReadAll(p)
				}
			}
		}
		pushtest.Accepted(jobID, 3)(w, r)
	}))
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	ctx := context.Background()
	res := pushclient.Push(ctx, pushclient.Request{File: report, Name: "scan-1.ocsf.json",
		Getenv: envOf(pushclient.EnvAPIKey, " pk_abc.secret \n", pushclient.EnvBaseURL, srv.URL+"/api/v1/", pushclient.EnvRequestsCABundle, caFile)})
	if res.Outcome != pushclient.Pushed || res.JobID != jobID || res.Total != 3 || res.JobStatus != "pending" {
		t.Fatalf("result %+v", res)
	}
	if seen.method != "POST" || seen.path != "/api/v1/ingestions" || seen.auth != "Api-Key pk_abc.secret" || seen.accept != restapi.MediaType {
		t.Errorf("request: %+v", seen)
	}
	if seen.length <= int64(len(want)) {
		t.Errorf("Content-Length %d: the body was not sent with a length", seen.length)
	}
	if seen.parts != 1 || seen.filename != "scan-1.ocsf.json" || seen.ctype != "application/json" || !bytes.Equal(seen.body, want) {
		t.Errorf("multipart: %d parts, file %q (%s), %d bytes (want %d)", seen.parts, seen.filename, seen.ctype, len(seen.body), len(want))
	}
	if srv.Conns.Load() != 1 || srv.Requests.Load() != 1 {
		t.Errorf("%d connections, %d requests", srv.Conns.Load(), srv.Requests.Load())
	}
	if res.Endpoint != srv.URL+"/api/v1/ingestions" {
		t.Errorf("endpoint %q", res.Endpoint)
	}
}

// TestNoRetry: a connection cut mid-request is reported, not retried.
func TestNoRetry(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	srv := pushtest.NewTLSServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	res := push(t, envOf(pushclient.EnvAPIKey, "k", pushclient.EnvBaseURL, srv.URL, pushclient.EnvRequestsCABundle, caFile))
	if res.Outcome != pushclient.Unreachable {
		t.Fatalf("outcome %s (%v)", res.Outcome, res.Err)
	}
	if srv.Conns.Load() != 1 || srv.Requests.Load() != 1 {
		t.Errorf("%d connections, %d requests; want exactly 1 and 1", srv.Conns.Load(), srv.Requests.Load())
	}
}

// TestOutcomes: each console outcome, each naming where results were saved.
func TestOutcomes(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	deadURL := "https://" + closed.Addr().String()
	closed.Close()
	const saved = "Scan results saved in /tmp/out/scan.ocsf.json"

	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		base, key string
		want      pushclient.Outcome
		status    int
		phrases   []string
		conns     int64
	}{
		{name: "success", handler: pushtest.Accepted(jobID, 3), key: "k", want: pushclient.Pushed, status: 202, conns: 1,
			phrases: []string{"Findings pushed", jobID, "https://console.example.com/scans"}},
		{name: "no key", handler: pushtest.Accepted(jobID, 3), want: pushclient.Skipped, conns: 0,
			phrases: []string{"Push skipped", "SERVICE_CLOUD_API_KEY"}},
		{name: "unreachable", base: deadURL, key: "k", want: pushclient.Unreachable, conns: 0,
			phrases: []string{"Push failed", "unreachable", "Check the URL", "network"}},
		{name: "no subscription", handler: pushtest.Error(402, "subscription_required", "tenant acme has none"), key: "k", want: pushclient.SubscriptionRequired, status: 402, conns: 1,
			phrases: []string{"Push failed", "needs a subscription", "tenant acme has none"}},
		{name: "unauthorized", handler: pushtest.Error(401, "not_authenticated", "the API key is revoked"), key: "k", want: pushclient.Unauthorized, status: 401, conns: 1,
			phrases: []string{"Push failed", "HTTP 401", "Verify SERVICE_CLOUD_API_KEY", "permission", "the API key is revoked"}},
		{name: "forbidden", handler: pushtest.Error(403, "permission_denied", "lacks the manage_ingestions permission"), key: "k", want: pushclient.HTTPError, status: 403, conns: 1,
			phrases: []string{"Push failed", "HTTP 403 Forbidden", "lacks the manage_ingestions permission"}},
		{name: "bad file", handler: pushtest.Error(400, "invalid", "truncated at byte 12"), key: "k", want: pushclient.HTTPError, status: 400, conns: 1,
			phrases: []string{"Push failed", "HTTP 400", "truncated at byte 12"}},
		{name: "not JSON:API", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>upstream  timed out</html>", 504)
		}, key: "k", want: pushclient.HTTPError, status: 504, conns: 1, phrases: []string{"HTTP 504", "<html>upstream timed out</html>"}},
		{name: "2xx without a job", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) }, key: "k", want: pushclient.HTTPError, status: 202, conns: 1,
			phrases: []string{"names no ingestion job"}},
		{name: "bad base URL", base: "ftp://api.example.com", key: "k", want: pushclient.Invalid, conns: 0,
			phrases: []string{"SERVICE_CLOUD_API_BASE_URL", "ftp://api.example.com", "Nothing was sent"}},
		{name: "key with a control character", handler: pushtest.Accepted(jobID, 3), key: "pk_a\x01b", want: pushclient.Invalid, conns: 0,
			phrases: []string{"SERVICE_CLOUD_API_KEY", "cannot carry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			var srv *pushtest.Server
			if tc.handler != nil {
				srv = pushtest.NewTLSServer(t, ca, tc.handler)
				if base == "" {
					base = srv.URL
				}
			}
			res := push(t, envOf(pushclient.EnvAPIKey, tc.key, pushclient.EnvBaseURL, base, pushclient.EnvRequestsCABundle, caFile,
				pushclient.EnvAppURL, "https://console.example.com/"))
			if res.Outcome != tc.want || res.HTTPStatus != tc.status {
				t.Fatalf("outcome %s status %d (%s, %v), want %s %d", res.Outcome, res.HTTPStatus, res.Detail, res.Err, tc.want, tc.status)
			}
			msg := res.Message(saved)
			for _, p := range append(tc.phrases, saved) {
				if !strings.Contains(msg, p) {
					t.Errorf("message lacks %q:\n%s", p, msg)
				}
			}
			if strings.Contains(msg, tc.key) && tc.key != "" && len(tc.key) > 1 {
				t.Errorf("message shows the key: %s", msg)
			}
			if srv != nil && srv.Conns.Load() != tc.conns {
				t.Errorf("%d connections, want %d", srv.Conns.Load(), tc.conns)
			}
			var out, errOut bytes.Buffer
			res.Print(&out, &errOut, saved)
			if (out.Len() > 0) != res.OK() || (errOut.Len() > 0) == res.OK() {
				t.Errorf("printed to the wrong stream: stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
}

func TestFileChecks(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.ocsf.json")
	must(t, os.WriteFile(empty, nil, 0o644))
	wrongName := filepath.Join(dir, "report.json")
	must(t, os.WriteFile(wrongName, []byte("[]"), 0o644))
	srv := pushtest.NewServer(t, pushtest.Accepted(jobID, 0))
	for _, tc := range []struct{ file, name, detail string }{
		{empty, "", "is empty"},
		{wrongName, "", "ends in .ocsf.json"},
		{report, "report.json", "ends in .ocsf.json"},
		{filepath.Join(dir, "missing.ocsf.json"), "", "cannot open the report"},
		{dir + "/", "x.ocsf.json", "not a regular file"},
	} {
		res := pushclient.Push(context.Background(), pushclient.Request{File: tc.file, Name: tc.name, Getenv: envOf(pushclient.EnvAPIKey, "k", pushclient.EnvBaseURL, srv.URL)})
		if res.Outcome != pushclient.Invalid || !strings.Contains(res.Detail, tc.detail) {
			t.Errorf("%s: %s %q", tc.file, res.Outcome, res.Detail)
		}
	}
	if srv.Conns.Load() != 0 {
		t.Errorf("%d connections for files that cannot be sent", srv.Conns.Load())
	}
}

func TestBaseAndAppURL(t *testing.T) {
	for _, tc := range []struct {
		base, app, endpoint, appURL, err string
	}{
		{base: "https://api.example.com", endpoint: "https://api.example.com/api/v1/ingestions", appURL: "https://app.example.com"},
		{base: "https://api.example.com/", endpoint: "https://api.example.com/api/v1/ingestions", appURL: "https://app.example.com"},
		{base: "https://api.example.com/api/v1", endpoint: "https://api.example.com/api/v1/ingestions", appURL: "https://app.example.com"},
		{base: "https://posture.internal:8443/posture/", endpoint: "https://posture.internal:8443/posture/api/v1/ingestions", appURL: "https://posture.internal:8443/posture"},
		{base: "http://127.0.0.1:8080", endpoint: "http://127.0.0.1:8080/api/v1/ingestions", appURL: "http://127.0.0.1:8080"},
		{base: "https://api.example.com", app: "https://ui.example.com/", endpoint: "https://api.example.com/api/v1/ingestions", appURL: "https://ui.example.com"},
		{base: "", endpoint: restapi.DefaultBaseURL + "/api/v1/ingestions", appURL: "https://app.posture.dev"},
		{base: "api.example.com", err: "scheme"},
		{base: "https://", err: "no host"},
		{base: "https://u:s3cret@api.example.com", err: "credentials"},
		{base: "https://api.example.com/?x=1", err: "query"},
	} {
		res := pushclient.Push(context.Background(), pushclient.Request{File: report, Getenv: envOf(pushclient.EnvBaseURL, tc.base, pushclient.EnvAppURL, tc.app)})
		if tc.err != "" {
			if res.Outcome != pushclient.Invalid || !strings.Contains(res.Detail, tc.err) || strings.Contains(res.Detail, "s3cret") {
				t.Errorf("%q: %s %q, want an error about %s", tc.base, res.Outcome, res.Detail, tc.err)
			}
			continue
		}
		// No key: the push stops before any connection, with the addresses resolved.
		if res.Outcome != pushclient.Skipped || res.Endpoint != tc.endpoint || res.AppURL != tc.appURL {
			t.Errorf("%q: %s endpoint %q app %q; want %q %q", tc.base, res.Outcome, res.Endpoint, res.AppURL, tc.endpoint, tc.appURL)
		}
	}
}

func TestProxyFromGivenEnvironment(t *testing.T) {
	// A proxy named in the given environment is used, even though the
	// process environment names none: the CONNECT reaches it.
	var connects atomic.Int64
	proxy := pushtest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			connects.Add(1)
		}
		http.Error(w, "proxy says no", http.StatusForbidden)
	}))
	res := push(t, envOf(pushclient.EnvAPIKey, "k", pushclient.EnvBaseURL, "https://api.example.invalid", "HTTPS_PROXY", proxy.URL))
	if connects.Load() != 1 || res.Outcome != pushclient.Unreachable {
		t.Errorf("%d CONNECTs, outcome %s (%v)", connects.Load(), res.Outcome, res.Err)
	}
	if proxy.Conns.Load() != 1 {
		t.Errorf("%d connections to the proxy", proxy.Conns.Load())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEarlyRefusalOfLargeUpload: the API refuses a bad key (or missing
// subscription) before reading the body. With a large report the console
// must still say HTTP 401/402, not "unreachable" because the connection was
// reset under a body still being written.
func TestEarlyRefusalOfLargeUpload(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	big := testenv.Fixture("aws_1500_records.ocsf.json") // 3.3 MB
	for _, tc := range []struct {
		status int
		want   pushclient.Outcome
	}{{401, pushclient.Unauthorized}, {402, pushclient.SubscriptionRequired}, {403, pushclient.HTTPError}} {
		for i := range 15 {
			srv := pushtest.NewTLSServer(t, ca, pushtest.Error(tc.status, "refused", "refused early"))
			res := pushclient.Push(context.Background(), pushclient.Request{File: big,
				Getenv: envOf(pushclient.EnvAPIKey, "k", pushclient.EnvBaseURL, srv.URL, pushclient.EnvRequestsCABundle, caFile)})
			if res.Outcome != tc.want || res.HTTPStatus != tc.status || srv.Conns.Load() != 1 {
				t.Fatalf("HTTP %d, attempt %d: outcome %s status %d (%s), %d connections", tc.status, i, res.Outcome, res.HTTPStatus, res.Detail, srv.Conns.Load())
			}
		}
	}
}

func TestInterrupted(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	ctx, cancel := context.WithCancel(context.Background())
	srv := pushtest.NewTLSServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices the client leaving only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		cancel() // the user presses Ctrl-C while the API is busy
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	res := pushclient.Push(ctx, pushclient.Request{File: report,
		Getenv: envOf(pushclient.EnvAPIKey, "k", pushclient.EnvBaseURL, srv.URL, pushclient.EnvRequestsCABundle, caFile)})
	if res.Outcome != pushclient.Interrupted || !strings.Contains(res.Message("saved"), "Push interrupted") || srv.Requests.Load() != 1 {
		t.Errorf("%s: %s", res.Outcome, res.Message("saved"))
	}
}
