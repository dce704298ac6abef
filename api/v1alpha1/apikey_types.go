package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIKeySpec asks for a key acting as one tenant user.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.revoked) || !oldSelf.revoked || (has(self.revoked) && self.revoked)",message="spec.revoked cannot go back to false: revocation is permanent; create a new APIKey for a new key"
type APIKeySpec struct {
	// User is the email of a user of the tenant; the key carries that user's current permissions.
	// +kubebuilder:validation:MinLength=3
	User string `json:"user"`
	// ExpiresAt defaults to 365 days after creation.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Revoked makes the key fail with 401 at once, for good: it cannot be set
	// back to false, and status.revokedAt keeps the key refused regardless.
	// +kubebuilder:default=false
	// +optional
	Revoked bool `json:"revoked,omitempty"`
	// SecretName receives the key (data key api-key); default <name>-api-key.
	// A Secret of that name that already exists and holds api-key is
	// adopted: its key is used, checked for the operator's format, and the
	// Secret is never rewritten, owned or deleted by the operator. A later
	// change of that key replaces the old one, which stops working.
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// APIKeyStatus never holds key material: only its public prefix and a hash.
type APIKeyStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Prefix is the public part of the key (pk_xxxxxxxx).
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Hash is the SHA-256 of the key, hex.
	// +optional
	Hash string `json:"hash,omitempty"`
	// ExpiresAt is the expiry in force: spec.expiresAt or the 365-day
	// default. A later spec.expiresAt is recorded here only while the key has
	// not expired.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// RevokedAt is when the controller first saw spec.revoked. Once set, the
	// key is refused for good.
	// +optional
	RevokedAt *metav1.Time `json:"revokedAt,omitempty"`
	// ExpiredAt is the expiry the key reached. Once set, the key is refused
	// for good, whatever spec.expiresAt says later.
	// +optional
	ExpiredAt *metav1.Time `json:"expiredAt,omitempty"`
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// KeyOrigin is Generated (the operator wrote the Secret and owns it) or
	// Adopted (the Secret existed, e.g. from Sealed Secrets, External
	// Secrets or SOPS; the operator only reads it).
	// +kubebuilder:validation:Enum=Generated;Adopted
	// +optional
	KeyOrigin string `json:"keyOrigin,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// APIKey is a credential for the API and the MCP server.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=posture
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.status.prefix`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`
// +kubebuilder:printcolumn:name="Revoked",type=boolean,JSONPath=`.spec.revoked`
// A future date renders as "<invalid>" in a type=date column, so Expires is a string.
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Usable",type=string,JSONPath=`.status.conditions[?(@.type=="Usable")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type APIKey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec APIKeySpec `json:"spec"`

	// Status reads as {observedGeneration: 0} until the controller first
	// writes it, so that kstatus (and Flux) see a new object as InProgress
	// rather than Current before anything was reconciled.
	// +kubebuilder:default={observedGeneration: 0}
	Status APIKeyStatus `json:"status,omitempty"`
}

// APIKeyList contains a list of APIKey.
// +kubebuilder:object:root=true
type APIKeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIKey `json:"items"`
}

func init() {
	SchemeBuilder.Register(&APIKey{}, &APIKeyList{})
}
