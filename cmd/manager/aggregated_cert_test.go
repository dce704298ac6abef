package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/posture-dev/posture/internal/testenv"
)

// TestAggregatedCertRights runs the manager's certificate rotator as the
// manager's ServiceAccount with the RBAC of config/rbac, against the
// APIService of config/aggregated: it may issue and renew its Secret and
// patch that APIService, and nothing next to them.
func TestAggregatedCertRights(t *testing.T) {
	ctx := context.Background()
	applyRBAC(t)

	raw, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "aggregated", "apiservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ours := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &ours.Object); err != nil {
		t.Fatal(err)
	}
	other := ours.DeepCopy()
	other.SetName("v1.other.example.com")
	if err := unstructured.SetNestedField(other.Object, "other.example.com", "spec", "group"); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(other.Object, "v1", "spec", "version")
	for _, o := range []*unstructured.Unstructured{ours, other} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("APIService %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: operatorNS},
		Data: map[string][]byte{"k": []byte("v")}}
	if err := admin.Create(ctx, foreign); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	sa, err := client.New(asServiceAccount(restConfig, operatorNS, managerSA), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parseManagerFlags([]string{"--aggregated-api-cert-secret=posture-aggregated-api-tls",
		"--aggregated-api-cert-namespace=" + operatorNS})
	if err != nil {
		t.Fatal(err)
	}
	r := aggregatedCertRotator(sa, f.aggregatedCert)
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.SecretName, Namespace: operatorNS}})
	})

	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatalf("issue as the manager's ServiceAccount: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(ours), ours); err != nil {
		t.Fatal(err)
	}
	if ca, _, _ := unstructured.NestedString(ours.Object, "spec", "caBundle"); ca == "" {
		t.Error("the APIService of config/aggregated has no caBundle after the first check")
	}
	// A renewal (here: a new Service name) updates the Secret.
	r.Policy.DNSNames = append(r.Policy.DNSNames, "posture-aggregated-api.renamed.svc")
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatalf("renew as the manager's ServiceAccount: %v", err)
	}

	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"patch another APIService", func() error {
			return sa.Patch(ctx, other.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"caBundle":"AAAA"}}`)))
		}},
		{"read another APIService", func() error {
			return sa.Get(ctx, client.ObjectKeyFromObject(other), other.DeepCopy())
		}},
		{"update another Secret of its namespace", func() error {
			var s corev1.Secret
			if err := sa.Get(ctx, client.ObjectKeyFromObject(foreign), &s); err != nil {
				return err
			}
			s.Data["k"] = []byte("changed")
			return sa.Update(ctx, &s)
		}},
		{"delete its own Secret", func() error {
			return sa.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.SecretName, Namespace: operatorNS}})
		}},
		{"list APIServices", func() error {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("apiregistration.k8s.io/v1")
			l.SetKind("APIServiceList")
			return sa.List(ctx, l)
		}},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			if err := tc.do(); !apierrors.IsForbidden(err) {
				t.Errorf("got %v, want Forbidden", err)
			}
		})
	}

}

// testAggregatedCert: the manager started by startManager (its
// ServiceAccount, --aggregated-api-cert-secret) serves, on its aggregated
// port, the certificate of the Secret it keeps, valid for the name
// kube-aggregator dials under the Secret's CA.
func testAggregatedCert(t *testing.T, m *runningManager) {
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "the manager's aggregated server to serve the Secret's certificate", func() (bool, string) {
		var sec corev1.Secret
		if err := admin.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "posture-aggregated-api-tls"}, &sec); err != nil {
			return false, err.Error()
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
			return false, "no CA in ca.crt"
		}
		conn, err := tls.Dial("tcp", m.aggregatedAddr, &tls.Config{RootCAs: roots, ServerName: "posture-aggregated-api." + operatorNS + ".svc", MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		block, _ := pem.Decode(sec.Data["tls.crt"])
		if block == nil || !bytes.Equal(conn.ConnectionState().PeerCertificates[0].Raw, block.Bytes) {
			return false, "a certificate other than the Secret's"
		}
		return true, ""
	})
}

// TestKustomizeManagerArgs: the manager accepts every flag config/manager
// gives it, and the aggregated API's certificate comes from the manager.
func TestKustomizeManagerArgs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		var d struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name string   `json:"name"`
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			args = d.Spec.Template.Spec.Containers[0].Args
		}
	}
	if len(args) == 0 {
		t.Fatal("no manager args in config/manager/manager.yaml")
	}
	f, _, err := parseManagerFlags(args)
	if err != nil {
		t.Fatalf("config/manager's args %v: %v", args, err)
	}
	if f.aggregatedCert.secret != "posture-aggregated-api-tls" || f.aggregatedAddr != ":8443" || f.aggregatedCert.service != "posture-aggregated-api" {
		t.Errorf("aggregated API flags %+v, addr %q", f.aggregatedCert, f.aggregatedAddr)
	}
	if _, _, err := parseManagerFlags([]string{"--aggregated-api-cert-secret=x", "--aggregated-api-cert-dir=/d"}); err == nil ||
		!strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("both certificate sources: %v", err)
	}
}
