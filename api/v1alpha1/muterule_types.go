package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionExpired is True once a MuteRule's spec.expiresAt has passed:
// the rule no longer mutes anything, and its marks are removed. The rule
// is still reconciled as declared (Ready), as an expired APIKey is.
const ConditionExpired = "Expired"

// FinalizerMuteRule is held by every MuteRule until its marks are
// removed from the findings it muted.
const FinalizerMuteRule = "posture.dev/mute-marks"

// MuteMatch says which findings a rule mutes: those that match every field
// given. At least one field must be given. The text fields take an exact
// value or a glob: `*` matches any run of characters (slashes and colons
// too, so `arn:aws:s3:::logs-*` matches every bucket whose name starts so),
// `?` one character, `[abc]` one of a set.
type MuteMatch struct {
	// CheckID is the finding's check (OCSF metadata.event_code).
	// +optional
	CheckID string `json:"checkId,omitempty"`
	// Account is the provider account uid (cloud.account.uid).
	// +optional
	Account string `json:"account,omitempty"`
	// Region is the finding's region.
	// +optional
	Region string `json:"region,omitempty"`
	// ResourceUID is the resource's uid (an ARN, a resource id).
	// +optional
	ResourceUID string `json:"resourceUid,omitempty"`
	// ResourceName is the resource's name (resources[0].name).
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// Severity lists the severities muted (informational, low, medium,
	// high, critical, fatal, other, unknown); any of them matches.
	// +optional
	Severity []string `json:"severity,omitempty"`
	// StatusCode lists the status codes muted (PASS, FAIL, MANUAL, ...);
	// any of them matches.
	// +optional
	StatusCode []string `json:"statusCode,omitempty"`
}

// MuteRuleSpec declares which findings of the tenant are muted, and why.
type MuteRuleSpec struct {
	// Match selects the findings muted.
	Match MuteMatch `json:"match"`
	// Reason says why these findings are accepted; every door shows it
	// beside the mark.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// ExpiresAt ends the rule: from then on it mutes nothing.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// MuteRuleStatus is the observed state of a MuteRule.
type MuteRuleStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// AppliedGeneration is the generation whose marks are written on
	// every stored finding; below observedGeneration while the pass over
	// the stored findings runs.
	// +optional
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`
	// MatchedFindings is the number of stored findings the rule marks.
	// +optional
	MatchedFindings int64 `json:"matchedFindings,omitempty"`
	// ScannedFindings is how many stored findings the pass of the current
	// generation has looked at so far.
	// +optional
	ScannedFindings int64 `json:"scannedFindings,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MuteRule mutes the findings of its tenant (the tenant of its namespace)
// that match it: they keep being stored and listed in the history, carry
// the rule's mark and reason, and are left out of the current state's
// lists and counts unless asked for.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=posture
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedFindings`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type MuteRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MuteRuleSpec `json:"spec"`

	// Status reads as {observedGeneration: 0} until the controller first
	// writes it, so that kstatus sees a new rule as InProgress.
	// +kubebuilder:default={observedGeneration: 0}
	Status MuteRuleStatus `json:"status,omitempty"`
}

// MuteRuleList contains a list of MuteRule.
// +kubebuilder:object:root=true
type MuteRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MuteRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MuteRule{}, &MuteRuleList{})
}
