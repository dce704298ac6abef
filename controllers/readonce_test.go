package controllers_test

import (
	"context"
	"io"
	"os"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/store"
)

// openCounter counts, per blob, the times a report is opened for reading:
// the worker and anything else that reads it, on the same store.
type openCounter struct {
	store.Store
	mu    sync.Mutex
	opens map[string]int // tenant/blob -> OpenBlob calls
}

func (c *openCounter) OpenBlob(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	c.mu.Lock()
	c.opens[tenant+"/"+id]++
	c.mu.Unlock()
	return c.Store.OpenBlob(ctx, tenant, id)
}

func (c *openCounter) count(tenant, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens[tenant+"/"+id]
}

// TestReportReadOnceAfterIntake: billing takes a report's accounts from
// what intake recorded with the blob, so once intake has stored it the
// report is read by the worker alone, whatever its source. A report stored
// before intake recorded accounts (queued across an upgrade) is still
// billed, at the cost of the one extra read that finds them.
func TestReportReadOnceAfterIntake(t *testing.T) {
	cs := &openCounter{Store: newStore(t), opens: map[string]int{}}
	runTenancy(t, cs)

	cases := []struct {
		name string
		// start creates the Ingestion of path in ns for tenant.
		start     func(t *testing.T, tenant, ns, path string) *posturev1.Ingestion
		wantOpens int
	}{
		{"upload", func(t *testing.T, tenant, ns, path string) *posturev1.Ingestion {
			return upload(t, cs, tenant, ns, path)
		}, 1},
		{"configMapRef", func(t *testing.T, tenant, ns, path string) *posturev1.Ingestion {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string]string{"report.ocsf.json": string(data)}})
			ing := declaredIngestion(ns, "nightly-scan", posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "report.ocsf.json"}})
			create(t, ing)
			return ing
		}, 1},
		{"upload stored before accounts were recorded", func(t *testing.T, tenant, ns, path string) *posturev1.Ingestion {
			return uploadUnrecorded(t, cs, tenant, ns, path)
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 2 })
			ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
			// Three accounts against a plan of two: the stored list decides
			// which account is denied, as the report itself did.
			ing := tc.start(t, tn.Name, ns, accountsReport(t, 2, "111111111111", "222222222222", "333333333333"))
			got := waitPhase(t, ing, posturev1.IngestionCompleted)
			if want := []string{"aws/111111111111", "aws/222222222222"}; !slices.Equal(got.Status.Providers, want) {
				t.Errorf("status.providers = %v, want %v", got.Status.Providers, want)
			}
			if want := []string{"aws/333333333333"}; !slices.Equal(got.Status.DeniedProviders, want) {
				t.Errorf("status.deniedProviders = %v, want %v", got.Status.DeniedProviders, want)
			}
			if got.Status.Summary.Processed != 6 || got.Status.Summary.Invalid != 2 {
				t.Errorf("summary = %+v, want 6 processed, 2 invalid (the denied account's)", got.Status.Summary)
			}
			blob := ""
			if u := got.Spec.Source.Upload; u != nil {
				blob = u.BlobID
			} else if got.Status.Report != nil {
				blob = got.Status.Report.BlobID
			}
			if blob == "" {
				t.Fatalf("no stored report for %s: spec %+v, status.report %+v", got.Name, got.Spec.Source, got.Status.Report)
			}
			if n := cs.count(tn.Name, blob); n != tc.wantOpens {
				t.Errorf("report %s was opened %d times, want %d", blob, n, tc.wantOpens)
			}
		})
	}
}
