// Package e2e holds end-to-end checks against the local control plane.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, func(c *rest.Config) error { cfg = c; return nil })
}

// render runs kustomize (built into kubectl) over a directory of config/.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command("kubectl", "kustomize", filepath.Join(testenv.Root(), dir)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return decode(t, out)
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// admit creates namespaces for real and every other object as a server-side
// dry run, so the real API server validates each manifest (schemas, CEL, RBAC
// shapes) without anything running.
func admit(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("namespace %s: %v", o.GetName(), err)
			}
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition": // CRDs: installed from the same files by testenv
			continue
		}
		if err := c.Create(ctx, o, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s %s/%s rejected by the API server: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func TestDefaultManifestsAreAdmitted(t *testing.T) {
	objs := render(t, "config/default")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		// The aggregated API's authentication reader binding must stay in
		// kube-system, where the Role it names lives.
		kubeSystem := o.GetKind() == "RoleBinding" && o.GetName() == "posture-manager-auth-reader"
		if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "ClusterRole" &&
			o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "APIService" && !kubeSystem && o.GetNamespace() != "posture-system" {
			t.Errorf("%s %s is not in posture-system", o.GetKind(), o.GetName())
		}
		if kubeSystem && o.GetNamespace() != "kube-system" {
			t.Errorf("RoleBinding %s is in %q, want kube-system", o.GetName(), o.GetNamespace())
		}
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "Service", "ServiceAccount", "ClusterRole", "Role",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "APIService"} {
		if kinds[want] == 0 {
			t.Errorf("config/default renders no %s", want)
		}
	}
	admit(t, objs)
}

func TestSamplesAreAdmitted(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "samples", "tenant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, data)
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			nsObj := &unstructured.Unstructured{}
			nsObj.SetAPIVersion("v1")
			nsObj.SetKind("Namespace")
			nsObj.SetName(ns)
			objs = append([]*unstructured.Unstructured{nsObj}, objs...)
			break
		}
	}
	admit(t, objs)
}

// renderChart renders charts/posture as release `release` with Helm's own
// engine (the test/helm module) and the given --set values.
func renderChart(t *testing.T, release string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"run", ".", "-namespace=posture-system", "-name=" + release}
	for _, s := range sets {
		args = append(args, "-set="+s)
	}
	cmd := exec.Command("go", append(args, filepath.Join(testenv.Root(), "charts", "posture"))...)
	cmd.Dir = filepath.Join(testenv.Root(), "test", "helm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render the chart: %v\n%s", err, stderr.String())
	}
	return decode(t, out)
}

// TestHelmChartIsAdmitted renders charts/posture with Helm's own engine (the
// test/helm module) and has the API server admit every object.
func TestHelmChartIsAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		// namespaces the chart renders into besides posture-system
		namespaces []string
		kinds      []string
	}{
		{"defaults", nil, nil, nil},
		{"in-process on SQLite", []string{"executor=inprocess", "store.driver=sqlite", "replicaCount=1", "metrics.enabled=false"}, nil, nil},
		{"network policies and TLS from cert-manager", []string{
			"networkPolicy.enabled=true", "networkPolicy.mcp.namespaces={tenant-acme}",
			"api.tls.enabled=true", "api.tls.certManager.enabled=true", "api.tls.certManager.issuerRef.name=ca", "api.tls.certManager.issuerRef.kind=ClusterIssuer",
		}, []string{"tenant-acme"}, []string{"NetworkPolicy", "Certificate"}},
		{"Ingress, PDB, aggregated roles, extras", []string{
			"ingress.enabled=true", "ingress.className=nginx", "ingress.hosts={posture.example.com}", "ingress.certManager.clusterIssuer=letsencrypt",
			"podDisruptionBudget.maxUnavailable=1", "serviceAccount.annotations.example\\.com/role=posture", "commonLabels.team=platform",
			"extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://proxy:3128",
			"extraVolumes[0].name=db-ca", "extraVolumes[0].configMap.name=db-ca", "extraVolumeMounts[0].name=db-ca", "extraVolumeMounts[0].mountPath=/etc/db-ca",
		}, nil, []string{"Ingress", "PodDisruptionBudget"}},
		{"aggregated API certificate from cert-manager", []string{"aggregatedAPI.certManager.enabled=true"}, nil, []string{"Certificate", "Issuer"}},
		{"SQLite on a PVC", []string{"executor=inprocess", "store.driver=sqlite", "replicaCount=1", "persistence.enabled=true", "persistence.size=2Gi",
			"podDisruptionBudget.enabled=true"}, nil, []string{"PersistentVolumeClaim", "PodDisruptionBudget"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderChart(t, "posture", tc.sets...)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			for _, want := range append([]string{"CustomResourceDefinition", "Deployment", "Service", "ServiceAccount", "ClusterRole", "Role", "RoleBinding",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "APIService"}, tc.kinds...) {
				if kinds[want] == 0 {
					t.Errorf("the chart renders no %s", want)
				}
			}
			var admitted []*unstructured.Unstructured
			for _, ns := range append([]string{"posture-system"}, tc.namespaces...) {
				nsObj := &unstructured.Unstructured{}
				nsObj.SetAPIVersion("v1")
				nsObj.SetKind("Namespace")
				nsObj.SetName(ns)
				admitted = append(admitted, nsObj)
			}
			for _, o := range objs {
				if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
					if rules, _, _ := unstructured.NestedSlice(o.Object, "rules"); len(rules) == 0 {
						t.Errorf("%s %s has no rules: the generated RBAC did not reach the chart", o.GetKind(), o.GetName())
					}
				}
				// cert-manager's CRDs are not installed here; its Certificate is
				// checked by TestHelmChartTLSAndNetworkPolicies.
				if o.GetKind() != "Certificate" && o.GetKind() != "Issuer" {
					admitted = append(admitted, o)
				}
			}
			admit(t, admitted)
		})
	}
}

// TestHelmChartTLSAndNetworkPolicies checks what the TLS and NetworkPolicy
// values render: which ports each policy opens, and that the manager serves
// the certificate cert-manager writes.
func TestHelmChartTLSAndNetworkPolicies(t *testing.T) {
	objs := renderChart(t, "posture", "networkPolicy.enabled=true", "networkPolicy.mcp.namespaces={tenant-acme}",
		"api.tls.enabled=true", "api.tls.certManager.enabled=true", "api.tls.certManager.issuerRef.name=ca")
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	// ports lists "protocol/port" of every rule of a NetworkPolicy direction.
	ports := func(np *unstructured.Unstructured, direction string) []string {
		rules, _, _ := unstructured.NestedSlice(np.Object, "spec", direction)
		var out []string
		for _, r := range rules {
			ps, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
			for _, p := range ps {
				pm := p.(map[string]any)
				out = append(out, fmt.Sprintf("%v/%v", pm["protocol"], pm["port"]))
			}
		}
		return out
	}
	for _, tc := range []struct {
		policy          string
		ingress, egress []string
	}{
		{"posture-system/posture-manager", []string{"TCP/api", "TCP/aggregated-api", "TCP/probes", "TCP/metrics"}, []string{"UDP/53", "TCP/53", "TCP/443", "TCP/6443", "TCP/5432"}},
		{"posture-system/posture-worker", nil, []string{"UDP/53", "TCP/53", "TCP/5432"}},
		{"tenant-acme/posture-mcp", []string{"TCP/http"}, []string{"UDP/53", "TCP/53", "TCP/8080"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			np := byName["NetworkPolicy/"+tc.policy]
			if np == nil {
				t.Fatalf("no NetworkPolicy %s rendered", tc.policy)
			}
			types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
			if !slices.Equal(types, []string{"Ingress", "Egress"}) {
				t.Errorf("policyTypes = %v; want both, so that what is not listed is denied", types)
			}
			if got := ports(np, "ingress"); !slices.Equal(got, tc.ingress) {
				t.Errorf("ingress ports = %v, want %v", got, tc.ingress)
			}
			if got := ports(np, "egress"); !slices.Equal(got, tc.egress) {
				t.Errorf("egress ports = %v, want %v", got, tc.egress)
			}
		})
	}

	cert := byName["Certificate/posture-system/posture-api"]
	if cert == nil {
		t.Fatal("no cert-manager Certificate rendered")
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if secret != "posture-api-tls" || !slices.Contains(dns, "posture-api.posture-system.svc") {
		t.Errorf("Certificate secretName %q dnsNames %v; want posture-api-tls for the API Service", secret, dns)
	}
	dep := byName["Deployment/posture-system/posture"]
	if dep == nil {
		t.Fatal("no manager Deployment rendered")
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, want := range []string{"--api-tls-cert-file=/etc/posture/api-tls/tls.crt", "--api-tls-key-file=/etc/posture/api-tls/tls.key"} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args %v lack %s", args, want)
		}
	}
	volumes, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	var mounted bool
	for _, v := range volumes {
		if name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); name == secret {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the manager does not mount Secret %s: volumes %v", secret, volumes)
	}
}

// TestHelmChartTenantAccessRole: whatever the release is called, the one
// ClusterRole the manager may bind is the release's tenant-access role, the
// manager is told that name, and nothing binds it cluster-wide.
func TestHelmChartTenantAccessRole(t *testing.T) {
	for _, release := range []string{"posture", "acme"} {
		t.Run(release, func(t *testing.T) {
			objs := renderChart(t, release)
			var bindable []string
			var flag string
			clusterRoles := map[string]bool{}
			for _, o := range objs {
				switch o.GetKind() {
				case "ClusterRole":
					clusterRoles[o.GetName()] = true
					rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
					for _, r := range rules {
						verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
						if slices.Contains(verbs, "bind") || slices.Contains(verbs, "escalate") || slices.Contains(verbs, "*") {
							names, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resourceNames")
							if len(names) == 0 {
								t.Errorf("ClusterRole %s may bind or escalate any role: %v", o.GetName(), r)
							}
							bindable = append(bindable, names...)
						}
					}
				case "Deployment":
					containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
					args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
					for _, a := range args {
						if v, ok := strings.CutPrefix(a, "--tenant-access-role="); ok {
							flag = v
						}
					}
				}
			}
			if len(bindable) != 1 || bindable[0] != flag || !clusterRoles[flag] {
				t.Fatalf("bindable ClusterRoles %v, --tenant-access-role=%q, rendered ClusterRoles %v; want the one rendered role the manager is told about", bindable, flag, clusterRoles)
			}
			for _, o := range objs {
				if o.GetKind() == "ClusterRoleBinding" {
					if name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); name == flag {
						t.Errorf("ClusterRoleBinding %s grants %s cluster-wide", o.GetName(), flag)
					}
				}
			}
		})
	}
}

// TestHelmChartRefusesJobExecutorOnSQLite: worker pods cannot reach a SQLite file.
func TestHelmChartRefusesJobExecutorOnSQLite(t *testing.T) {
	cmd := exec.Command("go", "run", ".", "-set=store.driver=sqlite", "-set=replicaCount=1", filepath.Join(testenv.Root(), "charts", "posture"))
	cmd.Dir = filepath.Join(testenv.Root(), "test", "helm")
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("needs store.driver=postgres")) {
		t.Fatalf("rendering executor=job with sqlite: err %v, output %s", err, out)
	}
}
