package servingcert_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/posture-dev/posture/internal/servingcert"
	"github.com/posture-dev/posture/internal/testenv"
)

var (
	restConfig *rest.Config
	k8s        client.Client
)

// The rotator writes a Secret and an APIService: it is tested against a
// real kube-apiserver.
func TestMain(m *testing.M) {
	testenv.Main(m, func(cfg *rest.Config) (err error) {
		restConfig = cfg
		k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		return err
	})
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return testenv.NewNamespace(t, k8s, prefix)
}

// clock is a settable time source, so renewals are tested by moving time
// rather than by waiting for it.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

// newAPIService registers an APIService for a group no server answers: the
// rotator needs only its spec.caBundle.
func newAPIService(t *testing.T, ns string) string {
	t.Helper()
	version := "v1"
	group := ns + ".certs.test.posture.dev"
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": version + "." + group},
		"spec": map[string]any{
			"group": group, "version": version,
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": ns, "name": "posture-aggregated-api", "port": int64(443)},
		},
	}}
	if err := k8s.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), svc) })
	return svc.GetName()
}

func caBundle(t *testing.T, name string) []byte {
	t.Helper()
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("apiregistration.k8s.io/v1")
	svc.SetKind("APIService")
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedString(svc.Object, "spec", "caBundle")
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("APIService %s caBundle: %v", name, err)
	}
	return b
}

func newRotator(t *testing.T, now *clock) (*servingcert.Rotator, string) {
	t.Helper()
	ns := newNamespace(t, "certs")
	return &servingcert.Rotator{
		Client:      k8s,
		Namespace:   ns,
		SecretName:  "posture-aggregated-api-tls",
		APIServices: []string{newAPIService(t, ns)},
		Policy: servingcert.Policy{
			DNSNames:     []string{"posture-aggregated-api." + ns + ".svc"},
			CAValidity:   3 * time.Hour,
			CertValidity: time.Hour,
		},
		Now: now.Now,
		Log: logr.Discard(),
	}, ns
}

func readBundle(t *testing.T, r *servingcert.Rotator) (corev1.Secret, servingcert.Bundle) {
	t.Helper()
	var sec corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: r.Namespace, Name: r.SecretName}, &sec); err != nil {
		t.Fatal(err)
	}
	return sec, servingcert.FromData(sec.Data)
}

func certsOf(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// verifies checks that the serving certificate is trusted by pool for the
// Service's name at the clock's time: what kube-aggregator checks when it
// dials the backend with the APIService's caBundle.
func verifies(t *testing.T, b servingcert.Bundle, pool []byte, name string, at time.Time) error {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pool) {
		return fmt.Errorf("no CA in %q", pool)
	}
	leaf := certsOf(t, b.Cert)[0]
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: at})
	return err
}

func TestRotatorIssuesAndPatchesCABundle(t *testing.T) {
	ctx := context.Background()
	now := &clock{t: time.Now()}
	r, ns := newRotator(t, now)
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	sec, b := readBundle(t, r)
	if sec.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q, want %s", sec.Type, corev1.SecretTypeTLS)
	}
	if _, err := tls.X509KeyPair(b.Cert, b.Key); err != nil {
		t.Fatalf("tls.crt/tls.key: %v", err)
	}
	name := "posture-aggregated-api." + ns + ".svc"
	if err := verifies(t, b, caBundle(t, r.APIServices[0]), name, now.t); err != nil {
		t.Fatalf("serving certificate not trusted through the APIService's caBundle: %v", err)
	}
	if got := caBundle(t, r.APIServices[0]); string(got) != string(b.CAs) {
		t.Errorf("caBundle = ca.crt? got\n%s\nwant\n%s", got, b.CAs)
	}

	// Someone resets the caBundle (an apply of a manifest without it): the
	// next check puts it back.
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("apiregistration.k8s.io/v1")
	svc.SetKind("APIService")
	svc.SetName(r.APIServices[0])
	if err := k8s.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"caBundle":null}}`))); err != nil {
		t.Fatal(err)
	}
	if len(caBundle(t, r.APIServices[0])) != 0 {
		t.Fatal("caBundle not cleared by the test's patch")
	}
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := caBundle(t, r.APIServices[0]); string(got) != string(b.CAs) {
		t.Errorf("caBundle not restored: %q", got)
	}
	// A check with nothing due writes nothing.
	before := sec.ResourceVersion
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if sec, _ := readBundle(t, r); sec.ResourceVersion != before {
		t.Errorf("Secret rewritten although nothing was due (resourceVersion %s -> %s)", before, sec.ResourceVersion)
	}
}

// TestRotatorLosesTheRaceToIssue has another replica's server
// issue the Secret (CreateIfMissing) between the rotator's read, which found
// none, and its create: the rotator then checks the Secret that won, and
// its CA goes into the APIService, rather than failing the check.
func TestRotatorLosesTheRaceToIssue(t *testing.T) {
	ctx := context.Background()
	now := &clock{t: time.Now()}
	r, _ := newRotator(t, now)
	other := *r
	raced := false
	c, err := client.NewWithWatch(restConfig, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	r.Client = interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && key.Name == r.SecretName && !raced {
				raced = true
				if err := other.CreateIfMissing(ctx); err != nil {
					return err
				}
				return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatalf("a Secret issued by another replica meanwhile failed the check: %v", err)
	}
	if !raced {
		t.Fatal("the race was not staged: the rotator never read the Secret")
	}
	_, b := readBundle(t, r)
	if got := caBundle(t, r.APIServices[0]); len(b.CAs) == 0 || string(got) != string(b.CAs) {
		t.Errorf("caBundle %q, want the CA of the Secret the other replica issued", got)
	}
}

func TestRotatorRenews(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	now := &clock{t: start}
	r, ns := newRotator(t, now)
	name := "posture-aggregated-api." + ns + ".svc"
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	_, first := readBundle(t, r)
	// Each step moves the clock on from the previous one (CA 3h, serving
	// certificate 1h, both renewed two thirds into their life).
	steps := []struct {
		name      string
		at        time.Duration
		certNew   bool
		caNew     bool
		wantCAs   int
		oldServes bool // the previous serving certificate is still trusted by the new caBundle
	}{
		{name: "nothing due", at: 30 * time.Minute, wantCAs: 1, oldServes: true},
		{name: "serving certificate due", at: 41 * time.Minute, certNew: true, wantCAs: 1, oldServes: true},
		{name: "serving certificate due again", at: time.Hour + 25*time.Minute, certNew: true, wantCAs: 1, oldServes: true},
		{name: "CA due: new CA, old one still trusted", at: 2*time.Hour + time.Minute, certNew: true, caNew: true, wantCAs: 2, oldServes: true},
		// The serving certificate issued at 2h01 is due as well by now.
		{name: "old CA expired: dropped", at: 3*time.Hour + 30*time.Second, certNew: true, wantCAs: 1},
	}
	prev := first
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			now.t = start.Add(s.at)
			next, err := r.Reconcile(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !next.After(now.t) {
				t.Errorf("next renewal %s is not after now %s", next, now.t)
			}
			_, b := readBundle(t, r)
			if got := string(b.Cert) != string(prev.Cert); got != s.certNew {
				t.Errorf("serving certificate renewed = %v, want %v", got, s.certNew)
			}
			if got := string(certsOf(t, b.CAs)[0].Raw) != string(certsOf(t, prev.CAs)[0].Raw); got != s.caNew {
				t.Errorf("CA renewed = %v, want %v", got, s.caNew)
			}
			if n := len(certsOf(t, b.CAs)); n != s.wantCAs {
				t.Errorf("ca.crt holds %d CAs, want %d", n, s.wantCAs)
			}
			bundle := caBundle(t, r.APIServices[0])
			if string(bundle) != string(b.CAs) {
				t.Errorf("APIService caBundle not in step with ca.crt")
			}
			if err := verifies(t, b, bundle, name, now.t); err != nil {
				t.Errorf("new serving certificate not trusted: %v", err)
			}
			if s.oldServes {
				if err := verifies(t, prev, bundle, name, now.t); err != nil {
					t.Errorf("a replica still serving the previous certificate would be refused: %v", err)
				}
			}
			prev = b
		})
	}
}

func TestRotatorReissuesForNewNames(t *testing.T) {
	ctx := context.Background()
	now := &clock{t: time.Now()}
	r, _ := newRotator(t, now)
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	_, before := readBundle(t, r)
	r.Policy.DNSNames = []string{"renamed.example.svc"}
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	_, after := readBundle(t, r)
	if got := certsOf(t, after.Cert)[0].DNSNames; len(got) != 1 || got[0] != "renamed.example.svc" {
		t.Errorf("DNS names %v after the Service was renamed", got)
	}
	if string(after.CAs) != string(before.CAs) {
		t.Error("a new name replaced the CA; only the serving certificate should change")
	}
}

func TestRotatorRefusesForeignSecret(t *testing.T) {
	ctx := context.Background()
	now := &clock{t: time.Now()}
	r, ns := newRotator(t, now)
	foreign := &corev1.Secret{}
	foreign.Namespace, foreign.Name = ns, r.SecretName
	foreign.Data = map[string][]byte{"password": []byte("x")}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	_, err := r.Reconcile(ctx)
	if err == nil {
		t.Fatal("an Opaque Secret of the same name was overwritten")
	}
	want := fmt.Sprintf("Secret %s/%s is of type %q", ns, r.SecretName, corev1.SecretTypeOpaque)
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("error %q, want it to start with %q", got, want)
	}
}

// TestSecretSourceReloadsServingCertificate serves TLS the way the generic
// API server does (its DynamicServingCertificateController over a
// SecretSource) and checks that a renewal reaches new connections without a
// restart.
func TestSecretSourceReloadsServingCertificate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := &clock{t: time.Now()}
	r, ns := newRotator(t, now)

	src := &servingcert.SecretSource{Reader: k8s, Namespace: ns, SecretName: r.SecretName,
		Interval: 50 * time.Millisecond, Bootstrap: r.CreateIfMissing, Log: logr.Discard()}
	// No Secret yet: a replica starting before the leader's first check
	// creates one rather than failing to listen.
	if err := src.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	serving := dynamiccertificates.NewDynamicServingCertificateController(&tls.Config{MinVersion: tls.VersionTLS12}, nil, src, nil, nil)
	src.AddListener(serving)
	if err := serving.RunOnce(); err != nil {
		t.Fatal(err)
	}
	go serving.Run(1, ctx.Done())
	go src.Run(ctx, 1)

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetConfigForClient: serving.GetConfigForClient, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	presented := func() []byte {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test compares the presented certificate itself
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	_, b := readBundle(t, r)
	if got := presented(); string(got) != string(certsOf(t, b.Cert)[0].Raw) {
		t.Fatal("the server does not present the Secret's certificate")
	}

	// The leader renews (the clock passes two thirds of the serving
	// certificate's life); the server presents the new one.
	now.t = now.t.Add(45 * time.Minute)
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	_, renewed := readBundle(t, r)
	if string(renewed.Cert) == string(b.Cert) {
		t.Fatal("the rotator did not renew")
	}
	want := certsOf(t, renewed.Cert)[0].Raw
	testenv.Eventually(t, 10*time.Second, "the renewed certificate to be served", func() (bool, string) {
		got := presented()
		return string(got) == string(want), "still the old certificate"
	})
}
