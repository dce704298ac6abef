package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// TenantStatus is the one writer of a Tenant's status. The Tenant
// reconciler's summary and billing's admissions (status.admittedProviders,
// which the Ingestion and Provider reconcilers change too) are
// transactions it applies, in the shape of CloudNativePG's status
// transactions: each runs on the Tenant as the API server holds it, and the
// write carries the resourceVersion read, so the API server serialises the
// writers across goroutines, controllers and manager replicas. A
// transaction that loses the race runs again on the winner's result.
type TenantStatus struct {
	// Client writes the status.
	Client client.Client
	// Reader reads the Tenant straight from the API server: a decision on
	// a cached one would only meet a conflict and run again.
	Reader client.Reader
}

// tenantBackoff spreads the retries of writers that keep losing the race
// for the same Tenant; many ingestions starting at once admit through it.
var tenantBackoff = wait.Backoff{Steps: 30, Duration: 20 * time.Millisecond, Factor: 1.3, Jitter: 1, Cap: 2 * time.Second}

// errTenantChanged ends a transaction whose facts were gathered for a
// generation of the Tenant that is no longer current.
var errTenantChanged = errors.New("the Tenant's spec changed while it was reconciled")

// Commit applies tx to Tenant name and writes its status when tx changed
// it. tx must be repeatable: it runs once per try. It returns the Tenant as
// written, or as read when nothing changed.
func (w TenantStatus) Commit(ctx context.Context, name string, tx func(*posturev1.Tenant) error) (*posturev1.Tenant, error) {
	var t posturev1.Tenant
	try := func() error {
		if err := w.Reader.Get(ctx, types.NamespacedName{Name: name}, &t); err != nil {
			return fmt.Errorf("read Tenant %s: %w", name, err)
		}
		before := t.Status.DeepCopy()
		if err := tx(&t); err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(before, &t.Status) {
			return nil
		}
		return w.Client.Status().Update(ctx, &t)
	}
	// last is what the last try returned: RetryOnConflict reports a try that
	// failed on a cancelled context as an interrupted wait, which it answers
	// with the last conflict seen, nil when there was none.
	var last error
	err := retry.RetryOnConflict(tenantBackoff, func() error {
		last = try()
		return last
	})
	if err == nil {
		err = last
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}
