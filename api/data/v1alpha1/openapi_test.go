package v1alpha1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
)

// kubectl explain finds a kind's schema by the x-kubernetes-group-version-kind
// extension, which the generic server's definition namer adds to the
// definitions named as the scheme names the kind. The definitions must carry
// those names, and the OpenAPI builder must look the served types up by them.
func TestOpenAPIDefinitionsCarryTheirKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := datav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	namer := openapinamer.NewDefinitionNamer(scheme)
	defs := datav1.GetOpenAPIDefinitions(func(path string) spec.Ref { return spec.MustCreateRef("#/definitions/" + path) })
	for kind, obj := range map[string]runtime.Object{
		"Finding": &datav1.Finding{}, "FindingList": &datav1.FindingList{}, "Scan": &datav1.Scan{}, "ScanList": &datav1.ScanList{},
		"IngestionError": &datav1.IngestionError{}, "IngestionErrorList": &datav1.IngestionErrorList{}, "Upload": &datav1.Upload{},
	} {
		name := util.GetCanonicalTypeName(obj)
		if _, ok := defs[name]; !ok {
			t.Errorf("%s: the OpenAPI builder looks up %q, which is not among the definitions", kind, name)
			continue
		}
		_, ext := namer.GetDefinitionName(name)
		gvks, _ := ext[common.ExtensionPrefix+"group-version-kind"].([]any)
		found := false
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["group"] == datav1.GroupName && m["version"] == datav1.SchemeGroupVersion.Version && m["kind"] == kind {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: definition %q has group-version-kind %v, want %s/%s %s", kind, name, ext, datav1.GroupName, datav1.SchemeGroupVersion.Version, kind)
		}
	}
}
