package controllers_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/sources"
)

// TestDeclaredSourceWaitsForTenantAccess: the manager reads a declared
// report through the RoleBinding the tenant controller creates in the
// Tenant's namespace. Applied from Git with its Tenant, an Ingestion can be
// reconciled before that RoleBinding exists (or before the API server's
// authorizer has seen it): the read is then forbidden for a moment. That is
// something to wait for, like a ConfigMap not created yet, not a reason to
// fail the ingestion for good.
func TestDeclaredSourceWaitsForTenantAccess(t *testing.T) {
	st := newStore(t)
	report := smallReport(t)
	var granted atomic.Bool
	var refused atomic.Int32
	runInProcessWith(t, st, func(r *controllers.IngestionReconciler) {
		r.Sources = sources.Options{Wait: 20 * time.Second}
		r.Client = &forbidConfigMaps{Client: r.Client, granted: &granted, refused: &refused}
	})

	ns := tenantNamespace(t, "declared-access")
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string]string{"r.json": string(report)}})
	ing := declaredIngestion(ns, "nightly", posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r.json"}})
	create(t, ing)

	waiting := waitFor(t, ing, 10*time.Second, "a refused read of the ConfigMap", func(i *posturev1.Ingestion) bool {
		return refused.Load() > 0 && i.Status.Phase != ""
	})
	// A later reconcile, refused again, leaves it waiting.
	waiting = waitFor(t, waiting, 20*time.Second, "a second refused read", func(*posturev1.Ingestion) bool { return refused.Load() > 1 })
	if waiting.Status.Phase != posturev1.IngestionPending {
		t.Fatalf("while the manager may not read the ConfigMap yet: phase %q (%s), want pending", waiting.Status.Phase, waiting.Status.Message)
	}
	if !strings.Contains(waiting.Status.Message, "may not read ConfigMap") {
		t.Errorf("message = %q, want it to say what it waits for", waiting.Status.Message)
	}

	granted.Store(true)
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Summary != (posturev1.IngestionSummary{Total: 3, Processed: 3}) {
		t.Errorf("summary = %+v, want 3/3/0", got.Status.Summary)
	}
}

// forbidConfigMaps answers reads of ConfigMaps as the API server does while
// the manager holds no right on them in the namespace, until granted.
type forbidConfigMaps struct {
	client.Client
	granted *atomic.Bool
	refused *atomic.Int32
}

func (c *forbidConfigMaps) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok && !c.granted.Load() {
		c.refused.Add(1)
		return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, key.Name,
			errors.New("RBAC: the tenant-access RoleBinding is not in place yet"))
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
