package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/testenv"
)

// scrapeToken is a token of a new ServiceAccount, bound to the
// metrics-reader ClusterRole when reader is set: what a Prometheus in the
// cluster scrapes with, or an identity without that right.
func scrapeToken(t *testing.T, name string, reader bool) string {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNS}}}
	if reader {
		objs = append(objs, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "posture-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: operatorNS}},
		})
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(operatorNS).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s: %v", name, err)
	}
	return tr.Status.Token
}

// scrape reads /metrics with the bearer token ("" for none): the status and,
// on 200, the parsed families.
func scrape(m *runningManager, bearer string) (int, map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+m.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	// The metrics server's certificate is self-signed; the token is what
	// this is about.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	return resp.StatusCode, families, err
}

// sample is the value of the series of family name with exactly these
// labels among its own (name=value pairs); a histogram's sample count.
func sample(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
series:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// testMetricsAfterIngestion uploads a report to tenant acme (made by
// testNamespacedRights) and finds its traces on the authenticated metrics
// endpoint, as a Prometheus bound to posture-metrics-reader would.
func testMetricsAfterIngestion(t *testing.T, m *runningManager) {
	ctx := context.Background()
	const tenantNS = "tenant-acme"
	var keySecret corev1.Secret
	if err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "ci-api-key"}, &keySecret); err != nil {
		t.Fatalf("the APIKey ci's Secret: %v", err)
	}
	report, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "scan.ocsf.json")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(report)
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, "https://"+m.apiAddr+"/api/v1/ingestions", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Api-Key "+string(keySecret.Data[controllers.APIKeySecretKey]))
	pool := x509.NewCertPool()
	pool.AddCert(m.cert)
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}).Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s %s", resp.Status, answer)
	}
	id := strings.TrimPrefix(resp.Header.Get("Location"), "/api/v1/ingestions/")

	var ing posturev1.Ingestion
	testenv.Eventually(t, 60*time.Second, "the ingestion to complete", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: id}, &ing); err != nil {
			return false, err.Error()
		}
		return ing.Status.Phase == posturev1.IngestionCompleted, string(ing.Status.Phase) + ": " + ing.Status.Message
	})
	var tenant posturev1.Tenant
	if err := admin.Get(ctx, client.ObjectKey{Name: "acme"}, &tenant); err != nil {
		t.Fatal(err)
	}

	sum := ing.Status.Summary
	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"posture_ingestions_ended_total", []string{"phase", "completed"}, 1},
		{"posture_ingestion_records_total", []string{"result", "valid"}, float64(sum.Processed - sum.Invalid)},
		{"posture_ingestion_records_total", []string{"result", "invalid"}, float64(sum.Invalid)},
		{"posture_ingestion_duration_seconds", []string{"phase", "completed"}, 1},
		{"posture_ingestions", []string{"phase", "completed"}, 1},
		{"posture_ingestions", []string{"phase", "failed"}, 0},
		{"posture_ingestion_queue_depth", nil, 0},
		{"posture_upload_bytes", []string{"result", "accepted"}, 1},
		{"posture_upload_duration_seconds", []string{"result", "accepted"}, 1},
		{"posture_api_requests_total", []string{"route", "/api/v1/ingestions", "method", "POST", "code", "202"}, 1},
		{"posture_api_request_duration_seconds", []string{"route", "/api/v1/ingestions", "method", "POST"}, 1},
		{"posture_tenant_provider_limit", []string{"tenant", "acme"}, float64(tenant.Status.ProviderLimit)},
	}
	token := scrapeToken(t, "prometheus-after-ingestion", true)
	testenv.Eventually(t, 30*time.Second, "the metrics endpoint to show the ingestion to a metrics reader", func() (bool, string) {
		code, families, err := scrape(m, token)
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("scrape: %d %v", code, err)
		}
		var wrong []string
		for _, w := range want {
			if got, ok := sample(families, w.name, w.labels...); !ok || got != w.value {
				wrong = append(wrong, fmt.Sprintf("%s%v = %v (present %t), want %v", w.name, w.labels, got, ok, w.value))
			}
		}
		// Providers are billed once the worker has seen the report: the
		// gauge follows the Tenant's status, whatever it reached.
		var now posturev1.Tenant
		if err := admin.Get(ctx, client.ObjectKey{Name: "acme"}, &now); err == nil {
			if got, ok := sample(families, "posture_tenant_providers", "tenant", "acme"); !ok || got != float64(now.Status.Providers) {
				wrong = append(wrong, fmt.Sprintf("posture_tenant_providers{tenant=acme} = %v (present %t), want %d", got, ok, now.Status.Providers))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})

	if code, _, err := scrape(m, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("an anonymous scrape answered %d (%v), want 401", code, err)
	}
}
