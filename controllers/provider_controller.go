package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
)

// Ready reasons of a Provider.
const (
	ReasonProviderBilled = "Billed"
	ReasonNoTenant       = "NoTenant"
)

// ProviderReconciler keeps a Provider's status telling whether it is billed,
// and to which tenant. Billing itself (creating imported Providers within the
// plan limit) is done by the ingestion controller through Billing.
type ProviderReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=posture.dev,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups=posture.dev,resources=providers/status,verbs=get;update;patch

func (r *ProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p posturev1.Provider
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := p.Status.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	tenant, err := auth.TenantForNamespace(ctx, r.Client, p.Namespace)
	switch {
	case err != nil:
		setReady(&p.Status.Conditions, p.Generation, metav1.ConditionFalse, ReasonNoTenant, err.Error())
	case tenant == nil:
		setReady(&p.Status.Conditions, p.Generation, metav1.ConditionFalse, ReasonNoTenant,
			fmt.Sprintf("no Tenant uses namespace %s, so this provider is not billed to anyone", p.Namespace))
	default:
		origin := p.Spec.Origin
		if origin == "" {
			origin = posturev1.ProviderConnected
		}
		setReady(&p.Status.Conditions, p.Generation, metav1.ConditionTrue, ReasonProviderBilled,
			fmt.Sprintf("%s account %s billed to tenant %s (%s)", p.Spec.Type, p.Spec.UID, tenant.Name, origin))
	}
	if equality.Semantic.DeepEqual(before, &p.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(r.Status().Update(ctx, &p)))
}

// SetupWithManager watches Providers and the Tenants they are billed to.
func (r *ProviderReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&posturev1.Provider{}).
		Watches(&posturev1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.providersOfTenant),
			// Only spec changes (users, namespace) matter, not status writes.
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("provider").
		Complete(quietConflicts(r))
}

func (r *ProviderReconciler) providersOfTenant(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsInNamespace(ctx, r.Client, &posturev1.ProviderList{}, o.(*posturev1.Tenant).NamespaceName())
}

// ignoreConflict drops an optimistic-concurrency conflict: the newer version
// of the object that caused it is queued for its own reconcile.
