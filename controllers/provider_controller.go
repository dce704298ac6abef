package controllers

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
	orig := p.DeepCopy()
	var f providerFacts
	tenant, err := auth.TenantForNamespace(ctx, r.Client, p.Namespace)
	var ae *auth.Error
	switch {
	case errors.As(err, &ae):
		f.TenantProblem = ae.Reason
	case err != nil:
		return ctrl.Result{}, err
	case tenant != nil:
		f.Tenant, f.Limit = tenant.Name, tenant.Spec.Subscription.ProviderLimit
		if f.Limit > 0 {
			if f.Rank, err = r.rank(ctx, &p); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	deriveProviderStatus(&p, f)
	return finishStatus(ctx, r.Client, &p, orig, 0)
}

// rank is p's place, from 1, among its namespace's Providers by creation
// (then name): the first ones up to the plan limit are within it, so an
// older Provider never goes over the limit because a newer one arrived.
func (r *ProviderReconciler) rank(ctx context.Context, p *posturev1.Provider) (int, error) {
	var list posturev1.ProviderList
	if err := r.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		return 0, fmt.Errorf("list the Providers of namespace %s: %w", p.Namespace, err)
	}
	rank := 1
	for _, o := range list.Items {
		if o.Name == p.Name || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if c := o.CreationTimestamp.Compare(p.CreationTimestamp.Time); c < 0 || (c == 0 && o.Name < p.Name) {
			rank++
		}
	}
	return rank, nil
}

// SetupWithManager watches Providers and the Tenants they are billed to.
func (r *ProviderReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&posturev1.Provider{}).
		Watches(&posturev1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.providersOfTenant),
			// Only spec changes (users, namespace, limit) matter, not status writes.
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Provider created or deleted moves the others' places against
		// the limit; its updates do not.
		Watches(&posturev1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.providersOfNamespace),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc: func(e event.UpdateEvent) bool {
					return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
				},
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Named("provider").
		Complete(quietConflicts(r))
}

func (r *ProviderReconciler) providersOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	// Places matter only under a limit; without one, each Provider's own
	// events suffice (and an ingestion creating many stays linear).
	if t, err := auth.TenantForNamespace(ctx, r.Client, o.GetNamespace()); err == nil && (t == nil || t.Spec.Subscription.ProviderLimit == 0) {
		return nil
	}
	return requestsInNamespace(ctx, r.Client, &posturev1.ProviderList{}, o.GetNamespace())
}

func (r *ProviderReconciler) providersOfTenant(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsInNamespace(ctx, r.Client, &posturev1.ProviderList{}, o.(*posturev1.Tenant).NamespaceName())
}
