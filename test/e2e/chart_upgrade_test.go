package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/testenv"
)

// widgetCRD is a CRD of a group no other test uses, so that changing it
// between two releases cannot disturb the posture.dev CRDs the other tests
// run against. columns are extra printer columns: "name:jsonPath".
func widgetCRD(columns ...string) string {
	var cols strings.Builder
	if len(columns) > 0 {
		cols.WriteString("    additionalPrinterColumns:\n")
		for _, c := range columns {
			name, path, _ := strings.Cut(c, ":")
			fmt.Fprintf(&cols, "    - {name: %s, type: string, jsonPath: %q}\n", name, path)
		}
	}
	return `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.chartupgrade.posture.dev
spec:
  group: chartupgrade.posture.dev
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
` + cols.String() + `    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
`
}

// copyChart copies charts/posture into a temporary directory.
func copyChart(t *testing.T) string {
	t.Helper()
	src := filepath.Join(testenv.Root(), "charts", "posture")
	dst := filepath.Join(t.TempDir(), "posture")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy the chart: %v", err)
	}
	return dst
}

// TestHelmUpgradeChangesCRD runs Helm's own install, upgrade and uninstall
// (its action package, in the test/helm module) against the API server: a
// release whose chart holds a CRD in files/crds is installed, then upgraded
// with that CRD given a printer column, and the API server serves the column
// afterwards, which a CRD under crds/ would never get. Uninstalling leaves the
// CRD (crds.keep) and removes the rest.
//
// The chart is a copy whose only CRD is one of a group no other test uses
// (the posture.dev CRDs are installed by testenv, outside any release), and
// the admission policies, which have fixed cluster-wide names, are left out.
func TestHelmUpgradeChangesCRD(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chart := copyChart(t)
	crds := filepath.Join(chart, "files", "crds")
	if err := os.RemoveAll(crds); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(crds, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t)
	const (
		name      = "widgets.chartupgrade.posture.dev"
		release   = "chartupgrade"
		namespace = "chart-upgrade"
	)
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(namespace)
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(name)
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", name, err)
		}
	})
	helm := func(args ...string) string {
		t.Helper()
		args = append([]string{"run", ".", "-kubeconfig=" + kubeconfig, "-name=" + release, "-namespace=" + namespace}, args...)
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(testenv.Root(), "test", "helm")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	for rev, tc := range []struct {
		columns []string
		want    []string // the columns of a kubectl get
	}{
		{nil, []string{"Name", "Age"}},
		// Custom columns replace the default Age column.
		{[]string{"Color:.spec.color"}, []string{"Name", "Color"}},
	} {
		if err := os.WriteFile(filepath.Join(crds, "chartupgrade.posture.dev_widgets.yaml"), []byte(widgetCRD(tc.columns...)), 0o644); err != nil {
			t.Fatal(err)
		}
		out := helm("-install", "-set=admissionPolicies.enabled=false", chart)
		if want := fmt.Sprintf("revision %d", rev+1); !strings.Contains(out, want) {
			t.Fatalf("helm upgrade --install printed %q, want %s", out, want)
		}
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("revision %d: the API server lists widgets with columns %v", rev+1, tc.want), func() (bool, string) {
			got, err := tableColumns(schema.GroupVersionResource{Group: "chartupgrade.posture.dev", Version: "v1", Resource: "widgets"})
			if err != nil {
				return false, err.Error()
			}
			return strings.Join(got, ",") == strings.Join(tc.want, ","), fmt.Sprintf("columns %v", got)
		})
	}

	helm("-uninstall")
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatalf("after helm uninstall, CRD %s: %v; want it kept (crds.keep)", name, err)
	}
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("CRD annotations %v lack helm.sh/resource-policy: keep", crd.GetAnnotations())
	}
	dep := &unstructured.Unstructured{}
	dep.SetAPIVersion("apps/v1")
	dep.SetKind("Deployment")
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-posture"}, dep); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, Deployment %s/%s-posture: %v; want it gone", namespace, release, err)
	}
}

// writeKubeconfig writes the test API server's address and credentials as a
// kubeconfig for Helm.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	return testenv.Kubeconfig(t, cfg, "envtest")
}

// tableColumns asks the API server for a resource list as kubectl get does (a
// meta.k8s.io Table) and returns its column names.
func tableColumns(gvr schema.GroupVersionResource) ([]string, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%s/apis/%s/%s/namespaces/default/%s", strings.TrimSuffix(cfg.Host, "/"), gvr.Group, gvr.Version, gvr.Resource)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	var table struct {
		ColumnDefinitions []struct{ Name string } `json:"columnDefinitions"`
	}
	if err := json.Unmarshal(body, &table); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names, nil
}
