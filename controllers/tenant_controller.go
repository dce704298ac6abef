package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Ready reasons of a Tenant.
const (
	ReasonTenantReady        = "Ready"
	ReasonNamespaceConflict  = "NamespaceConflict"
	ReasonUnknownRole        = "UnknownRole"
	ReasonPasswordSecret     = "PasswordSecretMissing"
	ReasonNamespaceCreated   = "NamespaceCreated"
	ReasonNamespaceTerminate = "NamespaceTerminating"
	ReasonHistoryPruned      = "IngestionHistoryPruned"
	ReasonTenantDataDeleted  = "TenantDataDeleted"
)

// FinalizerTenantData holds a deleted Tenant until its data in the store
// (findings, scans, runs, error rows, reports) is deleted, which happens
// once the grace period has passed since the deletion.
const FinalizerTenantData = "posture.dev/tenant-data"

// DefaultTenantDataGracePeriod is how long a deleted Tenant's data is kept
// before it is deleted, unless --tenant-data-grace-period says otherwise.
const DefaultTenantDataGracePeriod = 24 * time.Hour

// TenantReconciler makes a Tenant's namespace exist and carry the tenant
// label, checks its roles and users, keeps its admitted providers and its
// ingestion history within bounds, and reports provider usage against the
// plan limit. Deleting a Tenant leaves its namespace in place; its data in
// the store is deleted once DataGracePeriod has passed, so that a mistaken
// deletion (a pruned Git path) loses nothing before an operator can step in.
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
	// Store, when set, is where a deleted Tenant's data is deleted from; nil
	// leaves the data and adds no finalizer.
	Store store.TenantData
	// DataGracePeriod is how long after a Tenant's deletion its data stays
	// in the store; 0 deletes it at once.
	DataGracePeriod time.Duration
	Now             func() time.Time
}

// +kubebuilder:rbac:groups=posture.dev,resources=tenants,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=posture.dev,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=ingestions,verbs=get;list;watch;delete
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
		return r.reconcileDelete(ctx, &t)
	}
	if r.Store != nil {
		if _, err := setFinalizer(ctx, r.Client, &t, FinalizerTenantData, true); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	f := tenantFacts{Namespace: t.NamespaceName()}
	if err := r.ensureNamespace(ctx, &t, &f); err != nil {
		return ctrl.Result{}, err
	}
	var requeue time.Duration
	if f.NamespaceOwner != "" || f.NamespaceTerminating {
		requeue = r.recheck()
	} else {
		if err := r.ensureTenantAccess(ctx, &t, f.Namespace); err != nil {
			return ctrl.Result{}, err
		}
		var err error
		if requeue, err = r.pruneHistory(ctx, &t, f.Namespace); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.checkUsers(ctx, &t, &f); err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case len(f.UnknownRoles)+len(f.MissingSecrets) > 0:
			// Password Secrets are not watched: look again for the one awaited.
			requeue = r.recheck()
		case hasPasswordSecrets(&t) && (requeue == 0 || requeue > r.secretRecheck()):
			// Nor is their deletion: look again now and then, so that a Tenant
			// whose users can no longer sign in does not stay Ready.
			requeue = r.secretRecheck()
		}
	}
	// The one status write: the summary of what this reconcile found, and
	// the admissions of deleted Providers pruned, which gives their places
	// back, in one transaction of the Tenant's status writer.
	b := r.billing()
	_, err := TenantStatus{Client: r.Client, Reader: b.APIReader}.Commit(ctx, t.Name, func(fresh *posturev1.Tenant) error {
		if fresh.Generation != t.Generation {
			return errTenantChanged
		}
		if err := b.prune(ctx, fresh); err != nil {
			return err
		}
		f.Providers = tenancy.UsageOf(fresh).Billed
		deriveTenantStatus(fresh, f)
		return nil
	})
	switch {
	case errors.Is(err, errTenantChanged):
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// hasPasswordSecrets says whether a user of t signs in with a password Secret.
func hasPasswordSecrets(t *posturev1.Tenant) bool {
	for _, u := range t.Spec.Users {
		if u.PasswordSecretRef != nil {
			return true
		}
	}
	return false
}

// secretRecheck is how often a Ready Tenant's password Secrets are looked at
// again: ten times RecheckInterval, 5 minutes by default, as API key Secrets.
func (r *TenantReconciler) secretRecheck() time.Duration {
	return 10 * r.recheck()
}

func (r *TenantReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *TenantReconciler) billing() *Billing {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	return &Billing{Client: r.Client, APIReader: reader, Now: r.Now}
}

// pruneHistory deletes the ended Ingestions of the tenant beyond
// spec.ingestionHistory, oldest first; their finalizer then deletes what
// they own in the store. It returns when the oldest kept one will be due.
func (r *TenantReconciler) pruneHistory(ctx context.Context, t *posturev1.Tenant, ns string) (time.Duration, error) {
	var list posturev1.IngestionList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("list the Ingestions of tenant %s: %w", t.Name, err)
	}
	maxCount, maxAge := t.Spec.IngestionHistory.Limits()
	ended := make([]*posturev1.Ingestion, 0, len(list.Items))
	for i := range list.Items {
		// A declared Ingestion lives as long as its manifest: Git bounds
		// those, and one deleted here would be applied again by a GitOps
		// tool, and imported again.
		if ing := &list.Items[i]; ing.Status.Phase.Terminal() && ing.DeletionTimestamp.IsZero() && !declared(ing) {
			ended = append(ended, ing)
		}
	}
	// Newest first; the name breaks ties so the order is stable.
	slices.SortFunc(ended, func(a, b *posturev1.Ingestion) int {
		if c := endedAt(b).Compare(endedAt(a)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	now := r.now()
	var next time.Duration
	for i, ing := range ended {
		age := now.Sub(endedAt(ing))
		if i < maxCount && (maxAge <= 0 || age < maxAge) {
			if due := maxAge - age; maxAge > 0 && (next == 0 || due < next) {
				next = due
			}
			continue
		}
		uid := ing.UID
		if err := r.Delete(ctx, ing, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete ingestion %s/%s beyond the history limit of tenant %s: %w", ing.Namespace, ing.Name, t.Name, err)
		}
		emit(r.Recorder, t, corev1.EventTypeNormal, ReasonHistoryPruned, "Delete",
			"Deleted ingestion %s, ended %s ago, beyond the history limit (%d ingestions, %s)", ing.Name, age.Round(time.Second), maxCount, maxAge)
	}
	return next, nil
}

// endedAt is when an ended Ingestion ended; one without the timestamp
// counts from its creation.
func endedAt(ing *posturev1.Ingestion) time.Time {
	if ing.Status.CompletedAt != nil {
		return ing.Status.CompletedAt.Time
	}
	return ing.CreationTimestamp.Time
}

// reconcileDelete deletes a deleted Tenant's data from the store once the
// grace period has passed, then lets the Tenant go.
func (r *TenantReconciler) reconcileDelete(ctx context.Context, t *posturev1.Tenant) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(t, FinalizerTenantData) {
		return ctrl.Result{}, nil
	}
	if wait := t.DeletionTimestamp.Add(r.DataGracePeriod).Sub(r.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if r.Store != nil {
		if err := r.Store.DeleteTenantData(ctx, t.Name); err != nil {
			return ctrl.Result{}, fmt.Errorf("delete the data of deleted tenant %s: %w", t.Name, err)
		}
		emit(r.Recorder, t, corev1.EventTypeNormal, ReasonTenantDataDeleted, "Delete",
			"Deleted the tenant's findings, scans, runs, error rows and reports, %s after the Tenant was deleted", r.DataGracePeriod)
	}
	_, err := setFinalizer(ctx, r.Client, t, FinalizerTenantData, false)
	return ctrl.Result{}, client.IgnoreNotFound(err)
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
			posturev1.LabelTenant:    tenancy.LabelValue(t.Name),
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
	case tenancy.LabelValue(t.Name):
		return nil
	case "":
		// Optimistic locking: when two Tenants adopt the same namespace at
		// once, the second patch fails and its retry sees the first's label.
		patch := client.MergeFromWithOptions(nsObj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels[posturev1.LabelTenant] = tenancy.LabelValue(t.Name)
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
		// An ingestion that ends may push an older one beyond the history limit.
		Watches(&posturev1.Ingestion{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfObject),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(e event.CreateEvent) bool { return e.Object.(*posturev1.Ingestion).Status.Phase.Terminal() },
				UpdateFunc: func(e event.UpdateEvent) bool {
					return !e.ObjectOld.(*posturev1.Ingestion).Status.Phase.Terminal() && e.ObjectNew.(*posturev1.Ingestion).Status.Phase.Terminal()
				},
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
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
	if err := r.List(ctx, &list, client.MatchingFields{tenancy.IndexNamespace: ns}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the tenants of a namespace", "namespace", ns)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: t.Name}})
	}
	return reqs
}
