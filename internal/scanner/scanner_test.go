package scanner

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, func(c *rest.Config) error { cfg = c; return nil })
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// goodSpec passes every workload check.
func goodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           "app",
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)},
		Volumes: []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
		},
		InitContainers: []corev1.Container{goodContainer("init", "registry.example.com:5000/tools/migrate:2.0")},
		Containers: []corev1.Container{
			goodContainer("app", "registry.example.com:5000/shop/app:1.2.3"),
			goodContainer("sidecar", "ghcr.io/example/proxy@sha256:4f6a0b7c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e"),
		},
	}
}

func goodContainer(name, image string) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: image,
		Env: []corev1.EnvVar{
			{Name: "LOG_LEVEL", Value: "debug"},
			{Name: "SECRET_NAME", Value: "db"}, // names a secret, holds none
			{Name: "TOKEN_TTL", Value: "3600"},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{
			Privileged:               ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
		},
	}
}

var workloadChecks = []string{
	"core_privileged_containers", "core_host_namespaces", "core_hostpath_volumes", "core_run_as_non_root",
	"core_resource_limits", "core_image_tag_not_latest", "core_automount_service_account_token",
	"core_default_service_account_in_use", "core_secrets_in_env_vars", "core_privilege_escalation",
	"core_added_capabilities",
}

func deployment(ns, name string, spec corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// verdicts maps "check|Kind ns/name" to PASS or FAIL.
func verdicts(rep *Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Results {
		v := "FAIL"
		if r.Pass {
			v = "PASS"
		}
		out[r.Check.ID+"|"+r.Resource.Ref()] = v
	}
	return out
}

func TestChecksOnCluster(t *testing.T) {
	ctx := context.Background()
	cs := clientset(t)
	suffix := strings.ToLower(uuid.NewString()[:8])
	nsA, nsB := "shop-"+suffix, "bare-"+suffix
	for _, ns := range []string{nsA, nsB} {
		must(t, create(ctx, cs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	for _, sa := range []*corev1.ServiceAccount{
		{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "default"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "locked"}, AutomountServiceAccountToken: ptr.To(false)},
	} {
		must(t, create(ctx, cs, sa))
	}
	must(t, create(ctx, cs, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "default-deny"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}))

	first := func(s *corev1.PodSpec) *corev1.Container { return &s.Containers[0] }
	mutations := []struct {
		name  string
		fails []string
		edit  func(s *corev1.PodSpec)
	}{
		{"good", nil, func(*corev1.PodSpec) {}},
		// The API refuses privileged together with allowPrivilegeEscalation false.
		{"privileged", []string{"core_privileged_containers", "core_privilege_escalation"}, func(s *corev1.PodSpec) {
			first(s).SecurityContext.Privileged = ptr.To(true)
			first(s).SecurityContext.AllowPrivilegeEscalation = nil
		}},
		{"host-network", []string{"core_host_namespaces"}, func(s *corev1.PodSpec) { s.HostNetwork = true }},
		{"host-pid", []string{"core_host_namespaces"}, func(s *corev1.PodSpec) { s.HostPID = true }},
		{"host-ipc", []string{"core_host_namespaces"}, func(s *corev1.PodSpec) { s.HostIPC = true }},
		{"hostpath", []string{"core_hostpath_volumes"}, func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "docker", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/docker.sock"}}})
		}},
		{"root-implicit", []string{"core_run_as_non_root"}, func(s *corev1.PodSpec) { s.SecurityContext = nil }},
		{"root-explicit", []string{"core_run_as_non_root"}, func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot = nil
			s.InitContainers[0].SecurityContext.RunAsUser = ptr.To[int64](0)
		}},
		{"nonroot-container-level", nil, func(s *corev1.PodSpec) {
			s.SecurityContext = nil
			for i := range s.InitContainers {
				s.InitContainers[i].SecurityContext.RunAsUser = ptr.To[int64](10001)
			}
			for i := range s.Containers {
				s.Containers[i].SecurityContext.RunAsNonRoot = ptr.To(true)
			}
		}},
		{"no-memory-limit", []string{"core_resource_limits"}, func(s *corev1.PodSpec) {
			delete(s.Containers[1].Resources.Limits, corev1.ResourceMemory)
		}},
		{"no-limits", []string{"core_resource_limits"}, func(s *corev1.PodSpec) { s.InitContainers[0].Resources = corev1.ResourceRequirements{} }},
		{"latest-tag", []string{"core_image_tag_not_latest"}, func(s *corev1.PodSpec) { first(s).Image = "nginx:latest" }},
		{"untagged", []string{"core_image_tag_not_latest"}, func(s *corev1.PodSpec) { first(s).Image = "registry.example.com:5000/shop/app" }},
		{"automount-default", []string{"core_automount_service_account_token"}, func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = nil }},
		{"automount-explicit", []string{"core_automount_service_account_token"}, func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = ptr.To(true) }},
		{"automount-off-by-sa", nil, func(s *corev1.PodSpec) {
			s.AutomountServiceAccountToken = nil
			s.ServiceAccountName = "locked"
		}},
		{"default-sa-implicit", []string{"core_default_service_account_in_use"}, func(s *corev1.PodSpec) { s.ServiceAccountName = "" }},
		{"default-sa-explicit", []string{"core_default_service_account_in_use"}, func(s *corev1.PodSpec) { s.ServiceAccountName = "default" }},
		{"secret-key-ref", []string{"core_secrets_in_env_vars"}, func(s *corev1.PodSpec) {
			first(s).Env = append(first(s).Env, corev1.EnvVar{Name: "DB_URL", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "url"}}})
		}},
		{"secret-env-from", []string{"core_secrets_in_env_vars"}, func(s *corev1.PodSpec) {
			s.InitContainers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
		}},
		{"literal-password", []string{"core_secrets_in_env_vars"}, func(s *corev1.PodSpec) {
			first(s).Env = append(first(s).Env, corev1.EnvVar{Name: "DB_PASSWORD", Value: "hunter2"})
		}},
		{"escalation-unset", []string{"core_privilege_escalation"}, func(s *corev1.PodSpec) {
			s.Containers[1].SecurityContext.AllowPrivilegeEscalation = nil
		}},
		{"escalation-true", []string{"core_privilege_escalation"}, func(s *corev1.PodSpec) {
			first(s).SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}},
		{"cap-sys-admin", []string{"core_added_capabilities"}, func(s *corev1.PodSpec) {
			first(s).SecurityContext.Capabilities.Add = append(first(s).SecurityContext.Capabilities.Add, "SYS_ADMIN")
		}},
	}
	want := map[string]string{}
	expect := func(ref string, fails []string) {
		for _, id := range workloadChecks {
			v := "PASS"
			if slices.Contains(fails, id) {
				v = "FAIL"
			}
			want[id+"|"+ref] = v
		}
	}
	for _, m := range mutations {
		spec := goodSpec()
		m.edit(&spec)
		must(t, create(ctx, cs, deployment(nsA, m.name, spec)))
		expect("Deployment "+nsA+"/"+m.name, m.fails)
	}

	// Every kind of workload is judged through its pod template.
	bad := goodSpec()
	bad.HostPID = true
	labels := map[string]string{"app": "x"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: bad}
	jobTmpl := tmpl.DeepCopy()
	jobTmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	must(t, create(ctx, cs, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}))
	must(t, create(ctx, cs, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}))
	must(t, create(ctx, cs, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *jobTmpl}}}}))
	must(t, create(ctx, cs, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "once"},
		Spec: batchv1.JobSpec{Template: *jobTmpl}}))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "debug"}, Spec: bad}
	must(t, create(ctx, cs, pod))
	for _, ref := range []string{"StatefulSet " + nsA + "/db", "DaemonSet " + nsA + "/agent", "CronJob " + nsA + "/nightly", "Job " + nsA + "/once", "Pod " + nsA + "/debug"} {
		expect(ref, []string{"core_host_namespaces"})
	}

	// A Deployment's ReplicaSet and pods are judged through the Deployment.
	good, err := cs.AppsV1().Deployments(nsA).Get(ctx, "good", metav1.GetOptions{})
	must(t, err)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "good-5d8f", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(good, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
	must(t, create(ctx, cs, rs))
	rsPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "good-5d8f-abcde",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}}, Spec: bad}
	must(t, create(ctx, cs, rsPod))

	// RBAC.
	must(t, create(ctx, cs, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "everything"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}, {APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}))
	must(t, create(ctx, cs, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}}}}))
	crWild, crNarrow := "wild-"+suffix, "narrow-"+suffix
	must(t, create(ctx, cs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crWild},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics/*"}, Verbs: []string{"get"}}}}))
	must(t, create(ctx, cs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crNarrow},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"posture.dev"}, Resources: []string{"ingestions"}, Verbs: []string{"get"}}}}))
	crbAlice, crbMasters := "alice-admin-"+suffix, "masters-"+suffix
	adminRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}
	must(t, create(ctx, cs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crbAlice}, RoleRef: adminRef,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:masters"}, {Kind: rbacv1.UserKind, Name: "alice@example.com"}}}))
	must(t, create(ctx, cs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crbMasters}, RoleRef: adminRef,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:masters"}, {Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "operator"}}}))
	must(t, create(ctx, cs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app-admin"}, RoleRef: adminRef,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: nsA, Name: "app"}}}))
	must(t, create(ctx, cs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bob@example.com"}}}))

	for k, v := range map[string]string{
		"rbac_wildcard_rules|Role " + nsA + "/everything":               "FAIL",
		"rbac_wildcard_rules|Role " + nsA + "/reader":                   "PASS",
		"rbac_wildcard_rules|ClusterRole " + crWild:                     "FAIL",
		"rbac_wildcard_rules|ClusterRole " + crNarrow:                   "PASS",
		"rbac_cluster_admin_bindings|ClusterRoleBinding " + crbAlice:    "FAIL",
		"rbac_cluster_admin_bindings|ClusterRoleBinding " + crbMasters:  "PASS",
		"rbac_cluster_admin_bindings|ClusterRoleBinding cluster-admin":  "PASS", // the bootstrap binding to system:masters
		"rbac_cluster_admin_bindings|RoleBinding " + nsA + "/app-admin": "FAIL",
		"networking_namespace_network_policy|Namespace " + nsA:          "PASS",
		"networking_namespace_network_policy|Namespace " + nsB:          "FAIL",
	} {
		want[k] = v
	}

	rep, err := Scan(ctx, cs, Options{Scope: Scope{Namespaces: []string{nsA, nsB}}, Cluster: Cluster{Name: "envtest", Context: "envtest"}})
	must(t, err)
	got := verdicts(rep)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %s", k, got[k], v)
		}
	}
	// Nothing beyond what the table names: no verdict on the ReplicaSet or
	// pods a scanned controller owns, on Kubernetes' own bootstrap roles, on
	// bindings to other roles, or on namespaces out of scope.
	for k, v := range got {
		if _, ok := want[k]; ok {
			continue
		}
		kind := strings.Fields(strings.SplitN(k, "|", 2)[1])[0]
		if kind != "ClusterRole" && kind != "ClusterRoleBinding" {
			t.Errorf("unexpected verdict %s = %s", k, v)
			continue
		}
		// Other cluster-scoped objects exist in the shared control plane; the
		// bootstrap ones must not be judged.
		name := strings.Fields(k)[1]
		if kind == "ClusterRole" && (name == "cluster-admin" || strings.HasPrefix(name, "system:")) {
			t.Errorf("bootstrap role judged: %s = %s", k, v)
		}
	}
	if len(rep.Skipped) != 0 {
		t.Errorf("skipped checks: %v", rep.Skipped)
	}
	if rep.Failed() == 0 {
		t.Fatal("no failures counted")
	}

	kubeSystem, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	must(t, err)
	if rep.Cluster.UID != string(kubeSystem.UID) || rep.Cluster.UID == "" {
		t.Errorf("cluster uid %q, want kube-system's %q", rep.Cluster.UID, kubeSystem.UID)
	}

	t.Run("ocsf output is valid and in the scanner shape", func(t *testing.T) {
		var buf bytes.Buffer
		must(t, rep.WriteOCSF(&buf))
		checkOCSF(t, buf.Bytes(), rep)
	})

	t.Run("finding uids are stable across scans", func(t *testing.T) {
		again, err := Scan(ctx, cs, Options{Scope: Scope{Namespaces: []string{nsA, nsB}}})
		must(t, err)
		if again.ScanID == rep.ScanID {
			t.Error("two scans share a scan id")
		}
		uids := func(r *Report) []string {
			var out []string
			for _, res := range r.Results {
				if res.Resource.Namespace != "" { // cluster-scoped objects of parallel tests may come and go
					out = append(out, FindingUID(res.Check.ID, r.Cluster.UID, res.Resource))
				}
			}
			sort.Strings(out)
			return out
		}
		if a, b := uids(rep), uids(again); !slices.Equal(a, b) {
			t.Errorf("finding uids differ between scans:\n%v\n%v", a, b)
		}
	})

	t.Run("csv output", func(t *testing.T) {
		var buf bytes.Buffer
		must(t, rep.WriteCSV(&buf))
		rows, err := csv.NewReader(&buf).ReadAll()
		must(t, err)
		if len(rows) != len(rep.Results)+1 || !slices.Equal(rows[0], CSVHeader) {
			t.Fatalf("%d rows (want %d), header %v", len(rows), len(rep.Results)+1, rows[0])
		}
		col := func(name string) int { return slices.Index(CSVHeader, name) }
		found := false
		for _, row := range rows[1:] {
			if row[col("check_id")] == "core_hostpath_volumes" && row[col("resource_name")] == "hostpath" {
				found = true
				if row[col("status")] != "FAIL" || row[col("namespace")] != nsA || row[col("severity")] != "Medium" ||
					!strings.Contains(row[col("status_extended")], "/var/run/docker.sock") || row[col("provider_uid")] != rep.Cluster.UID {
					t.Errorf("hostpath row: %v", row)
				}
			}
		}
		if !found {
			t.Error("no CSV row for the hostpath deployment")
		}
	})

	t.Run("check selection", func(t *testing.T) {
		only, err := Scan(ctx, cs, Options{Scope: Scope{Namespaces: []string{nsB}}, Checks: []string{"networking_namespace_network_policy"}})
		must(t, err)
		if len(only.Results) != 1 || only.Results[0].Check.ID != "networking_namespace_network_policy" || only.Results[0].Pass {
			t.Errorf("results: %+v", only.Results)
		}
		if _, err := Scan(ctx, cs, Options{Checks: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("unknown check: %v", err)
		}
	})

	t.Run("exclude namespaces", func(t *testing.T) {
		rep, err := Scan(ctx, cs, Options{Scope: Scope{ExcludeNamespaces: []string{nsA}}, Checks: []string{"networking_namespace_network_policy", "core_host_namespaces"}})
		must(t, err)
		got := verdicts(rep)
		if got["networking_namespace_network_policy|Namespace "+nsB] != "FAIL" {
			t.Errorf("namespace %s not judged", nsB)
		}
		for k := range got {
			if strings.Contains(k, nsA) {
				t.Errorf("excluded namespace judged: %s", k)
			}
		}
	})
}

// checkOCSF validates a report with the ingestion API's own validator and
// compares its shape with the reference scanner's output.
func checkOCSF(t *testing.T, data []byte, rep *Report) {
	t.Helper()
	r := ocsf.NewReader(bytes.NewReader(data))
	v := ocsf.NewValidator()
	n := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		f, problems := v.Check(rec)
		if len(problems) > 0 {
			t.Fatalf("record %d is invalid: %+v", rec.Index, problems)
		}
		if f.ProviderType != "kubernetes" || f.ProviderUID != rep.Cluster.UID || f.ScanID != rep.ScanID {
			t.Fatalf("record %d account: %+v", rec.Index, f)
		}
		n++
	}
	if n != len(rep.Results) || n == 0 {
		t.Fatalf("%d records, %d results", n, len(rep.Results))
	}

	var records []map[string]any
	must(t, json.Unmarshal(data, &records))
	ref := loadFixture(t, "example_output_kubernetes.ocsf.json")[0]
	for i, rec := range records {
		// Every top-level and nested key of the reference scanner's record is
		// present (cloud is absent there too for Kubernetes).
		if missing := missingKeys(ref, rec, ""); len(missing) > 0 {
			t.Fatalf("record %d lacks keys of the reference output: %v", i, missing)
		}
		res := rep.Results[i]
		md := rec["metadata"].(map[string]any)
		prod := md["product"].(map[string]any)
		fi := rec["finding_info"].(map[string]any)
		um := rec["unmapped"].(map[string]any)
		resources := rec["resources"].([]any)
		want := map[string]any{
			"class_uid": 2004.0, "category_uid": 2.0, "type_uid": 200401.0, "activity_id": 1.0,
			"severity_id": float64(res.Check.Severity), "severity": res.Check.Severity.Label(),
			"status_code": map[bool]string{true: "PASS", false: "FAIL"}[res.Pass], "status": "New",
		}
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("record %d %s = %v, want %v", i, k, rec[k], v)
			}
		}
		if md["event_code"] != res.Check.ID || md["version"] != OCSFVersion ||
			prod["name"] != "postctl" || prod["uid"] != "postctl" || prod["vendor_name"] == "" || prod["version"] != ProductVersion() {
			t.Errorf("record %d metadata: %v", i, md)
		}
		if fi["uid"] != FindingUID(res.Check.ID, rep.Cluster.UID, res.Resource) || fi["title"] != res.Check.Title ||
			fi["created_time"] != float64(rep.Time.Unix()) || fi["created_time_dt"] != timeDt(rep.Time) {
			t.Errorf("record %d finding_info: %v", i, fi)
		}
		if um["provider"] != "kubernetes" || um["provider_uid"] != rep.Cluster.UID || um["scan_id"] != rep.ScanID {
			t.Errorf("record %d unmapped: %v", i, um)
		}
		if _, err := uuid.Parse(um["scan_id"].(string)); err != nil {
			t.Errorf("scan_id: %v", err)
		}
		r0 := resources[0].(map[string]any)
		if len(resources) != 1 || r0["uid"] != string(res.Resource.UID) || r0["name"] != res.Resource.Name || r0["type"] != res.Resource.Kind {
			t.Errorf("record %d resources: %v", i, resources)
		}
	}
}

func loadFixture(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(testenv.Fixture(name))
	must(t, err)
	var out []map[string]any
	must(t, json.Unmarshal(b, &out))
	return out
}

// missingKeys lists the object keys of ref absent from got, recursively;
// values that are free-form in the reference (resource metadata, compliance
// maps) are compared at their own level only.
func missingKeys(ref, got map[string]any, path string) []string {
	var out []string
	for k, rv := range ref {
		p := path + "/" + k
		gv, ok := got[k]
		if !ok {
			out = append(out, p)
			continue
		}
		switch p {
		case "/resources", "/unmapped/compliance":
			continue
		}
		if rm, ok := rv.(map[string]any); ok {
			gm, ok := gv.(map[string]any)
			if !ok {
				out = append(out, p+" (not an object)")
				continue
			}
			out = append(out, missingKeys(rm, gm, p)...)
		}
	}
	if path == "" {
		rr := ref["resources"].([]any)[0].(map[string]any)
		gr := got["resources"].([]any)[0].(map[string]any)
		for k := range rr {
			if _, ok := gr[k]; !ok && k != "namespace" {
				out = append(out, "/resources/0/"+k)
			}
		}
		for _, k := range []string{"details", "metadata"} {
			if _, ok := gr["data"].(map[string]any)[k]; !ok {
				out = append(out, "/resources/0/data/"+k)
			}
		}
	}
	return out
}

func TestUsesLatest(t *testing.T) {
	for image, want := range map[string]bool{
		"nginx":                               true,
		"nginx:latest":                        true,
		"library/nginx:latest":                true,
		"localhost:5000/app":                  true,
		"localhost:5000/app:latest":           true,
		"localhost:5000/app:1.0":              false,
		"nginx:1.27":                          false,
		"nginx@sha256:abc":                    false,
		"nginx:latest@sha256:abc":             false,
		"registry.example.com/team/app:v2":    false,
		"registry.example.com:443/team/app":   true,
		"registry.example.com:443/team/app:x": false,
	} {
		if got := usesLatest(image); got != want {
			t.Errorf("usesLatest(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	rep := &Report{ScanID: uuid.NewString(), Cluster: Cluster{UID: "c-1"}, Time: time.Now().UTC(), Results: []Result{{
		Check: checks[0], Resource: Resource{Kind: "Pod", Namespace: "a", Name: "p", UID: "u-1"}, Detail: "Pod a/p runs privileged containers.",
	}}}
	dir := t.TempDir()
	for format, suffix := range Formats {
		path := filepath.Join(dir, "report"+suffix)
		must(t, rep.Write(format, path))
		st, err := os.Stat(path)
		must(t, err)
		if st.Size() == 0 {
			t.Errorf("%s is empty", path)
		}
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) != len(Formats) {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := rep.Write("xml", filepath.Join(dir, "r.xml")); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("unknown format: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.ocsf.json"))
	must(t, err)
	checkOCSF(t, data, rep)
}

type object interface {
	metav1.Object
}

// create makes any of the test's objects through the typed clientset.
func create(ctx context.Context, cs kubernetes.Interface, obj object) error {
	var err error
	o := metav1.CreateOptions{}
	switch v := obj.(type) {
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(ctx, v, o)
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, o)
	case *corev1.Pod:
		_, err = cs.CoreV1().Pods(v.Namespace).Create(ctx, v, o)
	case *networkingv1.NetworkPolicy:
		_, err = cs.NetworkingV1().NetworkPolicies(v.Namespace).Create(ctx, v, o)
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(v.Namespace).Create(ctx, v, o)
	case *appsv1.StatefulSet:
		_, err = cs.AppsV1().StatefulSets(v.Namespace).Create(ctx, v, o)
	case *appsv1.DaemonSet:
		_, err = cs.AppsV1().DaemonSets(v.Namespace).Create(ctx, v, o)
	case *appsv1.ReplicaSet:
		var got *appsv1.ReplicaSet
		got, err = cs.AppsV1().ReplicaSets(v.Namespace).Create(ctx, v, o)
		if err == nil {
			*v = *got
		}
	case *batchv1.Job:
		_, err = cs.BatchV1().Jobs(v.Namespace).Create(ctx, v, o)
	case *batchv1.CronJob:
		_, err = cs.BatchV1().CronJobs(v.Namespace).Create(ctx, v, o)
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(v.Namespace).Create(ctx, v, o)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, v, o)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(v.Namespace).Create(ctx, v, o)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, v, o)
	default:
		return fmt.Errorf("create: unsupported %T", obj)
	}
	if err != nil {
		return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
