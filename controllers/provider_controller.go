package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
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
	// ReasonPlanLimit: the tenant's plan is full, so the Provider is not
	// billed (Stalled) until a place frees up or the limit is raised.
	ReasonPlanLimit = "PlanLimitExceeded"
)

// ProviderReconciler admits every Provider to its tenant's plan, whoever
// wrote it (an ingestion, a person, GitOps), and keeps its status telling
// whether it is billed and to which tenant. A Provider beyond the plan's
// limit is not billed: it reads Ready=False and Stalled=True with reason
// PlanLimitExceeded, and is admitted later if a place frees up.
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
	before := p.Status.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	var requeue time.Duration
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
		b := &Billing{Client: r.Client, APIReader: r.apiReader()}
		admitted, count, limit, err := b.AdmitProvider(ctx, tenant.Name, &p)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !admitted {
			msg := fmt.Sprintf("tenant %s's plan bills %d providers and has %d; this %s account %s is not billed and its findings are not imported until a provider is deleted or spec.subscription.providerLimit is raised",
				tenant.Name, limit, count, p.Spec.Type, p.Spec.UID)
			setProviderStalled(&p, true, msg)
			setReady(&p.Status.Conditions, p.Generation, metav1.ConditionFalse, ReasonPlanLimit, msg)
			requeue = r.recheck()
			break
		}
		setProviderStalled(&p, false, "")
		setReady(&p.Status.Conditions, p.Generation, metav1.ConditionTrue, ReasonProviderBilled,
			fmt.Sprintf("%s account %s billed to tenant %s (%s)", p.Spec.Type, p.Spec.UID, tenant.Name, origin))
	}
	if equality.Semantic.DeepEqual(before, &p.Status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, client.IgnoreNotFound(ignoreConflict(r.Status().Update(ctx, &p)))
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

// setProviderStalled keeps Stalled=True on a Provider the plan does not bill,
// so that kstatus (and Argo CD, Flux) report it failed instead of waiting.
func setProviderStalled(p *posturev1.Provider, stalled bool, msg string) {
	if !stalled {
		meta.RemoveStatusCondition(&p.Status.Conditions, posturev1.ConditionStalled)
		return
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: posturev1.ConditionStalled, Status: metav1.ConditionTrue,
		Reason: ReasonPlanLimit, Message: msg, ObservedGeneration: p.Generation,
	})
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
