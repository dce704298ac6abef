package scanner

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Severity is an OCSF severity_id.
type Severity int

// OCSF severity_id values used by the checks.
const (
	Informational Severity = 1
	Low           Severity = 2
	Medium        Severity = 3
	High          Severity = 4
	Critical      Severity = 5
)

// Label is the OCSF severity caption.
func (s Severity) Label() string {
	switch s {
	case Informational:
		return "Informational"
	case Low:
		return "Low"
	case Medium:
		return "Medium"
	case High:
		return "High"
	case Critical:
		return "Critical"
	}
	return "Unknown"
}

// Check is one posture rule. Its ID is the OCSF metadata.event_code and
// part of every finding uid, so it must never change once released.
type Check struct {
	ID          string
	Title       string
	Description string // Markdown
	Risk        string
	Remediation string
	References  []string
	Severity    Severity
	Group       string   // resources[].group.name: the API area the resource belongs to
	Categories  []string // unmapped.categories
	CIS         []string // CIS Kubernetes Benchmark v1.8 recommendation numbers
	Needs       []string // inventory kinds the check reads; missing ones skip the check
	eval        func(inv *Inventory) []Result
}

// Result is the verdict of one check on one resource.
type Result struct {
	Check    *Check
	Resource Resource
	Pass     bool
	Detail   string // one sentence naming the resource and what was (not) found
}

// Resource is what a result is about.
type Resource struct {
	Kind      string
	Namespace string // "" for cluster-scoped objects
	Name      string
	UID       types.UID
	Labels    map[string]string
	Metadata  map[string]any // resources[].data.metadata: the facts the verdict rests on
}

// Ref is "Kind namespace/name" or "Kind name".
func (r Resource) Ref() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Checks returns every check, in a stable order.
func Checks() []*Check { return checks }

// CheckByID finds a check.
func CheckByID(id string) (*Check, bool) {
	for _, c := range checks {
		if c.ID == id {
			return c, true
		}
	}
	return nil, false
}

const (
	pssURL     = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
	secCtxURL  = "https://kubernetes.io/docs/tasks/configure-pod-container/security-context/"
	rbacURL    = "https://kubernetes.io/docs/concepts/security/rbac-good-practices/"
	saURL      = "https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/"
	netpolURL  = "https://kubernetes.io/docs/concepts/services-networking/network-policies/"
	secretsURL = "https://kubernetes.io/docs/concepts/security/secrets-good-practices/"
	limitsURL  = "https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/"
	imagesURL  = "https://kubernetes.io/docs/concepts/containers/images/#image-names"
)

var workloadKinds = []string{kindPods, kindDeployments, kindStatefulSets, kindDaemonSets, kindReplicaSets, kindJobs, kindCronJobs}

var checks = []*Check{
	{
		ID:          "core_privileged_containers",
		Title:       "Minimize the admission of privileged containers",
		Description: "Checks that no container of a workload runs with `securityContext.privileged: true`.",
		Risk:        "A privileged container has every capability and access to the host's devices; escaping it to the node is trivial.",
		Remediation: "Remove `privileged: true` from the container's securityContext, grant only the specific capabilities it needs, and enforce the baseline Pod Security Standard on the namespace.",
		References:  []string{pssURL, secCtxURL},
		Severity:    High, Group: "core", Categories: []string{"container-security"}, CIS: []string{"5.2.2"},
		Needs: workloadKinds,
		eval: perContainer(func(_ *corev1.PodSpec, c container) (bool, string) {
			return c.sc != nil && c.sc.Privileged != nil && *c.sc.Privileged, "privileged"
		}, "runs privileged containers", "runs no privileged containers"),
	},
	{
		ID:          "core_host_namespaces",
		Title:       "Minimize the admission of containers sharing the host's namespaces",
		Description: "Checks that a workload does not set `hostNetwork`, `hostPID` or `hostIPC`.",
		Risk:        "Sharing the host's network, process or IPC namespace lets a container see and reach the node's traffic, processes and shared memory, and bypass NetworkPolicies.",
		Remediation: "Remove `hostNetwork`, `hostPID` and `hostIPC` from the pod spec; only node agents that truly need them should keep them, in a dedicated namespace.",
		References:  []string{pssURL},
		Severity:    High, Group: "core", Categories: []string{"container-security"}, CIS: []string{"5.2.3", "5.2.4", "5.2.5"},
		Needs: workloadKinds,
		eval: perWorkload(func(_ *Inventory, w Workload) (bool, string, map[string]any) {
			var shared []string
			if w.Spec.HostNetwork {
				shared = append(shared, "hostNetwork")
			}
			if w.Spec.HostPID {
				shared = append(shared, "hostPID")
			}
			if w.Spec.HostIPC {
				shared = append(shared, "hostIPC")
			}
			md := map[string]any{"host_network": w.Spec.HostNetwork, "host_pid": w.Spec.HostPID, "host_ipc": w.Spec.HostIPC}
			if len(shared) > 0 {
				return false, "shares host namespaces: " + strings.Join(shared, ", "), md
			}
			return true, "shares no host namespace", md
		}),
	},
	{
		ID:          "core_hostpath_volumes",
		Title:       "Minimize the admission of HostPath volumes",
		Description: "Checks that a workload mounts no `hostPath` volume.",
		Risk:        "A hostPath volume exposes the node's file system to the container: node credentials, the container runtime socket, other pods' data.",
		Remediation: "Replace hostPath volumes with emptyDir, ConfigMap/Secret, or PersistentVolumeClaims.",
		References:  []string{pssURL, "https://kubernetes.io/docs/concepts/storage/volumes/#hostpath"},
		Severity:    Medium, Group: "core", Categories: []string{"container-security"}, CIS: []string{"5.2.12"},
		Needs: workloadKinds,
		eval: perWorkload(func(_ *Inventory, w Workload) (bool, string, map[string]any) {
			var paths []string
			for _, v := range w.Spec.Volumes {
				if v.HostPath != nil {
					paths = append(paths, v.Name+"="+v.HostPath.Path)
				}
			}
			md := map[string]any{"host_path_volumes": nonNil(paths)}
			if len(paths) > 0 {
				return false, "mounts hostPath volumes: " + strings.Join(paths, ", "), md
			}
			return true, "mounts no hostPath volume", md
		}),
	},
	{
		ID:          "core_run_as_non_root",
		Title:       "Minimize the admission of root containers",
		Description: "Checks that every container runs as a non-root user: `runAsNonRoot: true` or a non-zero `runAsUser`, on the container or the pod.",
		Risk:        "A process running as root inside a container is root on the node after any container escape, and can modify the image's files.",
		Remediation: "Set `runAsNonRoot: true` and a non-zero `runAsUser` in the pod's or container's securityContext, and build images with a non-root USER.",
		References:  []string{pssURL, secCtxURL},
		Severity:    Medium, Group: "core", Categories: []string{"container-security"}, CIS: []string{"5.2.7"},
		Needs: workloadKinds,
		eval: perContainer(func(spec *corev1.PodSpec, c container) (bool, string) {
			user, nonRoot := effectiveUser(spec, c)
			switch {
			case user != nil && *user == 0:
				return true, "runAsUser 0"
			case user != nil:
				return false, ""
			case nonRoot != nil && *nonRoot:
				return false, ""
			}
			return true, "may run as root"
		}, "has containers that may run as root", "runs every container as non-root"),
	},
	{
		ID:          "core_resource_limits",
		Title:       "Ensure every container has CPU and memory limits",
		Description: "Checks that every container (init containers included) sets `resources.limits.cpu` and `resources.limits.memory`.",
		Risk:        "A container without limits can starve its node's other workloads, and a compromised one can be used for resource exhaustion.",
		Remediation: "Set CPU and memory limits on every container, or a LimitRange in the namespace that provides defaults.",
		References:  []string{limitsURL, "https://kubernetes.io/docs/concepts/policy/limit-range/"},
		Severity:    Low, Group: "core", Categories: []string{"resource-management"},
		Needs: workloadKinds,
		eval: perContainer(func(_ *corev1.PodSpec, c container) (bool, string) {
			var missing []string
			if _, ok := c.resources.Limits[corev1.ResourceCPU]; !ok {
				missing = append(missing, "cpu")
			}
			if _, ok := c.resources.Limits[corev1.ResourceMemory]; !ok {
				missing = append(missing, "memory")
			}
			return len(missing) > 0, "no " + strings.Join(missing, "/") + " limit"
		}, "has containers without CPU or memory limits", "sets CPU and memory limits on every container"),
	},
	{
		ID:          "core_image_tag_not_latest",
		Title:       "Ensure container images are pinned, not `latest`",
		Description: "Checks that every container image names a tag other than `latest`, or a digest.",
		Risk:        "`latest` (explicit or implied by a missing tag) changes under a running workload: rollbacks and audits cannot tell which code ran, and a poisoned push is picked up at the next restart.",
		Remediation: "Reference images by an immutable version tag or, better, by digest (`image@sha256:…`).",
		References:  []string{imagesURL, "https://kubernetes.io/docs/concepts/configuration/overview/#container-images"},
		Severity:    Low, Group: "core", Categories: []string{"supply-chain"},
		Needs: workloadKinds,
		eval: perContainer(func(_ *corev1.PodSpec, c container) (bool, string) {
			if usesLatest(c.image) {
				return true, c.image
			}
			return false, ""
		}, "runs images tagged latest (or untagged)", "pins every image to a tag or digest"),
	},
	{
		ID:          "core_automount_service_account_token",
		Title:       "Ensure service account tokens are only mounted where necessary",
		Description: "Checks that a workload does not get its service account's API token mounted: `automountServiceAccountToken: false` on the pod, or on its service account when the pod does not say.",
		Risk:        "Any process in the container, including an attacker's, can use a mounted token to call the Kubernetes API with the service account's permissions.",
		Remediation: "Set `automountServiceAccountToken: false` on the pod spec (or the service account) unless the workload calls the Kubernetes API.",
		References:  []string{saURL + "#opt-out-of-api-credential-automounting"},
		Severity:    Medium, Group: "core", Categories: []string{"identity"}, CIS: []string{"5.1.6"},
		Needs: append([]string{kindServiceAccounts}, workloadKinds...),
		eval: perWorkload(func(inv *Inventory, w Workload) (bool, string, map[string]any) {
			sa := serviceAccountName(w.Spec)
			mounted, source := true, "the default (neither the pod nor service account "+sa+" opts out)"
			if w.Spec.AutomountServiceAccountToken != nil {
				mounted, source = *w.Spec.AutomountServiceAccountToken, "the pod spec"
			} else if acct := inv.serviceAccount(w.Namespace, sa); acct != nil && acct.AutomountServiceAccountToken != nil {
				mounted, source = *acct.AutomountServiceAccountToken, "service account "+sa
			}
			md := map[string]any{"service_account": sa, "automount_service_account_token": mounted}
			if mounted {
				return false, "gets its service account token mounted, by " + source, md
			}
			return true, "does not get a service account token mounted (set by " + source + ")", md
		}),
	},
	{
		ID:          "core_default_service_account_in_use",
		Title:       "Ensure default service accounts are not actively used",
		Description: "Checks that a workload runs under a dedicated service account rather than its namespace's `default` one.",
		Risk:        "Every pod without an explicit service account shares `default`; permissions granted to it for one workload leak to all of them.",
		Remediation: "Create a service account per workload and set `serviceAccountName`; grant `default` nothing.",
		References:  []string{saURL},
		Severity:    Low, Group: "core", Categories: []string{"identity"}, CIS: []string{"5.1.5"},
		Needs: workloadKinds,
		eval: perWorkload(func(_ *Inventory, w Workload) (bool, string, map[string]any) {
			sa := serviceAccountName(w.Spec)
			md := map[string]any{"service_account": sa}
			if sa == "default" {
				return false, "runs as the namespace's default service account", md
			}
			return true, "runs as the dedicated service account " + sa, md
		}),
	},
	{
		ID:          "core_secrets_in_env_vars",
		Title:       "Prefer secrets as files over secrets in environment variables",
		Description: "Checks that no container takes a Secret through `env[].valueFrom.secretKeyRef` or `envFrom[].secretRef`, or holds a literal value in a variable named like a credential (`*PASSWORD`, `*SECRET`, `*TOKEN`, `*API_KEY`, …).",
		Risk:        "Environment variables leak: into logs and crash reports, to child processes, and to anyone who can read the pod spec (literal values) or exec into the container.",
		Remediation: "Mount Secrets as files (a secret volume) and have the application read them; never write credentials literally in the pod spec.",
		References:  []string{secretsURL, "https://kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-files-from-a-pod"},
		Severity:    Medium, Group: "core", Categories: []string{"secrets"}, CIS: []string{"5.4.1"},
		Needs: workloadKinds,
		eval: perContainer(func(_ *corev1.PodSpec, c container) (bool, string) {
			var found []string
			for _, e := range c.env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					found = append(found, e.Name+" from secret "+e.ValueFrom.SecretKeyRef.Name)
				case e.Value != "" && credentialName.MatchString(e.Name):
					found = append(found, e.Name+" (literal value)")
				}
			}
			for _, e := range c.envFrom {
				if e.SecretRef != nil {
					found = append(found, "all keys of secret "+e.SecretRef.Name)
				}
			}
			return len(found) > 0, strings.Join(found, ", ")
		}, "passes secrets through environment variables", "passes no secret through environment variables"),
	},
	{
		ID:          "core_privilege_escalation",
		Title:       "Minimize the admission of containers with allowPrivilegeEscalation",
		Description: "Checks that every container sets `securityContext.allowPrivilegeEscalation: false` (Kubernetes allows escalation when it is unset).",
		Risk:        "Without it, a setuid binary or file capability in the image lets a process gain more privileges than its parent.",
		Remediation: "Set `allowPrivilegeEscalation: false` in every container's securityContext.",
		References:  []string{pssURL, secCtxURL},
		Severity:    Medium, Group: "core", Categories: []string{"container-security"}, CIS: []string{"5.2.6"},
		Needs: workloadKinds,
		eval: perContainer(func(_ *corev1.PodSpec, c container) (bool, string) {
			if c.sc == nil || c.sc.AllowPrivilegeEscalation == nil {
				return true, "unset"
			}
			return *c.sc.AllowPrivilegeEscalation, "true"
		}, "allows privilege escalation in containers", "forbids privilege escalation in every container"),
	},
	{
		ID:          "core_added_capabilities",
		Title:       "Minimize the admission of containers with added capabilities",
		Description: "Checks that containers add no Linux capability beyond `NET_BIND_SERVICE` (the restricted Pod Security Standard).",
		Risk:        "Capabilities such as SYS_ADMIN, NET_ADMIN or SYS_PTRACE give a container most of root's power over the node.",
		Remediation: "Drop ALL capabilities and add back only NET_BIND_SERVICE when the process must bind a port below 1024.",
		References:  []string{pssURL, secCtxURL + "#set-capabilities-for-a-container"},
		Severity:    High, Group: "core", Categories: []string{"container-security"}, CIS: []string{"5.2.8", "5.2.9"},
		Needs: workloadKinds,
		eval: perContainer(func(_ *corev1.PodSpec, c container) (bool, string) {
			if c.sc == nil || c.sc.Capabilities == nil {
				return false, ""
			}
			var added []string
			for _, cp := range c.sc.Capabilities.Add {
				if name := strings.TrimPrefix(strings.ToUpper(string(cp)), "CAP_"); name != "NET_BIND_SERVICE" {
					added = append(added, string(cp))
				}
			}
			return len(added) > 0, "adds " + strings.Join(added, ", ")
		}, "adds Linux capabilities to containers", "adds no Linux capability beyond NET_BIND_SERVICE"),
	},
	{
		ID:          "rbac_wildcard_rules",
		Title:       "Minimize wildcard use in Roles and ClusterRoles",
		Description: "Checks that no rule of a Role or ClusterRole uses `*` in apiGroups, resources, verbs or nonResourceURLs. Kubernetes' own bootstrap roles (label `kubernetes.io/bootstrapping=rbac-defaults`) are not judged.",
		Risk:        "A wildcard grants every current and future resource or verb, including ones added later by CRDs (secrets, escalate, impersonate…).",
		Remediation: "List the exact apiGroups, resources and verbs the subject needs.",
		References:  []string{rbacURL + "#least-privilege"},
		Severity:    High, Group: "rbac", Categories: []string{"identity"}, CIS: []string{"5.1.3"},
		Needs: []string{kindRoles, kindClusterRoles},
		eval:  wildcardRules,
	},
	{
		ID:          "rbac_cluster_admin_bindings",
		Title:       "Ensure the cluster-admin role is only bound to system subjects",
		Description: "Checks that a (Cluster)RoleBinding to the `cluster-admin` ClusterRole binds only system subjects: `system:` users and groups, and service accounts of kube-system.",
		Risk:        "cluster-admin is unrestricted power over the cluster; every extra subject holding it is a full-compromise path.",
		Remediation: "Bind people and workloads to narrower roles; keep cluster-admin for break-glass access through system:masters.",
		References:  []string{rbacURL, "https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles"},
		Severity:    High, Group: "rbac", Categories: []string{"identity"}, CIS: []string{"5.1.1"},
		Needs: []string{kindRoleBindings, kindClusterRoleBindings},
		eval:  clusterAdminBindings,
	},
	{
		ID:          "networking_namespace_network_policy",
		Title:       "Ensure every namespace has a NetworkPolicy",
		Description: "Checks that each namespace holds at least one NetworkPolicy.",
		Risk:        "Without a NetworkPolicy every pod accepts traffic from every other pod in the cluster, so one compromised pod reaches them all.",
		Remediation: "Add a default-deny ingress (and egress) NetworkPolicy to the namespace, then allow the flows the workloads need.",
		References:  []string{netpolURL, netpolURL + "#default-policies"},
		Severity:    Medium, Group: "networking", Categories: []string{"network-security"}, CIS: []string{"5.3.2"},
		Needs: []string{kindNamespaces, kindNetworkPolicies},
		eval:  namespaceNetworkPolicies,
	},
}

// credentialName matches environment variable names that conventionally
// hold credentials. Suffixes only: SECRET_NAME or TOKEN_TTL are not secrets.
var credentialName = regexp.MustCompile(`(?i)(^|_)(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|SECRET_?KEY|CREDENTIALS?)$`)

type container struct {
	name      string
	image     string
	sc        *corev1.SecurityContext
	resources corev1.ResourceRequirements
	env       []corev1.EnvVar
	envFrom   []corev1.EnvFromSource
}

// containers lists init and regular containers: an init container runs with
// the same power as the others. Ephemeral (debug) containers are not part of
// a workload's design and are left out.
func containers(spec *corev1.PodSpec) []container {
	var out []container
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			out = append(out, container{name: c.Name, image: c.Image, sc: c.SecurityContext, resources: c.Resources, env: c.Env, envFrom: c.EnvFrom})
		}
	}
	return out
}

func workloadResource(w Workload, md map[string]any) Resource {
	meta := map[string]any{"kind": w.Kind, "name": w.Name, "namespace": w.Namespace, "uid": string(w.UID), "labels": nonNilMap(w.Labels)}
	for k, v := range md {
		meta[k] = v
	}
	return Resource{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID, Labels: w.Labels, Metadata: meta}
}

// perWorkload runs fn on every workload; fn says pass/fail, the tail of the
// sentence after the resource's name, and facts for the resource metadata.
func perWorkload(fn func(inv *Inventory, w Workload) (bool, string, map[string]any)) func(*Inventory) []Result {
	return func(inv *Inventory) []Result {
		out := make([]Result, 0, len(inv.Workloads))
		for _, w := range inv.Workloads {
			pass, tail, md := fn(inv, w)
			r := workloadResource(w, md)
			out = append(out, Result{Resource: r, Pass: pass, Detail: r.Ref() + " " + tail + "."})
		}
		return out
	}
}

// perContainer fails a workload when bad reports true for any container;
// why names the problem in the failure sentence.
func perContainer(bad func(spec *corev1.PodSpec, c container) (fail bool, why string), failText, passText string) func(*Inventory) []Result {
	return perWorkload(func(_ *Inventory, w Workload) (bool, string, map[string]any) {
		var offenders []string
		names := []string{}
		for _, c := range containers(w.Spec) {
			names = append(names, c.name)
			if fail, why := bad(w.Spec, c); fail {
				offenders = append(offenders, fmt.Sprintf("%s (%s)", c.name, why))
			}
		}
		md := map[string]any{"containers": names, "failing_containers": nonNil(offenders)}
		if len(offenders) > 0 {
			return false, failText + ": " + strings.Join(offenders, "; "), md
		}
		return true, passText, md
	})
}

// effectiveUser resolves the container's user settings over the pod's.
func effectiveUser(spec *corev1.PodSpec, c container) (user *int64, nonRoot *bool) {
	if spec.SecurityContext != nil {
		user, nonRoot = spec.SecurityContext.RunAsUser, spec.SecurityContext.RunAsNonRoot
	}
	if c.sc != nil {
		if c.sc.RunAsUser != nil {
			user = c.sc.RunAsUser
		}
		if c.sc.RunAsNonRoot != nil {
			nonRoot = c.sc.RunAsNonRoot
		}
	}
	return user, nonRoot
}

// usesLatest: an image reference with a digest is pinned; otherwise its tag
// is what follows the last ':' after the last '/' (a ':' before the last '/'
// is a registry port), and no tag means latest.
func usesLatest(image string) bool {
	if strings.Contains(image, "@") {
		return false
	}
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	return i < 0 || last[i+1:] == "latest"
}

func serviceAccountName(spec *corev1.PodSpec) string {
	switch {
	case spec.ServiceAccountName != "":
		return spec.ServiceAccountName
	case spec.DeprecatedServiceAccount != "":
		return spec.DeprecatedServiceAccount
	}
	return "default"
}

func (inv *Inventory) serviceAccount(ns, name string) *corev1.ServiceAccount {
	for i := range inv.ServiceAccounts {
		if sa := &inv.ServiceAccounts[i]; sa.Namespace == ns && sa.Name == name {
			return sa
		}
	}
	return nil
}

const bootstrapLabel = "kubernetes.io/bootstrapping"

func wildcardRules(inv *Inventory) []Result {
	var out []Result
	judge := func(kind, ns, name string, uid types.UID, labels map[string]string, rules []rbacv1.PolicyRule) {
		if labels[bootstrapLabel] == "rbac-defaults" {
			return
		}
		var found []string
		for i, r := range rules {
			var fields []string
			for _, f := range []struct {
				name string
				vals []string
			}{{"apiGroups", r.APIGroups}, {"resources", r.Resources}, {"verbs", r.Verbs}, {"nonResourceURLs", r.NonResourceURLs}} {
				if slices.ContainsFunc(f.vals, func(v string) bool { return v == "*" || strings.HasSuffix(v, "/*") }) {
					fields = append(fields, f.name)
				}
			}
			if len(fields) > 0 {
				found = append(found, fmt.Sprintf("rule %d (%s)", i, strings.Join(fields, ", ")))
			}
		}
		res := Resource{Kind: kind, Namespace: ns, Name: name, UID: uid, Labels: labels, Metadata: map[string]any{
			"kind": kind, "name": name, "namespace": ns, "uid": string(uid), "labels": nonNilMap(labels),
			"rules": len(rules), "wildcard_rules": nonNil(found),
		}}
		if len(found) > 0 {
			out = append(out, Result{Resource: res, Detail: res.Ref() + " uses wildcards in " + strings.Join(found, "; ") + "."})
		} else {
			out = append(out, Result{Resource: res, Pass: true, Detail: res.Ref() + " uses no wildcard."})
		}
	}
	for _, r := range inv.ClusterRoles {
		// An aggregated ClusterRole's rules are copies of other roles' rules,
		// which are judged where they are written.
		if r.AggregationRule != nil {
			continue
		}
		judge("ClusterRole", "", r.Name, r.UID, r.Labels, r.Rules)
	}
	for _, r := range inv.Roles {
		judge("Role", r.Namespace, r.Name, r.UID, r.Labels, r.Rules)
	}
	return out
}

// systemSubject: identities the control plane itself uses.
func systemSubject(s rbacv1.Subject) bool {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		return s.Namespace == "kube-system"
	case rbacv1.UserKind, rbacv1.GroupKind:
		return strings.HasPrefix(s.Name, "system:")
	}
	return false
}

func clusterAdminBindings(inv *Inventory) []Result {
	var out []Result
	judge := func(kind, ns, name string, uid types.UID, labels map[string]string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		if ref.Kind != "ClusterRole" || ref.Name != "cluster-admin" {
			return
		}
		var others []string
		all := []string{}
		for _, s := range subjects {
			id := s.Kind + " " + s.Name
			if s.Namespace != "" {
				id = s.Kind + " " + s.Namespace + "/" + s.Name
			}
			all = append(all, id)
			if !systemSubject(s) {
				others = append(others, id)
			}
		}
		res := Resource{Kind: kind, Namespace: ns, Name: name, UID: uid, Labels: labels, Metadata: map[string]any{
			"kind": kind, "name": name, "namespace": ns, "uid": string(uid), "labels": nonNilMap(labels),
			"role_ref": ref.Kind + "/" + ref.Name, "subjects": all, "non_system_subjects": nonNil(others),
		}}
		if len(others) > 0 {
			out = append(out, Result{Resource: res, Detail: res.Ref() + " grants cluster-admin to non-system subjects: " + strings.Join(others, ", ") + "."})
		} else {
			out = append(out, Result{Resource: res, Pass: true, Detail: res.Ref() + " grants cluster-admin to system subjects only."})
		}
	}
	for _, b := range inv.ClusterRoleBindings {
		judge("ClusterRoleBinding", "", b.Name, b.UID, b.Labels, b.RoleRef, b.Subjects)
	}
	for _, b := range inv.RoleBindings {
		judge("RoleBinding", b.Namespace, b.Name, b.UID, b.Labels, b.RoleRef, b.Subjects)
	}
	return out
}

func namespaceNetworkPolicies(inv *Inventory) []Result {
	count := map[string][]string{}
	for _, p := range inv.NetworkPolicies {
		count[p.Namespace] = append(count[p.Namespace], p.Name)
	}
	out := make([]Result, 0, len(inv.Namespaces))
	for _, ns := range inv.Namespaces {
		pols := count[ns.Name]
		res := Resource{Kind: "Namespace", Name: ns.Name, UID: ns.UID, Labels: ns.Labels, Metadata: map[string]any{
			"kind": "Namespace", "name": ns.Name, "uid": string(ns.UID), "labels": nonNilMap(ns.Labels),
			"network_policies": nonNil(pols),
		}}
		if len(pols) == 0 {
			out = append(out, Result{Resource: res, Detail: res.Ref() + " has no NetworkPolicy."})
		} else {
			out = append(out, Result{Resource: res, Pass: true, Detail: fmt.Sprintf("%s has %d NetworkPolicies: %s.", res.Ref(), len(pols), strings.Join(pols, ", "))})
		}
	}
	return out
}

// nonNil keeps empty lists as [] rather than null in the JSON output, as
// the reference scanner does.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
