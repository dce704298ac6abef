package controllers

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Ready reasons of a Provider.
const (
	ReasonProviderBilled = "Billed"
	ReasonNoTenant       = "NoTenant"
)

// ProviderReconciler admits every Provider to its tenant's plan, whoever
// wrote it (an ingestion, a person, GitOps), and keeps its status telling
// whether it is billed and to which tenant. A Provider beyond the plan's
// limit is not billed: it reads Ready=False and Stalled=True with reason
// ProviderLimitExceeded, and is admitted later if a place frees up.
type ProviderReconciler struct {
	client.Client
	// APIReader reads Tenants and Providers uncached for admission.
	APIReader client.Reader
	// RecheckInterval is how often a Provider over the limit looks for a
	// free place. Default 30 s.
	RecheckInterval time.Duration
}

// +kubebuilder:rbac:groups=posture.dev,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups=posture.dev,resources=providers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=tenants/status,verbs=get;update;patch

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
	tenant, err := tenancy.ForNamespace(ctx, r.Client, p.Namespace)
	var te *tenancy.Error
	switch {
	case errors.As(err, &te):
		f.TenantProblem = te.Reason
	case err != nil:
		return ctrl.Result{}, err
	case tenant != nil:
		f.Tenant = tenant.Name
		b := &Billing{Client: r.Client, APIReader: r.apiReader()}
		if f.Admitted, f.Billed, f.Limit, err = b.AdmitProvider(ctx, tenant.Name, &p); err != nil {
			return ctrl.Result{}, err
		}
	}
	deriveProviderStatus(&p, f)
	var requeue time.Duration
	if f.Tenant != "" && !f.Admitted {
		// A place frees up on events this controller watches (a Provider
		// deleted, the limit raised) and also when an admission lapses,
		// which nothing announces: look again now and then.
		requeue = r.recheck()
	}
	return finishStatus(ctx, r.Client, &p, orig, requeue)
}

func (r *ProviderReconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *ProviderReconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 30 * time.Second
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
	if t, err := tenancy.ForNamespace(ctx, r.Client, o.GetNamespace()); err == nil && (t == nil || t.Spec.Subscription.ProviderLimit == 0) {
		return nil
	}
	return requestsInNamespace(ctx, r.Client, &posturev1.ProviderList{}, o.GetNamespace())
}

func (r *ProviderReconciler) providersOfTenant(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsInNamespace(ctx, r.Client, &posturev1.ProviderList{}, o.(*posturev1.Tenant).NamespaceName())
}
