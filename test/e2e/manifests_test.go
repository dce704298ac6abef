// Package e2e holds end-to-end checks against the local control plane.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
		if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "ClusterRole" &&
			o.GetKind() != "ClusterRoleBinding" && o.GetNamespace() != "posture-system" {
			t.Errorf("%s %s is not in posture-system", o.GetKind(), o.GetName())
		}
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "Service", "ServiceAccount", "ClusterRole", "Role",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
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

// TestHelmChartIsAdmitted renders charts/posture with Helm's own engine (the
// test/helm module) and has the API server admit every object.
func TestHelmChartIsAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
	}{
		{"defaults", nil},
		{"in-process on SQLite", []string{"executor=inprocess", "store.driver=sqlite", "replicaCount=1", "metrics.enabled=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", ".", "-namespace=posture-system"}
			for _, s := range tc.sets {
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
			objs := decode(t, out)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			for _, want := range []string{"CustomResourceDefinition", "Deployment", "Service", "ServiceAccount", "ClusterRole", "Role", "RoleBinding",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
				if kinds[want] == 0 {
					t.Errorf("the chart renders no %s", want)
				}
			}
			for _, o := range objs {
				if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
					if rules, _, _ := unstructured.NestedSlice(o.Object, "rules"); len(rules) == 0 {
						t.Errorf("%s %s has no rules: the generated RBAC did not reach the chart", o.GetKind(), o.GetName())
					}
				}
			}
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName("posture-system")
			admit(t, append([]*unstructured.Unstructured{ns}, objs...))
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
