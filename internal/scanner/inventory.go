package scanner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Workload is anything that runs containers: a bare Pod or the pod template
// of a controller. Checks look at the template rather than at the controller's
// pods so a Deployment is judged once, whatever its replica count, and even
// when it has no pods yet.
type Workload struct {
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
	Labels    map[string]string
	Spec      *corev1.PodSpec
}

// Inventory is what one scan read from the cluster.
type Inventory struct {
	Workloads           []Workload
	Namespaces          []corev1.Namespace
	NetworkPolicies     []networkingv1.NetworkPolicy
	ServiceAccounts     []corev1.ServiceAccount
	Roles               []rbacv1.Role
	ClusterRoles        []rbacv1.ClusterRole
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoleBindings []rbacv1.ClusterRoleBinding

	// Missing names the kinds that could not be listed (usually RBAC of the
	// scanning identity), with why. Checks that need them are skipped.
	Missing map[string]error
}

// Kind names used in Inventory.Missing and Check.Needs.
const (
	kindPods                = "pods"
	kindDeployments         = "deployments"
	kindStatefulSets        = "statefulsets"
	kindDaemonSets          = "daemonsets"
	kindReplicaSets         = "replicasets"
	kindJobs                = "jobs"
	kindCronJobs            = "cronjobs"
	kindNamespaces          = "namespaces"
	kindNetworkPolicies     = "networkpolicies"
	kindServiceAccounts     = "serviceaccounts"
	kindRoles               = "roles"
	kindClusterRoles        = "clusterroles"
	kindRoleBindings        = "rolebindings"
	kindClusterRoleBindings = "clusterrolebindings"
)

// Scope limits the namespaced objects a scan reads. Cluster-scoped objects
// (ClusterRoles, ClusterRoleBindings) are always read: they grant power in
// every namespace, including the ones in scope.
type Scope struct {
	Namespaces        []string // only these; empty means all
	ExcludeNamespaces []string
}

func (s Scope) includes(ns string) bool {
	if slices.Contains(s.ExcludeNamespaces, ns) {
		return false
	}
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns)
}

// listNamespaces is the set of namespaces to issue namespaced LISTs in: one
// cluster-wide LIST ("") when no namespace list is given, which needs fewer
// requests and works for identities that cannot list namespaces.
func (s Scope) listNamespaces() []string {
	if len(s.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return s.Namespaces
}

// Collect lists everything the checks need. A kind that cannot be listed
// because the API refuses it (403, or 404 for an API the cluster does not
// serve) is recorded in Missing; any other error ends the scan, since the
// results would silently omit objects.
func Collect(ctx context.Context, cs kubernetes.Interface, scope Scope) (*Inventory, error) {
	inv := &Inventory{Missing: map[string]error{}}
	var pods []corev1.Pod
	var deploys []appsv1.Deployment
	var sets []appsv1.StatefulSet
	var daemons []appsv1.DaemonSet
	var rsets []appsv1.ReplicaSet
	var jobs []batchv1.Job
	var crons []batchv1.CronJob

	opts := metav1.ListOptions{}
	steps := []struct {
		kind string
		list func(ns string) error
	}{
		{kindPods, func(ns string) error {
			l, err := cs.CoreV1().Pods(ns).List(ctx, opts)
			if err == nil {
				pods = append(pods, l.Items...)
			}
			return err
		}},
		{kindDeployments, func(ns string) error {
			l, err := cs.AppsV1().Deployments(ns).List(ctx, opts)
			if err == nil {
				deploys = append(deploys, l.Items...)
			}
			return err
		}},
		{kindStatefulSets, func(ns string) error {
			l, err := cs.AppsV1().StatefulSets(ns).List(ctx, opts)
			if err == nil {
				sets = append(sets, l.Items...)
			}
			return err
		}},
		{kindDaemonSets, func(ns string) error {
			l, err := cs.AppsV1().DaemonSets(ns).List(ctx, opts)
			if err == nil {
				daemons = append(daemons, l.Items...)
			}
			return err
		}},
		{kindReplicaSets, func(ns string) error {
			l, err := cs.AppsV1().ReplicaSets(ns).List(ctx, opts)
			if err == nil {
				rsets = append(rsets, l.Items...)
			}
			return err
		}},
		{kindJobs, func(ns string) error {
			l, err := cs.BatchV1().Jobs(ns).List(ctx, opts)
			if err == nil {
				jobs = append(jobs, l.Items...)
			}
			return err
		}},
		{kindCronJobs, func(ns string) error {
			l, err := cs.BatchV1().CronJobs(ns).List(ctx, opts)
			if err == nil {
				crons = append(crons, l.Items...)
			}
			return err
		}},
		{kindNetworkPolicies, func(ns string) error {
			l, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, opts)
			if err == nil {
				inv.NetworkPolicies = append(inv.NetworkPolicies, l.Items...)
			}
			return err
		}},
		{kindServiceAccounts, func(ns string) error {
			l, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, opts)
			if err == nil {
				inv.ServiceAccounts = append(inv.ServiceAccounts, l.Items...)
			}
			return err
		}},
		{kindRoles, func(ns string) error {
			l, err := cs.RbacV1().Roles(ns).List(ctx, opts)
			if err == nil {
				inv.Roles = append(inv.Roles, l.Items...)
			}
			return err
		}},
		{kindRoleBindings, func(ns string) error {
			l, err := cs.RbacV1().RoleBindings(ns).List(ctx, opts)
			if err == nil {
				inv.RoleBindings = append(inv.RoleBindings, l.Items...)
			}
			return err
		}},
	}
	for _, step := range steps {
		for _, ns := range scope.listNamespaces() {
			if err := step.list(ns); err != nil {
				if refused(err) {
					inv.Missing[step.kind] = err
					break
				}
				where := "in all namespaces"
				if ns != "" {
					where = "in namespace " + ns
				}
				return nil, fmt.Errorf("listing %s %s: %w", step.kind, where, err)
			}
		}
	}

	if len(scope.Namespaces) == 0 {
		l, err := cs.CoreV1().Namespaces().List(ctx, opts)
		switch {
		case err == nil:
			inv.Namespaces = l.Items
		case refused(err):
			inv.Missing[kindNamespaces] = err
		default:
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
	} else {
		for _, name := range scope.Namespaces {
			ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			switch {
			case err == nil:
				inv.Namespaces = append(inv.Namespaces, *ns)
			case apierrors.IsNotFound(err):
				return nil, fmt.Errorf("namespace %q (from --namespaces) does not exist", name)
			case refused(err):
				inv.Missing[kindNamespaces] = err
			default:
				return nil, fmt.Errorf("reading namespace %s: %w", name, err)
			}
		}
	}

	if l, err := cs.RbacV1().ClusterRoles().List(ctx, opts); err == nil {
		inv.ClusterRoles = l.Items
	} else if refused(err) {
		inv.Missing[kindClusterRoles] = err
	} else {
		return nil, fmt.Errorf("listing clusterroles: %w", err)
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, opts); err == nil {
		inv.ClusterRoleBindings = l.Items
	} else if refused(err) {
		inv.Missing[kindClusterRoleBindings] = err
	} else {
		return nil, fmt.Errorf("listing clusterrolebindings: %w", err)
	}

	// A pod made by a controller we scan is judged through that controller's
	// template; judging it again would report one problem once per replica.
	covered := map[string]bool{}
	for _, k := range []string{kindReplicaSets, kindStatefulSets, kindDaemonSets, kindJobs} {
		_, missing := inv.Missing[k]
		covered[k] = !missing
	}
	_, deploysMissing := inv.Missing[kindDeployments]
	_, cronsMissing := inv.Missing[kindCronJobs]

	add := func(kind string, m metav1.ObjectMeta, spec *corev1.PodSpec) {
		inv.Workloads = append(inv.Workloads, Workload{Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID, Labels: m.Labels, Spec: spec})
	}
	for i := range pods {
		if owner := metav1.GetControllerOf(&pods[i]); owner != nil && covered[podOwnerKinds[owner.Kind]] {
			continue
		}
		add("Pod", pods[i].ObjectMeta, &pods[i].Spec)
	}
	for i := range deploys {
		add("Deployment", deploys[i].ObjectMeta, &deploys[i].Spec.Template.Spec)
	}
	for i := range sets {
		add("StatefulSet", sets[i].ObjectMeta, &sets[i].Spec.Template.Spec)
	}
	for i := range daemons {
		add("DaemonSet", daemons[i].ObjectMeta, &daemons[i].Spec.Template.Spec)
	}
	for i := range rsets {
		if owner := metav1.GetControllerOf(&rsets[i]); owner != nil && owner.Kind == "Deployment" && !deploysMissing {
			continue
		}
		add("ReplicaSet", rsets[i].ObjectMeta, &rsets[i].Spec.Template.Spec)
	}
	for i := range jobs {
		if owner := metav1.GetControllerOf(&jobs[i]); owner != nil && owner.Kind == "CronJob" && !cronsMissing {
			continue
		}
		add("Job", jobs[i].ObjectMeta, &jobs[i].Spec.Template.Spec)
	}
	for i := range crons {
		add("CronJob", crons[i].ObjectMeta, &crons[i].Spec.JobTemplate.Spec.Template.Spec)
	}
	inv.filter(scope)
	inv.sort()
	return inv, nil
}

var podOwnerKinds = map[string]string{
	"ReplicaSet": kindReplicaSets, "StatefulSet": kindStatefulSets, "DaemonSet": kindDaemonSets, "Job": kindJobs,
}

// refused is an error that means "you may not see this kind" rather than
// "the cluster is broken": the scan goes on without it.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// filter applies ExcludeNamespaces to what cluster-wide LISTs returned.
func (inv *Inventory) filter(scope Scope) {
	inv.Workloads = slices.DeleteFunc(inv.Workloads, func(w Workload) bool { return !scope.includes(w.Namespace) })
	inv.Namespaces = slices.DeleteFunc(inv.Namespaces, func(n corev1.Namespace) bool { return !scope.includes(n.Name) })
	inv.NetworkPolicies = slices.DeleteFunc(inv.NetworkPolicies, func(n networkingv1.NetworkPolicy) bool { return !scope.includes(n.Namespace) })
	inv.ServiceAccounts = slices.DeleteFunc(inv.ServiceAccounts, func(n corev1.ServiceAccount) bool { return !scope.includes(n.Namespace) })
	inv.Roles = slices.DeleteFunc(inv.Roles, func(n rbacv1.Role) bool { return !scope.includes(n.Namespace) })
	inv.RoleBindings = slices.DeleteFunc(inv.RoleBindings, func(n rbacv1.RoleBinding) bool { return !scope.includes(n.Namespace) })
}

// sort makes the output order independent of the API server's.
func (inv *Inventory) sort() {
	slices.SortFunc(inv.Workloads, func(a, b Workload) int {
		return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	slices.SortFunc(inv.Namespaces, func(a, b corev1.Namespace) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(inv.Roles, func(a, b rbacv1.Role) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	slices.SortFunc(inv.ClusterRoles, func(a, b rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(inv.RoleBindings, func(a, b rbacv1.RoleBinding) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	slices.SortFunc(inv.ClusterRoleBindings, func(a, b rbacv1.ClusterRoleBinding) int { return strings.Compare(a.Name, b.Name) })
}
