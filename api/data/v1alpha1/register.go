package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the aggregated API.
const GroupName = "data.posture.dev"

// SchemeGroupVersion is the served version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// InternalGroupVersion is the hub the generic API server converts through.
// The served types are simple enough to be their own hub: the same Go types
// are registered under both versions.
var InternalGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// AddToScheme registers the types under the served and the internal version.
func AddToScheme(s *runtime.Scheme) error {
	for _, gv := range []schema.GroupVersion{SchemeGroupVersion, InternalGroupVersion} {
		s.AddKnownTypes(gv, &Finding{}, &FindingList{}, &Scan{}, &ScanList{},
			&IngestionError{}, &IngestionErrorList{}, &Upload{})
	}
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return addFieldLabels(s)
}

// Field selectors each kind supports, besides metadata.name and
// metadata.namespace. The names are the JSON paths of the fields they match,
// except a finding's latest (LatestSelector), which picks the current state
// rather than matching a field.
var (
	FindingFieldSelectors = []string{"severity", "statusCode", "providerUID", "checkID", "scan", "ingestion", LatestSelector, DeltaSelector, MutedSelector}
	ScanFieldSelectors    = []string{"providerUID", "providerType", "ingestion"}
	ErrorFieldSelectors   = []string{"ingestion"}
)

// LatestSelector is the findings field selector that lists the current
// state (latest=true), as REST's GET /api/v1/findings/latest does, rather
// than the whole history (latest=false, or no selector).
const LatestSelector = "latest"

// DeltaSelector keeps, with latest=true, the current findings that are new
// or changed (delta=new, delta=changed), or lists the resolved ones
// (delta=resolved), as REST's filter[delta] does.
const DeltaSelector = "delta"

// MutedSelector chooses the muted findings as REST's filter[muted] does:
// muted=false leaves them out (the default with latest=true), muted=true
// keeps only them, muted=any lists both (the default of the history).
const MutedSelector = "muted"

// IncludeRecordsParam, =true on a list of findings, has each item carry
// its OCSF record (Finding.Record), which only a get returns otherwise:
// what kubectl posture export --format ocsf pages through.
const IncludeRecordsParam = "includeRecords"

func addFieldLabels(s *runtime.Scheme) error {
	for kind, labels := range map[string][]string{
		"Finding": FindingFieldSelectors, "Scan": ScanFieldSelectors, "IngestionError": ErrorFieldSelectors,
	} {
		allowed := map[string]bool{"metadata.name": true, "metadata.namespace": true}
		for _, l := range labels {
			allowed[l] = true
		}
		err := s.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind), func(label, value string) (string, string, error) {
			if !allowed[label] {
				return "", "", &UnknownFieldError{Kind: kind, Label: label, Known: labels}
			}
			return label, value, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// UnknownFieldError names a field selector a kind does not support.
type UnknownFieldError struct {
	Kind, Label string
	Known       []string
}

func (e *UnknownFieldError) Error() string {
	return "field selector " + e.Label + " is not supported for " + e.Kind + "; supported: metadata.name, metadata.namespace, " + join(e.Known)
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}
