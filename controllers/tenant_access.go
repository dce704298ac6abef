package controllers

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/tenancy"
)

// The manager holds no cluster-wide right on Secrets, Deployments or
// Services. It holds them in a tenant namespace through a RoleBinding that
// the tenant controller creates there, to the ClusterRole
// posture-tenant-access (config/rbac/tenant_access_role.yaml), which the
// manager may bind but is not bound to cluster-wide. In its own namespace a
// Role gives it the JWT signing Secret, worker Jobs and leases.
//
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=posture-tenant-access
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create,namespace=posture-system
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// DefaultTenantAccessRole is the ClusterRole bound in each tenant namespace.
const DefaultTenantAccessRole = "posture-tenant-access"

// TenantAccessBindingName is the RoleBinding the tenant controller keeps in
// each tenant namespace.
const TenantAccessBindingName = "posture-manager-tenant-access"

// TenantAccess says whom the tenant controller grants the tenant-access
// ClusterRole in each tenant namespace: the manager's own ServiceAccount.
// An empty ServiceAccount turns this off, for a manager running with a
// cluster-admin identity (make dev, tests of a single controller).
type TenantAccess struct {
	ClusterRole             string
	ServiceAccount          string
	ServiceAccountNamespace string
}

// UncachedObjects are the kinds the manager reads straight from the API
// server. The manager may list and watch them only in namespaces it was
// granted, never cluster-wide, so an informer for them would be refused;
// controllers read them on reconcile and requeue instead of watching.
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}, &rbacv1.RoleBinding{}}
}

// ClientOptions are the manager client's options that go with those rights.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: UncachedObjects()}}
}

// ensureTenantAccess binds the manager's ServiceAccount to the tenant-access
// ClusterRole in namespace ns. The binding is created once and never
// updated: roleRef is immutable, and a binding of that name that grants
// something else is reported, not rewritten.
func (r *TenantReconciler) ensureTenantAccess(ctx context.Context, t *posturev1.Tenant, ns string) error {
	a := r.Access
	if a.ServiceAccount == "" {
		return nil
	}
	role := a.ClusterRole
	if role == "" {
		role = DefaultTenantAccessRole
	}
	want := rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: TenantAccessBindingName, Namespace: ns, Labels: map[string]string{
			posturev1.LabelManagedBy: posturev1.ManagedByValue,
			posturev1.LabelTenant:    tenancy.LabelValue(t.Name),
		}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: a.ServiceAccount, Namespace: a.ServiceAccountNamespace,
		}},
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	var have rbacv1.RoleBinding
	err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: want.Name}, &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Create(ctx, &want); err == nil {
			return nil
		} else if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create RoleBinding %s/%s granting ClusterRole %s to ServiceAccount %s/%s: %w", ns, want.Name, role, a.ServiceAccountNamespace, a.ServiceAccount, err)
		}
		if err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: want.Name}, &have); err != nil {
			return fmt.Errorf("read RoleBinding %s/%s: %w", ns, want.Name, err)
		}
	case err != nil:
		return fmt.Errorf("read RoleBinding %s/%s: %w", ns, want.Name, err)
	}
	if have.RoleRef != want.RoleRef || !slices.Contains(have.Subjects, want.Subjects[0]) {
		return fmt.Errorf("RoleBinding %s/%s exists but does not bind ClusterRole %s to ServiceAccount %s/%s; delete it so the operator can create it", ns, want.Name, role, a.ServiceAccountNamespace, a.ServiceAccount)
	}
	return nil
}

// ControllerOptions are the manager's controller options. The priority
// queue is off: in controller-runtime v0.24.1 it can deadlock when the
// manager stops (kubernetes-sigs/controller-runtime#3538, fixed after that
// release). It hands a ready item to a worker that has already left,
// holding the queue's lock, so the workers never finish and the manager
// outlives its grace period; the rate-limited work queue has no such race.
// A test manager's stop hung that way in a fresh-clone run.
func ControllerOptions() config.Controller {
	return config.Controller{UsePriorityQueue: ptr.To(false)}
}
