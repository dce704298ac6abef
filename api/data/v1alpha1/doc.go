// Package v1alpha1 holds the types of the data.posture.dev aggregated API:
// findings, scans and ingestion errors read from the store, and the uploads
// resource that accepts reports. They are served by the manager's
// aggregated API server, never stored in etcd, so no CRD is generated.
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=data.posture.dev
package v1alpha1
