package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Reasons of the MCPServer Ready condition and events.
const (
	ReasonMCPAvailable   = "Available"
	ReasonMCPProgressing = "Progressing"
	ReasonMCPScaledDown  = "ScaledToZero"
	ReasonMCPNoImage     = "ImageNotSet"
	// ReasonMCPAPIBaseURLNotAllowed: spec.apiBaseURL is not one the operator
	// allows, so no pod is given an address its author chose.
	ReasonMCPAPIBaseURLNotAllowed = "APIBaseURLNotAllowed"
	ReasonMCPStalled              = "ProgressDeadlineExceeded"
	ReasonMCPRolledOut            = "ConfigChanged"
	// ReasonMCPNoAccess: the operator holds no rights in the namespace,
	// which is not a tenant namespace.
	ReasonMCPNoAccess = "NamespaceNotManaged"
	// ReasonMCPNameConflict: a Deployment or Service of the MCPServer's name
	// exists and is not this MCPServer's; the operator does not take it over.
	ReasonMCPNameConflict = "NameConflict"
)

// MCPServerReconciler runs an MCP tool server as a Deployment and a Service
// owned by the MCPServer, and reports the truth about them in its status.
type MCPServerReconciler struct {
	client.Client
	Defaults MCPServerDefaults
	Recorder events.EventRecorder
	// RecheckInterval is how often the Deployment is read again while it is
	// not available; once available, ten times that. Deployments are not
	// watched (the manager may not watch them cluster-wide). Default 10 s.
	RecheckInterval time.Duration
}

func (r *MCPServerReconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 10 * time.Second
}

// The operator never reads Secrets for MCP servers: the optional key is
// passed to the pods by reference. Owner references with
// blockOwnerDeletion need update on the owner's finalizers subresource.
// +kubebuilder:rbac:groups=posture.dev,resources=mcpservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=posture.dev,resources=mcpservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=mcpservers/finalizers,verbs=update
// Deployments and Services are read and written through the tenant-access
// RoleBinding of the MCPServer's namespace (tenant_access.go), so MCP servers
// run only in tenant namespaces.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *MCPServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m posturev1.MCPServer
	if err := r.Get(ctx, req.NamespacedName, &m); err != nil {
		// Deleted: the Deployment and Service go with it (owner references).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := m.DeepCopy()

	if MCPServerImage(r.Defaults) == "" {
		deriveMCPServerStatus(&m, mcpFacts{NoImage: true})
		return finishStatus(ctx, r.Client, &m, orig, 0)
	}
	// Refused before any write: a Deployment already running stays on the
	// address it was given when that address was allowed.
	if u, ok := MCPAPIBaseURL(&m, r.Defaults); !ok {
		deriveMCPServerStatus(&m, mcpFacts{RefusedURL: u, DefaultURL: r.Defaults.APIBaseURL})
		if c := meta.FindStatusCondition(orig.Status.Conditions, posturev1.ConditionReady); c == nil || c.Reason != ReasonMCPAPIBaseURLNotAllowed || c.ObservedGeneration != m.Generation {
			emit(r.Recorder, &m, corev1.EventTypeWarning, ReasonMCPAPIBaseURLNotAllowed, "Refuse", "%s", meta.FindStatusCondition(m.Status.Conditions, posturev1.ConditionReady).Message)
		}
		return finishStatus(ctx, r.Client, &m, orig, 0)
	}

	// The Deployment and Service are written with the operator's rights:
	// taking over ones the MCPServer did not create would let its author
	// rewrite, and with the owner reference delete, workloads and Services
	// they may not touch themselves.
	conflict, err := r.foreignWorkload(ctx, &m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conflict != "" {
		deriveMCPServerStatus(&m, mcpFacts{Conflict: conflict})
		return finishStatus(ctx, r.Client, &m, orig, r.recheck())
	}
	dep, err := r.applyDeployment(ctx, &m)
	if err == nil {
		err = r.applyService(ctx, &m)
	}
	if apierrors.IsForbidden(err) {
		// Not a tenant namespace, or its Tenant has not granted the
		// operator its rights there yet: only the former needs a person.
		tenant, terr := tenancy.ForNamespace(ctx, r.Client, m.Namespace)
		if terr != nil && !errors.As(terr, new(*auth.Error)) {
			return ctrl.Result{}, terr
		}
		deriveMCPServerStatus(&m, mcpFacts{NoAccess: true, TenantExists: tenant != nil})
		return finishStatus(ctx, r.Client, &m, orig, r.recheck())
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("deployment or service %s/%s: %w", m.Namespace, m.Name, err)
	}

	deriveMCPServerStatus(&m, mcpFacts{Deployment: dep})
	requeue := r.recheck()
	if meta.IsStatusConditionTrue(m.Status.Conditions, posturev1.ConditionReady) {
		requeue *= 10
	}
	return finishStatus(ctx, r.Client, &m, orig, requeue)
}

// foreignWorkload names a Deployment or Service of the MCPServer's name that
// exists and is not controlled by it; empty when there is none. A read the
// operator may not make is left to applyDeployment, which reports it.
func (r *MCPServerReconciler) foreignWorkload(ctx context.Context, m *posturev1.MCPServer) (string, error) {
	key := client.ObjectKey{Namespace: m.Namespace, Name: m.Name}
	for _, o := range []struct {
		kind string
		obj  client.Object
	}{{"Deployment", &appsv1.Deployment{}}, {"Service", &corev1.Service{}}} {
		err := r.Get(ctx, key, o.obj)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			continue
		case err != nil:
			return "", err
		}
		if !metav1.IsControlledBy(o.obj, m) {
			return fmt.Sprintf("%s %s already exists and was not created by this MCPServer; the operator does not take it over: give the MCPServer another name, or delete the %s", o.kind, m.Name, o.kind), nil
		}
	}
	return "", nil
}

// applyDeployment creates or updates the Deployment. The pod template is
// replaced only when its config hash changed or what we set drifted, so a
// steady state writes nothing; replicas are written only when the spec says.
func (r *MCPServerReconciler) applyDeployment(ctx context.Context, m *posturev1.MCPServer) (*appsv1.Deployment, error) {
	want := BuildMCPDeployment(m, r.Defaults)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	var rolled bool
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		if dep.Labels == nil {
			dep.Labels = map[string]string{}
		}
		maps.Copy(dep.Labels, want.Labels)
		if dep.CreationTimestamp.IsZero() {
			dep.Spec = want.Spec
		} else {
			if m.Spec.Replicas != nil {
				dep.Spec.Replicas = m.Spec.Replicas
			}
			dep.Spec.Strategy = want.Spec.Strategy
			dep.Spec.RevisionHistoryLimit = want.Spec.RevisionHistoryLimit
			if templateDiffers(&dep.Spec.Template, &want.Spec.Template) {
				rolled = true
				dep.Spec.Template = want.Spec.Template
			}
		}
		return controllerutil.SetControllerReference(m, dep, r.Scheme())
	})
	if err != nil {
		return nil, err
	}
	switch {
	case op == controllerutil.OperationResultCreated:
		emit(r.Recorder, m, corev1.EventTypeNormal, "Created", "Create", "created Deployment %s (config %s)", dep.Name, want.Spec.Template.Annotations[AnnotationConfigHash])
	case rolled:
		emit(r.Recorder, m, corev1.EventTypeNormal, ReasonMCPRolledOut, "RollOut", "configuration changed: rolling out config %s", want.Spec.Template.Annotations[AnnotationConfigHash])
	}
	return dep, nil
}

// templateDiffers compares what the builder sets, not the defaults the API
// server fills in, so that a defaulted field never looks like drift.
func templateDiffers(have, want *corev1.PodTemplateSpec) bool {
	if have.Annotations[AnnotationConfigHash] != want.Annotations[AnnotationConfigHash] {
		return true
	}
	if !equality.Semantic.DeepEqual(have.Labels, want.Labels) || len(have.Spec.Containers) != len(want.Spec.Containers) {
		return true
	}
	for i := range want.Spec.Containers {
		h, w := have.Spec.Containers[i], want.Spec.Containers[i]
		if h.Name != w.Name || h.Image != w.Image ||
			!equality.Semantic.DeepEqual(h.Args, w.Args) ||
			!equality.Semantic.DeepEqual(h.Env, w.Env) ||
			!equality.Semantic.DeepEqual(h.Resources, w.Resources) ||
			!equality.Semantic.DeepEqual(h.SecurityContext, w.SecurityContext) {
			return true
		}
	}
	return !equality.Semantic.DeepEqual(have.Spec.SecurityContext, want.Spec.SecurityContext) ||
		!equality.Semantic.DeepEqual(have.Spec.AutomountServiceAccountToken, want.Spec.AutomountServiceAccountToken)
}

func (r *MCPServerReconciler) applyService(ctx context.Context, m *posturev1.MCPServer) error {
	want := BuildMCPService(m)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		maps.Copy(svc.Labels, want.Labels)
		svc.Spec.Type = want.Spec.Type
		svc.Spec.Selector = want.Spec.Selector
		// Keep what the API server assigned to an existing port (nothing for
		// ClusterIP today, but NodePort if someone switched the type).
		ports := want.Spec.Ports
		if len(svc.Spec.Ports) == len(ports) {
			for i := range ports {
				ports[i].NodePort = svc.Spec.Ports[i].NodePort
			}
		}
		svc.Spec.Ports = ports
		return controllerutil.SetControllerReference(m, svc, r.Scheme())
	})
	return err
}

// SetupWithManager watches MCPServers, and Tenants: a Tenant's status write
// follows the RoleBinding that lets the operator run servers in its
// namespace, so servers created with their Tenant start without waiting for
// a recheck. Deployments and Services are read again on a timer, not
// watched: see UncachedObjects.
func (r *MCPServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// The Tenant of a namespace is looked up by index (tenancy.ForNamespace).
	if err := auth.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Our own status writes must not wake us.
		For(&posturev1.MCPServer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&posturev1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return requestsInNamespace(ctx, r.Client, &posturev1.MCPServerList{}, o.(*posturev1.Tenant).NamespaceName())
		})).
		Named("mcpserver").
		Complete(quietConflicts(r))
}
