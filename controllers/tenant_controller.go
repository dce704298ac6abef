package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
)

// Ready reasons of a Tenant.
const (
	ReasonTenantReady        = "Ready"
	ReasonNamespaceConflict  = "NamespaceConflict"
	ReasonUnknownRole        = "UnknownRole"
	ReasonPasswordSecret     = "PasswordSecretMissing"
	ReasonNamespaceCreated   = "NamespaceCreated"
	ReasonNamespaceTerminate = "NamespaceTerminating"
)

// TenantReconciler makes a Tenant's namespace exist and carry the tenant
// label, checks its roles and users, and reports provider usage against the
// plan limit. Deleting a Tenant leaves its namespace (and the data in it) in
// place: removing customer data is a deliberate act, not a side effect.
type TenantReconciler struct {
	client.Client
	// APIReader reads users' password Secrets, which carry no label the
	// manager's cache selects.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// RecheckInterval is how often a Tenant waiting for a password Secret looks
	// again (those Secrets are not watched). Default 30 s.
	RecheckInterval time.Duration
	// Access is the RoleBinding that gives the manager its rights in each
	// tenant namespace (tenant_access.go).
	Access TenantAccess
}

// +kubebuilder:rbac:groups=posture.dev,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=posture.dev,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch
// Password Secrets are read through the tenant-access RoleBinding of the
// tenant's namespace (tenant_access.go), not a cluster-wide right.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t posturev1.Tenant
	if err := r.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := t.Status.DeepCopy()
	ns := t.NamespaceName()
	t.Status.ObservedGeneration = t.Generation
	t.Status.Namespace = ns
	t.Status.ProviderLimit = t.Spec.Subscription.ProviderLimit

	if reason, msg, err := r.ensureNamespace(ctx, &t, ns); err != nil {
		return ctrl.Result{}, err
	} else if reason != "" {
		setStalled(&t, reason == ReasonNamespaceConflict, reason, msg)
		return r.writeStatus(ctx, &t, before, metav1.ConditionFalse, reason, msg, r.recheck())
	}
	setStalled(&t, false, "", "")
	if err := r.ensureTenantAccess(ctx, &t, ns); err != nil {
		return ctrl.Result{}, err
	}

	count, err := CountProviders(ctx, r.Client, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	t.Status.Providers = int32(count)

	if reason, msg, err := r.checkUsers(ctx, &t, ns); err != nil {
		return ctrl.Result{}, err
	} else if reason != "" {
		return r.writeStatus(ctx, &t, before, metav1.ConditionFalse, reason, msg, r.recheck())
	}
	usage := fmt.Sprintf("%d providers, unlimited", count)
	if limit := t.Spec.Subscription.ProviderLimit; limit > 0 {
		usage = fmt.Sprintf("%d of %d providers", count, limit)
	}
	sub := "no active subscription (ingestion answers 402)"
	if t.Spec.Subscription.Active {
		sub = "subscription active"
	}
	msg := fmt.Sprintf("Namespace %s, %d users, %s, %s", ns, len(t.Spec.Users), sub, usage)
	return r.writeStatus(ctx, &t, before, metav1.ConditionTrue, ReasonTenantReady, msg, 0)
}

func (r *TenantReconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 30 * time.Second
}

// ensureNamespace creates the namespace or adopts an existing one by
// labelling it, unless another tenant's label is already on it.
func (r *TenantReconciler) ensureNamespace(ctx context.Context, t *posturev1.Tenant, ns string) (reason, msg string, err error) {
	var nsObj corev1.Namespace
	err = r.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)
	if apierrors.IsNotFound(err) {
		nsObj = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			posturev1.LabelTenant:    labelValue(t.Name),
			posturev1.LabelManagedBy: posturev1.ManagedByValue,
		}}}
		if err := r.Create(ctx, &nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", fmt.Errorf("create namespace %s for tenant %s: %w", ns, t.Name, err)
		} else if err == nil {
			emit(r.Recorder, t, corev1.EventTypeNormal, ReasonNamespaceCreated, "Create", "Created namespace %s", ns)
			return "", "", nil
		}
		if err := r.Get(ctx, types.NamespacedName{Name: ns}, &nsObj); err != nil {
			return "", "", fmt.Errorf("read namespace %s: %w", ns, err)
		}
	} else if err != nil {
		return "", "", fmt.Errorf("read namespace %s: %w", ns, err)
	}
	if nsObj.Status.Phase == corev1.NamespaceTerminating {
		return ReasonNamespaceTerminate, fmt.Sprintf("namespace %s is being deleted; it is created again once it is gone", ns), nil
	}
	switch owner := nsObj.Labels[posturev1.LabelTenant]; owner {
	case labelValue(t.Name):
		return "", "", nil
	case "":
		// Optimistic locking: when two Tenants adopt the same namespace at
		// once, the second patch fails and its retry sees the first's label.
		patch := client.MergeFromWithOptions(nsObj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels[posturev1.LabelTenant] = labelValue(t.Name)
		if err := r.Patch(ctx, &nsObj, patch); err != nil {
			return "", "", fmt.Errorf("label namespace %s for tenant %s: %w", ns, t.Name, err)
		}
		return "", "", nil
	default:
		return ReasonNamespaceConflict, fmt.Sprintf("namespace %s belongs to tenant %s (label %s); choose another spec.namespace", ns, owner, posturev1.LabelTenant), nil
	}
}

// checkUsers verifies every user names a role of the tenant and every
// password Secret exists with its key. It reads the Secrets' keys, never
// their values.
func (r *TenantReconciler) checkUsers(ctx context.Context, t *posturev1.Tenant, ns string) (reason, msg string, err error) {
	var unknownRole, noSecret []string
	for _, u := range t.Spec.Users {
		if _, ok := auth.FindRole(t, u.Role); !ok {
			unknownRole = append(unknownRole, fmt.Sprintf("%s names role %q", u.Email, u.Role))
		}
		if u.PasswordSecretRef == nil {
			continue
		}
		key := u.PasswordSecretRef.Key
		if key == "" {
			key = "password"
		}
		var sec corev1.Secret
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: u.PasswordSecretRef.Name}, &sec)
		switch {
		case apierrors.IsNotFound(err):
			noSecret = append(noSecret, fmt.Sprintf("%s: Secret %s/%s does not exist", u.Email, ns, u.PasswordSecretRef.Name))
		case err != nil:
			return "", "", fmt.Errorf("read password Secret %s/%s: %w", ns, u.PasswordSecretRef.Name, err)
		case len(sec.Data[key]) == 0:
			noSecret = append(noSecret, fmt.Sprintf("%s: Secret %s/%s has no key %s", u.Email, ns, u.PasswordSecretRef.Name, key))
		}
	}
	if len(unknownRole) > 0 {
		return ReasonUnknownRole, "unknown role: " + strings.Join(unknownRole, "; ") + "; users with an unknown role hold no permissions", nil
	}
	if len(noSecret) > 0 {
		return ReasonPasswordSecret, "password Secret missing: " + strings.Join(noSecret, "; ") + "; these users cannot sign in", nil
	}
	return "", "", nil
}

// setStalled keeps Stalled=True on a Tenant that cannot progress until its
// spec changes: it names a namespace another tenant owns. Stalled tells
// kstatus (and Argo CD, Flux) to stop waiting for it to become Ready.
func setStalled(t *posturev1.Tenant, stalled bool, reason, msg string) {
	if !stalled {
		meta.RemoveStatusCondition(&t.Status.Conditions, posturev1.ConditionStalled)
		return
	}
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type: posturev1.ConditionStalled, Status: metav1.ConditionTrue,
		Reason: reason, Message: msg, ObservedGeneration: t.Generation,
	})
}

func (r *TenantReconciler) writeStatus(ctx context.Context, t *posturev1.Tenant, before *posturev1.TenantStatus, status metav1.ConditionStatus, reason, msg string, requeue time.Duration) (ctrl.Result, error) {
	return writeReady(ctx, r.Client, t, &t.Status.Conditions, before, &t.Status, status, reason, msg, requeue)
}

// SetupWithManager watches Tenants, their namespaces, and the Providers that
// count against their limit.
func (r *TenantReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&posturev1.Tenant{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfNamespace)).
		Watches(&posturev1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfObject)).
		Named("tenant").
		Complete(quietConflicts(r))
}

func (r *TenantReconciler) tenantsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.tenantsUsing(ctx, o.GetName())
}

func (r *TenantReconciler) tenantsOfObject(ctx context.Context, o client.Object) []reconcile.Request {
	return r.tenantsUsing(ctx, o.GetNamespace())
}

func (r *TenantReconciler) tenantsUsing(ctx context.Context, ns string) []reconcile.Request {
	var list posturev1.TenantList
	if err := r.List(ctx, &list, client.MatchingFields{auth.IndexTenantNamespace: ns}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the tenants of a namespace", "namespace", ns)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: t.Name}})
	}
	return reqs
}

// CountProviders counts the billed Providers of a namespace; one being deleted
// no longer counts.
func CountProviders(ctx context.Context, r client.Reader, ns string) (int, error) {
	var list posturev1.ProviderList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("list the Providers of namespace %s: %w", ns, err)
	}
	n := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n, nil
}

// labelValue is the label form of a name; the tenant label of a namespace must
// match what the authenticator compares it with.
func labelValue(s string) string { return auth.LabelValue(s) }
