package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MCPServerSpec configures a managed MCP tool server.
type MCPServerSpec struct {
	// Replicas is left to an autoscaler when unset.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// APIBaseURL of the Posture API ({base_url}/api/v1) the server calls; defaults to the in-cluster
	// Service. It must be one of the addresses the operator allows (--mcp-allowed-api-base-urls), or
	// no Deployment is made. The image always comes from the operator's configuration.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	APIBaseURL string `json:"apiBaseURL,omitempty"`
	// +kubebuilder:validation:Enum=http
	// +kubebuilder:default=http
	// +optional
	Transport string `json:"transport,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8080
	// +optional
	Port int32 `json:"port,omitempty"`
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// APIKeySecretRef is a Secret whose key the server uses when a client sends none. Off by default.
	// +optional
	APIKeySecretRef *corev1.SecretKeySelector `json:"apiKeySecretRef,omitempty"`
}

// MCPServerStatus is the observed state of an MCP server.
type MCPServerStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// URL clients inside the cluster use.
	// +optional
	URL string `json:"url,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MCPServer runs the MCP tool server as a Deployment and Service.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=posture
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MCPServerSpec `json:"spec,omitempty"`

	// Status reads as {observedGeneration: 0} until the controller first
	// writes it, so that kstatus (and Flux) see a new object as InProgress
	// rather than Current before anything was reconciled.
	// +kubebuilder:default={observedGeneration: 0}
	Status MCPServerStatus `json:"status,omitempty"`
}

// MCPServerList contains a list of MCPServer.
// +kubebuilder:object:root=true
type MCPServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MCPServer{}, &MCPServerList{})
}
