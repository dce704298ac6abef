package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/mute"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Reasons of a MuteRule's conditions.
const (
	ReasonMuteApplied  = "Applied"
	ReasonMuteApplying = "Applying"
	ReasonMuteInvalid  = "InvalidRule"
	ReasonMuteExpired  = "Expired"
)

// DefaultMuteBatch is how many stored findings one reconcile of a
// MuteRule reads in its pass: one short store transaction, after which
// the rule is requeued, so a pass over millions of findings never holds
// the store or the controller for long, and its progress shows in status.
const DefaultMuteBatch = 2000

// MuteRuleReconciler keeps a MuteRule's marks on its tenant's findings:
// it validates the rule, stores it, runs its pass over the stored findings
// batch by batch (status.scannedFindings, status.matchedFindings), removes
// its marks once it expires, and, holding a finalizer, when it is deleted.
type MuteRuleReconciler struct {
	client.Client
	Store store.Mutes
	// Batch is how many findings a reconcile's step of the pass reads
	// (DefaultMuteBatch when 0).
	Batch int
	// Now is the clock (time.Now when nil), for tests of expiry.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=posture.dev,resources=muterules,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=muterules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=muterules/finalizers,verbs=update

func (r *MuteRuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rule posturev1.MuteRule
	if err := r.Get(ctx, req.NamespacedName, &rule); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	tenant, err := tenancy.ForNamespace(ctx, r.Client, rule.Namespace)
	var te *tenancy.Error
	problem := ""
	switch {
	case errors.As(err, &te):
		problem = te.Reason
	case err != nil:
		return ctrl.Result{}, err
	case tenant == nil:
		problem = fmt.Sprintf("no Tenant uses namespace %s, so this rule mutes nobody's findings", rule.Namespace)
	}
	if !rule.DeletionTimestamp.IsZero() {
		if tenant != nil {
			if err := r.Store.DeleteMuteRule(ctx, tenant.Name, rule.Name); err != nil {
				return ctrl.Result{}, fmt.Errorf("remove the marks of MuteRule %s/%s: %w", rule.Namespace, rule.Name, err)
			}
		}
		_, err := setFinalizer(ctx, r.Client, &rule, posturev1.FinalizerMuteRule, false)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if changed, err := setFinalizer(ctx, r.Client, &rule, posturev1.FinalizerMuteRule, true); err != nil || changed {
		// The finalizer first: no mark is written that a deletion could miss.
		return ctrl.Result{}, err
	}
	orig := rule.DeepCopy()
	f := muteFacts{Now: r.now(), Problem: problem}
	if tenant != nil {
		f.Tenant = tenant.Name
	}
	if _, err := mute.Compile(mute.MatchOf(rule.Spec.Match)); err != nil {
		f.Invalid = err.Error()
	}
	expired := rule.Spec.ExpiresAt != nil && !f.Now.Before(rule.Spec.ExpiresAt.Time)
	switch {
	case f.Tenant == "":
	case f.Invalid != "" || expired:
		// An invalid or expired rule mutes nothing: its marks go.
		if err := r.Store.DeleteMuteRule(ctx, f.Tenant, rule.Name); err != nil {
			return ctrl.Result{}, fmt.Errorf("remove the marks of MuteRule %s/%s: %w", rule.Namespace, rule.Name, err)
		}
	default:
		if err := r.Store.PutMuteRule(ctx, f.Tenant, mute.Stored(&rule)); err != nil {
			return ctrl.Result{}, fmt.Errorf("store MuteRule %s/%s: %w", rule.Namespace, rule.Name, err)
		}
		p, err := r.Store.ApplyMuteRule(ctx, f.Tenant, rule.Name, r.batch())
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("mark the findings of MuteRule %s/%s: %w", rule.Namespace, rule.Name, err)
		}
		f.Progress = &p
	}
	requeue := deriveMuteRuleStatus(&rule, f)
	_, res, err := patchStatus(ctx, r.Client, &rule, orig)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *MuteRuleReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *MuteRuleReconciler) batch() int {
	if r.Batch > 0 {
		return r.Batch
	}
	return DefaultMuteBatch
}

// muteFacts is what a MuteRule reconcile observed and did.
type muteFacts struct {
	Now time.Time
	// Tenant is the tenant of the rule's namespace; Problem says why there
	// is none.
	Tenant, Problem string
	// Invalid says which field of the match is wrong, and why.
	Invalid string
	// Progress is where the rule's pass stands after this reconcile's step.
	Progress *store.MuteProgress
}

// muteStep is how soon a rule whose pass is not done takes its next step.
const muteStep = 10 * time.Millisecond

// deriveMuteRuleStatus sets a MuteRule's status from what its reconcile
// observed, and returns how soon it must be reconciled again (its next
// step, or its expiry), zero for never.
func deriveMuteRuleStatus(rule *posturev1.MuteRule, f muteFacts) time.Duration {
	rule.Status.ObservedGeneration = rule.Generation
	exp := rule.Spec.ExpiresAt
	expired := exp != nil && !f.Now.Before(exp.Time)
	var v verdict
	var next time.Duration
	switch {
	case f.Invalid != "":
		rule.Status.MatchedFindings, rule.Status.ScannedFindings = 0, 0
		v = verdict{reason: ReasonMuteInvalid, stalled: true, message: "invalid rule, it mutes nothing: " + f.Invalid}
	case f.Tenant == "":
		v = verdict{reason: ReasonNoTenant, stalled: true, message: f.Problem}
	case expired:
		rule.Status.MatchedFindings, rule.Status.ScannedFindings = 0, 0
		rule.Status.AppliedGeneration = rule.Generation
		v = verdict{ready: metav1.ConditionTrue, reason: ReasonMuteExpired,
			message: fmt.Sprintf("expired at %s: it mutes nothing any more; delete it, or move spec.expiresAt", exp.UTC().Format(time.RFC3339))}
	case f.Progress != nil && !f.Progress.Done:
		rule.Status.MatchedFindings, rule.Status.ScannedFindings = f.Progress.Matched, f.Progress.Scanned
		v = verdict{reason: ReasonMuteApplying, reconciling: true,
			message: fmt.Sprintf("marking the stored findings of tenant %s: %s read, %s muted so far", f.Tenant,
				counted(f.Progress.Scanned, "finding"), counted(f.Progress.Matched, "finding"))}
		next = muteStep
	case f.Progress != nil:
		rule.Status.MatchedFindings, rule.Status.ScannedFindings = f.Progress.Matched, f.Progress.Scanned
		rule.Status.AppliedGeneration = rule.Generation
		v = verdict{ready: metav1.ConditionTrue, reason: ReasonMuteApplied,
			message: fmt.Sprintf("mutes %s of tenant %s: %s", counted(f.Progress.Matched, "finding"), f.Tenant, rule.Spec.Reason)}
		if exp != nil {
			next = exp.Sub(f.Now) + time.Second/10
		}
	}
	v.apply(&rule.Status.Conditions, rule.Generation)
	if expired {
		meta.SetStatusCondition(&rule.Status.Conditions, metav1.Condition{Type: posturev1.ConditionExpired, Status: metav1.ConditionTrue,
			Reason: ReasonMuteExpired, Message: v.message, ObservedGeneration: rule.Generation})
	} else {
		meta.RemoveStatusCondition(&rule.Status.Conditions, posturev1.ConditionExpired)
	}
	return next
}

// SetupWithManager watches MuteRules and the Tenants of their namespaces.
func (r *MuteRuleReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Its own status writes do not wake it: a pass requeues itself.
		For(&posturev1.MuteRule{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
					len(e.ObjectOld.GetFinalizers()) != len(e.ObjectNew.GetFinalizers())
			},
		}))).
		Watches(&posturev1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return requestsInNamespace(ctx, r.Client, &posturev1.MuteRuleList{}, o.(*posturev1.Tenant).NamespaceName())
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("muterule").
		Complete(quietConflicts(r))
}
