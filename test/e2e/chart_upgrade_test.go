package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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

// TestHelmUpgradeChangesCRD is what helm upgrade does to the chart's CRDs,
// now that they are templates: revision 1 (an install) renders a CRD put in
// files/crds, revision 2 (an upgrade, which never applies crds/) renders it
// with a new printer column, and once applied the API server serves that
// column. Helm's action package is not used (it would bring Helm's
// dependencies into the operator's module): the rendered objects are applied
// as helm applies a release, ending in the rendered object, here by
// server-side apply with force under one field manager.
func TestHelmUpgradeChangesCRD(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chart := copyChart(t)
	crdFile := filepath.Join(chart, "files", "crds", "chartupgrade.posture.dev_widgets.yaml")
	const name = "widgets.chartupgrade.posture.dev"
	t.Cleanup(func() {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(name)
		if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", name, err)
		}
	})

	for rev, tc := range []struct {
		columns []string
		want    []string // the columns of a kubectl get
	}{
		{nil, []string{"Name", "Age"}},
		// Custom columns replace the default Age column.
		{[]string{"Color:.spec.color"}, []string{"Name", "Color"}},
	} {
		if err := os.WriteFile(crdFile, []byte(widgetCRD(tc.columns...)), 0o644); err != nil {
			t.Fatal(err)
		}
		var crd *unstructured.Unstructured
		for _, o := range renderChartDir(t, chart, "posture", rev > 0) {
			if o.GetKind() == "CustomResourceDefinition" && o.GetName() == name {
				crd = o
			}
		}
		if crd == nil {
			t.Fatalf("release %d: the chart does not render CRD %s from files/crds", rev+1, name)
		}
		if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("release %d: CRD annotations %v lack helm.sh/resource-policy: keep", rev+1, crd.GetAnnotations())
		}
		if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("release %d: apply CRD %s: %v", rev+1, name, err)
		}
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("release %d: the API server lists widgets with columns %v", rev+1, tc.want), func() (bool, string) {
			got, err := tableColumns(schema.GroupVersionResource{Group: "chartupgrade.posture.dev", Version: "v1", Resource: "widgets"})
			if err != nil {
				return false, err.Error()
			}
			return strings.Join(got, ",") == strings.Join(tc.want, ","), fmt.Sprintf("columns %v", got)
		})
	}
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
