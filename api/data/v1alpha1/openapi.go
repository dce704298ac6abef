package v1alpha1

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// GetOpenAPIDefinitions describes the served kinds for the generic API
// server (its OpenAPI documents and the type converter it requires). The
// schemas are read from the Go types, so they cannot drift from them. They
// refer to apimachinery's types (ObjectMeta, ListMeta, Time, RawExtension),
// whose definitions the server adds from apimachinery's generated ones.
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := map[string]common.OpenAPIDefinition{}
	for _, obj := range []runtime.Object{&Finding{}, &FindingList{}, &Scan{}, &ScanList{},
		&IngestionError{}, &IngestionErrorList{}, &Upload{}} {
		t := reflect.TypeOf(obj).Elem()
		def := common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{
			Type: []string{"object"}, Properties: map[string]spec.Schema{},
		}}}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && f.Type == reflect.TypeOf(metav1.TypeMeta{}):
				def.Schema.Properties["apiVersion"] = *spec.StringProperty()
				def.Schema.Properties["kind"] = *spec.StringProperty()
				continue
			case name == "" || name == "-":
				continue
			}
			prop, dep := schemaOf(ref, f.Type)
			def.Schema.Properties[name] = prop
			if dep != "" {
				def.Dependencies = append(def.Dependencies, dep)
			}
		}
		defs[ModelName(t)] = def
	}
	return defs
}

// ModelName is the definition name of a served type: the REST-friendly name
// (com.github.posture-dev.posture.api.data.v1alpha1.Finding) that the
// generic server looks definitions up by (the types' OpenAPIModelName) and
// that the scheme's definition namer tags with x-kubernetes-group-version-kind,
// which kubectl explain needs to find a kind's schema.
func ModelName(t reflect.Type) string { return util.ToRESTFriendlyName(t.PkgPath() + "." + t.Name()) }

func modelName[T any]() string { return ModelName(reflect.TypeFor[T]()) }

// OpenAPIModelName names each served type's definition; the scheme and the
// OpenAPI builder use it instead of the Go package path.
func (Finding) OpenAPIModelName() string            { return modelName[Finding]() }
func (FindingList) OpenAPIModelName() string        { return modelName[FindingList]() }
func (Scan) OpenAPIModelName() string               { return modelName[Scan]() }
func (ScanList) OpenAPIModelName() string           { return modelName[ScanList]() }
func (IngestionError) OpenAPIModelName() string     { return modelName[IngestionError]() }
func (IngestionErrorList) OpenAPIModelName() string { return modelName[IngestionErrorList]() }
func (Upload) OpenAPIModelName() string             { return modelName[Upload]() }

func schemaOf(ref common.ReferenceCallback, t reflect.Type) (spec.Schema, string) {
	for _, named := range []interface{ OpenAPIModelName() string }{metav1.Time{}, metav1.ObjectMeta{}, metav1.ListMeta{}, runtime.RawExtension{}} {
		if t == reflect.TypeOf(named) {
			name := named.OpenAPIModelName()
			return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}}, name
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(ref, t.Elem())
	case reflect.String:
		return *spec.StringProperty(), ""
	case reflect.Bool:
		return *spec.BooleanProperty(), ""
	case reflect.Int, reflect.Int32, reflect.Int64:
		return *spec.Int64Property(), ""
	case reflect.Map:
		// Maps are keyed by string (failCounts by severity).
		value, dep := schemaOf(ref, t.Elem())
		return *spec.MapProperty(&value), dep
	case reflect.Slice:
		item := ModelName(t.Elem())
		return *spec.ArrayProperty(&spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(item)}}), item
	}
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}, ""
}
