package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/testenv"
)

var (
	restConfig *rest.Config
	admin      client.Client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapErrorsOnly))))
	testenv.Main(m, func(cfg *rest.Config) (err error) {
		restConfig = cfg
		admin, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		return err
	})
}

const (
	zapErrorsOnly = 2 // keeps test output readable
	operatorNS    = "posture-system"
	managerSA     = "posture-manager"
)

// applyRBAC creates every object of config/rbac as the cluster admin would
// with `kubectl apply -k config/rbac`: the generated ClusterRole and Role,
// their bindings, the tenant-access and metrics-reader ClusterRoles.
func applyRBAC(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(testenv.Root(), "config", "rbac", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := admin.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: %s %s: %v", file, u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// asServiceAccount is cfg acting as a ServiceAccount, with the groups the
// API server gives ServiceAccount tokens.
func asServiceAccount(cfg *rest.Config, ns, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return c
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1 and returns
// it parsed.
func writeCert(t *testing.T, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "posture-api"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Each file replaced whole, as the kubelet updates a mounted Secret, and
	// the key first, so the watcher never pairs a new certificate with an
	// old or half-written key.
	for _, f := range []struct {
		path string
		pem  *pem.Block
	}{{keyFile, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}}, {certFile, &pem.Block{Type: "CERTIFICATE", Bytes: der}}} {
		if err := os.WriteFile(f.path+".new", pem.EncodeToMemory(f.pem), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.path+".new", f.path); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

type runningManager struct {
	apiAddr, metricsAddr string
	aggregatedAddr       string
	certFile, keyFile    string
	cert                 *x509.Certificate
}

// startManager runs the manager exactly as main does, but with the
// ServiceAccount identity the RBAC of config/rbac grants, not the test's
// cluster-admin one.
func startManager(t *testing.T) *runningManager {
	t.Helper()
	applyRBAC(t)
	dir := t.TempDir()
	m := &runningManager{apiAddr: freeAddr(t), metricsAddr: freeAddr(t), aggregatedAddr: freeAddr(t),
		certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	m.cert = writeCert(t, m.certFile, m.keyFile)
	t.Setenv("POSTURE_STATIC_API_KEY", "")
	f, _, err := parseManagerFlags([]string{
		"--api-bind-address=" + m.apiAddr,
		"--health-probe-bind-address=0",
		"--aggregated-api-bind-address=" + m.aggregatedAddr,
		"--aggregated-api-cert-secret=posture-aggregated-api-tls",
		"--aggregated-api-cert-namespace=" + operatorNS,
		"--metrics-bind-address=" + m.metricsAddr,
		"--executor=inprocess",
		"--ingestion-source-wait=5s",
		"--store-driver=sqlite",
		"--store-dsn=" + filepath.Join(dir, "posture.db"),
		"--job-namespace=" + operatorNS,
		"--jwt-secret-namespace=" + operatorNS,
		"--service-account=" + managerSA,
		"--service-account-namespace=" + operatorNS,
		"--mcp-image=registry.example/posture-mcp:1.0.0",
		"--api-tls-cert-file=" + m.certFile,
		"--api-tls-key-file=" + m.keyFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, asServiceAccount(restConfig, operatorNS, managerSA), f, ctrl.Log.WithName("setup"))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return m
}

func readyReason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, posturev1.ConditionReady); c != nil {
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
	return "no Ready condition"
}

// TestManagerSecurity runs one manager under the ServiceAccount of
// config/rbac and checks what it may do, who may read its metrics, and that
// its API speaks TLS only.
func TestManagerSecurity(t *testing.T) {
	m := startManager(t)
	t.Run("rights only in tenant namespaces", func(t *testing.T) { testNamespacedRights(t) })
	t.Run("metrics need an authorized caller", func(t *testing.T) { testMetricsAuth(t, m) })
	t.Run("metrics show an ingestion", func(t *testing.T) { testMetricsAfterIngestion(t, m) })
	t.Run("API serves TLS only", func(t *testing.T) { testAPITLS(t, m) })
	t.Run("aggregated API serves the manager's certificate", func(t *testing.T) { testAggregatedCert(t, m) })
	// After the metrics checks, which count one ingestion.
	t.Run("declared ingestions read ConfigMaps of tenant namespaces only", testDeclaredIngestions)
}

// testDeclaredIngestions: a report declared in Git is read through the
// tenant-access RoleBinding, uncached (the manager may not watch ConfigMaps),
// and an Ingestion outside a tenant namespace imports nothing.
func testDeclaredIngestions(t *testing.T) {
	ctx := context.Background()
	report, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "tenant-acme"}, Data: map[string]string{"report.ocsf.json": string(report)}},
		&posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-acme"}, Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "report.ocsf.json"}}}},
		&posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "bystander"}, Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "settings", Key: "k"}}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	for _, tc := range []struct {
		ns    string
		phase posturev1.IngestionPhase
		msg   string
	}{
		{"tenant-acme", posturev1.IngestionCompleted, "Processed 3 records"},
		{"bystander", posturev1.IngestionFailed, "no Tenant uses namespace bystander"},
	} {
		testenv.Eventually(t, 60*time.Second, "the Ingestion declared in "+tc.ns+" to be "+string(tc.phase), func() (bool, string) {
			var ing posturev1.Ingestion
			if err := admin.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: "nightly"}, &ing); err != nil {
				return false, err.Error()
			}
			return ing.Status.Phase == tc.phase && strings.Contains(ing.Status.Message, tc.msg), string(ing.Status.Phase) + ": " + ing.Status.Message
		})
	}
}

func testNamespacedRights(t *testing.T) {
	ctx := context.Background()
	// A namespace the operator adopts, holding a user's password Secret
	// that the tenant controller must be able to read.
	tenantNS := "tenant-acme"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-password", Namespace: tenantNS}, StringData: map[string]string{"password": "correct horse battery staple"}},
		&posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme"}, Spec: posturev1.TenantSpec{
			Namespace:    tenantNS,
			Subscription: posturev1.Subscription{Active: true, Plan: "test"},
			Roles:        []posturev1.Role{{Name: "admin", Permissions: []posturev1.Permission{posturev1.PermissionManageIngestions}}},
			Users: []posturev1.User{{Email: "admin@example.com", Role: "admin",
				PasswordSecretRef: &posturev1.SecretKeyRef{Name: "admin-password", Key: "password"}}},
		}},
		&posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: tenantNS}, Spec: posturev1.APIKeySpec{User: "admin@example.com"}},
		&posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: tenantNS}},
		// A namespace no Tenant owns, with a Secret worth stealing.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-root", Namespace: "bystander"}, StringData: map[string]string{"password": "hunter2"}},
		&posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "bystander"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "bystander"}, Data: map[string]string{"k": "v"}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}

	testenv.Eventually(t, 60*time.Second, "Tenant acme Ready (its password Secret read through the RoleBinding)", func() (bool, string) {
		var tn posturev1.Tenant
		if err := admin.Get(ctx, client.ObjectKey{Name: "acme"}, &tn); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(tn.Status.Conditions, posturev1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, readyReason(tn.Status.Conditions)
	})
	var rb rbacv1.RoleBinding
	if err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: controllers.TenantAccessBindingName}, &rb); err != nil {
		t.Fatalf("the tenant namespace has no RoleBinding for the manager: %v", err)
	}
	if rb.RoleRef.Name != controllers.DefaultTenantAccessRole || len(rb.Subjects) != 1 || rb.Subjects[0].Name != managerSA {
		t.Errorf("RoleBinding %s/%s = %+v %+v; want ClusterRole %s bound to ServiceAccount %s", tenantNS, rb.Name, rb.RoleRef, rb.Subjects, controllers.DefaultTenantAccessRole, managerSA)
	}
	// What the same identity must not do: checked first, so that a
	// too-wide role shows here whatever the controllers then do with it.
	sa, err := client.New(asServiceAccount(restConfig, operatorNS, managerSA), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(ns string) *appsv1.Deployment {
		labels := map[string]string{"app": "x"}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "registry.attacker.example/x"}}}},
		}}
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"get a Secret of an unrelated namespace", func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: "bystander", Name: "db-root"}, &corev1.Secret{})
		}},
		{"list the Secrets of an unrelated namespace", func() error {
			return sa.List(ctx, &corev1.SecretList{}, client.InNamespace("bystander"))
		}},
		{"list Secrets cluster-wide", func() error { return sa.List(ctx, &corev1.SecretList{}) }},
		{"get a ConfigMap of an unrelated namespace", func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: "bystander", Name: "settings"}, &corev1.ConfigMap{})
		}},
		{"list ConfigMaps cluster-wide", func() error { return sa.List(ctx, &corev1.ConfigMapList{}) }},
		{"list the ConfigMaps of a tenant namespace", func() error {
			return sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(tenantNS))
		}},
		{"list the Secrets of a tenant namespace", func() error {
			return sa.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantNS))
		}},
		{"create a Deployment in an unrelated namespace", func() error { return sa.Create(ctx, deployment("bystander")) }},
		{"create a Deployment in kube-system", func() error { return sa.Create(ctx, deployment("kube-system")) }},
		{"bind cluster-admin in an unrelated namespace", func() error {
			return sa.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "escalate", Namespace: "bystander"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: managerSA, Namespace: operatorNS}},
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !apierrors.IsForbidden(err) {
				t.Errorf("the manager's ServiceAccount could %s: err %v, want Forbidden", tc.name, err)
			}
		})
	}

	testenv.Eventually(t, 60*time.Second, "the APIKey's Secret in the tenant namespace", func() (bool, string) {
		var k posturev1.APIKey
		if err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "ci"}, &k); err != nil {
			return false, err.Error()
		}
		var s corev1.Secret
		err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "ci-api-key"}, &s)
		return err == nil && len(s.Data[controllers.APIKeySecretKey]) > 0, fmt.Sprintf("%s; secret: %v", readyReason(k.Status.Conditions), err)
	})
	testenv.Eventually(t, 60*time.Second, "the MCPServer's Deployment in the tenant namespace", func() (bool, string) {
		var d appsv1.Deployment
		err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "tools"}, &d)
		return err == nil, fmt.Sprint(err)
	})
	testenv.Eventually(t, 60*time.Second, "the MCPServer outside a tenant namespace to say the operator has no rights there", func() (bool, string) {
		var ms posturev1.MCPServer
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "bystander", Name: "tools"}, &ms); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(ms.Status.Conditions, posturev1.ConditionReady)
		return c != nil && c.Reason == controllers.ReasonMCPNoAccess, readyReason(ms.Status.Conditions)
	})
	var d appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "bystander", Name: "tools"}, &d); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment for an MCPServer outside any tenant namespace: err %v", err)
	}
	var jwt corev1.Secret
	if err := admin.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "posture-jwt-signing"}, &jwt); err != nil {
		t.Errorf("the JWT signing Secret in the operator namespace: %v", err)
	}
}

func testMetricsAuth(t *testing.T, m *runningManager) {
	token := func(name string, reader bool) string { return scrapeToken(t, name, reader) }
	// The metrics server's certificate is self-signed: trust is not what
	// this checks, the bearer token is.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		name   string
		bearer string
		want   int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a bearer token that is not Kubernetes' (an API key)", "pk_abcdefgh.notakubernetestoken", http.StatusUnauthorized},
		{"a JWT that kube-apiserver did not sign", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader role", token("stranger", false), http.StatusForbidden},
		{"a ServiceAccount bound to posture-metrics-reader", token("prometheus", true), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// RBAC changes reach the API server's authorizer within moments.
			testenv.Eventually(t, 20*time.Second, fmt.Sprintf("GET /metrics as %s answering %d", tc.name, tc.want), func() (bool, string) {
				req, err := http.NewRequest(http.MethodGet, "https://"+m.metricsAddr+"/metrics", nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+tc.bearer)
				}
				resp, err := hc.Do(req)
				if err != nil {
					return false, err.Error()
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if tc.want == http.StatusOK && !bytes.Contains(body, []byte("controller_runtime_")) {
					return false, fmt.Sprintf("%d without metrics: %.200s", resp.StatusCode, body)
				}
				return resp.StatusCode == tc.want, fmt.Sprintf("%d %.200s", resp.StatusCode, body)
			})
		})
	}
}

func testAPITLS(t *testing.T, m *runningManager) {
	get := func(cert *x509.Certificate) (*http.Response, error) {
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		return hc.Get("https://" + m.apiAddr + "/healthz")
	}
	testenv.Eventually(t, 20*time.Second, "the API to answer over TLS with the configured certificate", func() (bool, string) {
		resp, err := get(m.cert)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + m.apiAddr + "/healthz")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to the API answered %s %q; want it refused", resp.Status, body)
		}
	}

	// A renewed certificate (cert-manager rewrites the Secret's files) is
	// served without a restart.
	renewed := writeCert(t, m.certFile, m.keyFile)
	testenv.Eventually(t, 30*time.Second, "the API to serve the renewed certificate", func() (bool, string) {
		resp, err := get(renewed)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return strings.HasPrefix(resp.Status, "200"), resp.Status
	})
	if resp, err := get(m.cert); err == nil {
		resp.Body.Close()
		t.Errorf("after renewal the API still serves the first certificate (%s)", resp.Status)
	}
}
