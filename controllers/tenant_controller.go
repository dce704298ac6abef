package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	orig := t.DeepCopy()
	f := tenantFacts{Namespace: t.NamespaceName()}
	if err := r.ensureNamespace(ctx, &t, &f); err != nil {
		return ctrl.Result{}, err
	}
	if f.NamespaceOwner != "" || f.NamespaceTerminating {
		deriveTenantStatus(&t, f)
		return finishStatus(ctx, r.Client, &t, orig, r.recheck())
	}
	if err := r.ensureTenantAccess(ctx, &t, f.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	count, err := CountProviders(ctx, r.Client, f.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	f.Providers = count
	if err := r.checkUsers(ctx, &t, &f); err != nil {
		return ctrl.Result{}, err
	}
	deriveTenantStatus(&t, f)
	var requeue time.Duration
	if len(f.UnknownRoles)+len(f.MissingSecrets) > 0 {
		// Password Secrets are not watched: look again for the one awaited.
		requeue = r.recheck()
	}
	return finishStatus(ctx, r.Client, &t, orig, requeue)
}

func (r *TenantReconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 30 * time.Second
}

// ensureNamespace creates the namespace or adopts an existing one by
// labelling it, unless another tenant's label is already on it; it records
// in f what stands in the way.
func (r *TenantReconciler) ensureNamespace(ctx context.Context, t *posturev1.Tenant, f *tenantFacts) error {
	ns := f.Namespace
	var nsObj corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)
	if apierrors.IsNotFound(err) {
		nsObj = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			posturev1.LabelTenant:    labelValue(t.Name),
			posturev1.LabelManagedBy: posturev1.ManagedByValue,
		}}}
		if err := r.Create(ctx, &nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s for tenant %s: %w", ns, t.Name, err)
		} else if err == nil {
			emit(r.Recorder, t, corev1.EventTypeNormal, ReasonNamespaceCreated, "Create", "Created namespace %s", ns)
			return nil
		}
		if err := r.Get(ctx, types.NamespacedName{Name: ns}, &nsObj); err != nil {
			return fmt.Errorf("read namespace %s: %w", ns, err)
		}
	} else if err != nil {
		return fmt.Errorf("read namespace %s: %w", ns, err)
	}
	if nsObj.Status.Phase == corev1.NamespaceTerminating {
		f.NamespaceTerminating = true
		return nil
	}
	switch owner := nsObj.Labels[posturev1.LabelTenant]; owner {
	case labelValue(t.Name):
		return nil
	case "":
		// Optimistic locking: when two Tenants adopt the same namespace at
		// once, the second patch fails and its retry sees the first's label.
		patch := client.MergeFromWithOptions(nsObj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels[posturev1.LabelTenant] = labelValue(t.Name)
		if err := r.Patch(ctx, &nsObj, patch); err != nil {
			return fmt.Errorf("label namespace %s for tenant %s: %w", ns, t.Name, err)
		}
		return nil
	default:
		f.NamespaceOwner = owner
		return nil
	}
}

// checkUsers verifies every user names a role of the tenant and every
// password Secret exists with its key, recording in f each that does not. It
// reads the Secrets' keys, never their values.
func (r *TenantReconciler) checkUsers(ctx context.Context, t *posturev1.Tenant, f *tenantFacts) error {
	ns := f.Namespace
	for _, u := range t.Spec.Users {
		if _, ok := auth.FindRole(t, u.Role); !ok {
			f.UnknownRoles = append(f.UnknownRoles, fmt.Sprintf("%s names role %q", u.Email, u.Role))
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
			f.MissingSecrets = append(f.MissingSecrets, fmt.Sprintf("%s: Secret %s/%s does not exist", u.Email, ns, u.PasswordSecretRef.Name))
		case err != nil:
			return fmt.Errorf("read password Secret %s/%s: %w", ns, u.PasswordSecretRef.Name, err)
		case len(sec.Data[key]) == 0:
			f.MissingSecrets = append(f.MissingSecrets, fmt.Sprintf("%s: Secret %s/%s has no key %s", u.Email, ns, u.PasswordSecretRef.Name, key))
		}
	}
	return nil
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
