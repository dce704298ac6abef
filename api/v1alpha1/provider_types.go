package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderOrigin says who declared a provider.
// +kubebuilder:validation:Enum=connected;imported
type ProviderOrigin string

const (
	ProviderConnected ProviderOrigin = "connected"
	ProviderImported  ProviderOrigin = "imported"
)

// ProviderSpec identifies one billed cloud account.
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type && self.uid == oldSelf.uid",message="type and uid are immutable"
type ProviderSpec struct {
	// Type is the cloud: aws, azure, gcp, kubernetes, m365, github, ...
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	Type string `json:"type"`
	// UID is the account id (AWS account, Azure subscription, GCP project, cluster, ...).
	// +kubebuilder:validation:MinLength=1
	UID string `json:"uid"`
	// +optional
	Alias string `json:"alias,omitempty"`
	// +kubebuilder:default=connected
	// +optional
	Origin ProviderOrigin `json:"origin,omitempty"`
}

// ProviderStatus is the observed state of a provider.
type ProviderStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Provider is one billed cloud account of a tenant. Deleting it stops it counting.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=posture
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="UID",type=string,JSONPath=`.spec.uid`
// +kubebuilder:printcolumn:name="Alias",type=string,JSONPath=`.spec.alias`
// +kubebuilder:printcolumn:name="Origin",type=string,JSONPath=`.spec.origin`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type Provider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProviderSpec `json:"spec"`

	// Status reads as {observedGeneration: 0} until the controller first
	// writes it, so that kstatus (and Flux) see a new object as InProgress
	// rather than Current before anything was reconciled.
	// +kubebuilder:default={observedGeneration: 0}
	Status ProviderStatus `json:"status,omitempty"`
}

// ProviderList contains a list of Provider.
// +kubebuilder:object:root=true
type ProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Provider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Provider{}, &ProviderList{})
}
