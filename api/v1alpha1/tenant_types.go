package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Permission names of the platform's RBAC.
// +kubebuilder:validation:Enum=manage_ingestions;manage_providers;manage_scans;manage_users;manage_account;manage_billing;unlimited_visibility;mute_findings
type Permission string

const (
	PermissionManageIngestions    Permission = "manage_ingestions"
	PermissionManageProviders     Permission = "manage_providers"
	PermissionManageScans         Permission = "manage_scans"
	PermissionManageUsers         Permission = "manage_users"
	PermissionManageAccount       Permission = "manage_account"
	PermissionManageBilling       Permission = "manage_billing"
	PermissionUnlimitedVisibility Permission = "unlimited_visibility"
	// PermissionMuteFindings lets a user create MuteRules through the API
	// and the UI (Kubernetes RBAC on muterules decides it for kubectl and GitOps).
	PermissionMuteFindings Permission = "mute_findings"
)

// Subscription is the tenant's paid plan. Ingestion needs an active one.
type Subscription struct {
	// Active is false for tenants without a subscription; they get HTTP 402 on ingestion.
	// +kubebuilder:default=false
	// +optional
	Active bool `json:"active,omitempty"`
	// Plan is a free-form plan label.
	// +optional
	Plan string `json:"plan,omitempty"`
	// ProviderLimit is how many providers the plan bills for; 0 means unlimited.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ProviderLimit int32 `json:"providerLimit,omitempty"`
}

// Role is a named set of permissions.
type Role struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +listType=set
	// +optional
	Permissions []Permission `json:"permissions,omitempty"`
}

// SecretKeyRef names a key of a Secret in the tenant namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:default=password
	// +optional
	Key string `json:"key,omitempty"`
}

// User is a person of the tenant.
type User struct {
	// +kubebuilder:validation:MinLength=3
	Email string `json:"email"`
	// Role names one of spec.roles.
	Role string `json:"role"`
	// PasswordSecretRef is a Secret in the tenant namespace holding the password.
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
}

// TenantSpec defines a tenant: its namespace, subscription, roles and users.
type TenantSpec struct {
	// Namespace holds the tenant's objects; default tenant-<name>. Created if absent.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// (Defaulted to {} so that active defaults to false and kubectl shows
	// Subscribed false rather than <none>.)

	// Subscription is the tenant's plan; absent means no subscription.
	// +kubebuilder:default={}
	// +optional
	Subscription Subscription `json:"subscription,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +optional
	Roles []Role `json:"roles,omitempty"`
	// +listType=map
	// +listMapKey=email
	// +optional
	Users []User `json:"users,omitempty"`
	// IngestionHistory bounds how many ended (completed or failed) Ingestions
	// the tenant keeps; older ones are deleted, with their reports, runs and
	// error rows. Their findings stay. Absent: the last 100, for 720h.
	// +optional
	IngestionHistory *IngestionHistory `json:"ingestionHistory,omitempty"`
}

// IngestionHistory is a history limit for ended uploaded Ingestions, like a
// CronJob's history limits. An ended upload is deleted when it is older than
// maxAge or not among the newest maxCount, whichever comes first. Ingestions
// declared from a ConfigMap, Secret or URL are not counted or deleted: their
// manifests bound them, and a GitOps tool would apply a deleted one again.
type IngestionHistory struct {
	// MaxCount is how many ended Ingestions are kept, newest first; 0 keeps
	// none. Absent: 100.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxCount *int32 `json:"maxCount,omitempty"`
	// MaxAge is how long an ended Ingestion is kept after it ended; "0s"
	// keeps them regardless of age. Absent: 720h (30 days). A Go duration
	// (h, m, s, ms, us, ns; "30d" is not one): the API server refuses what
	// the manager could not decode.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^0$|^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// Defaults of spec.ingestionHistory.
const (
	DefaultIngestionHistoryCount = 100
	DefaultIngestionHistoryAge   = 720 * time.Hour
)

// Limits returns the history limit with defaults applied; maxAge 0 means
// no age limit.
func (h *IngestionHistory) Limits() (maxCount int, maxAge time.Duration) {
	maxCount, maxAge = DefaultIngestionHistoryCount, DefaultIngestionHistoryAge
	if h == nil {
		return
	}
	if h.MaxCount != nil {
		maxCount = int(*h.MaxCount)
	}
	if h.MaxAge != nil {
		maxAge = h.MaxAge.Duration
	}
	return
}

// AdmittedProvider is one Provider the tenant's plan bills for.
type AdmittedProvider struct {
	// Name of the Provider in the tenant namespace.
	Name string `json:"name"`
	// Account is "type/uid" of the Provider.
	Account string `json:"account"`
	// UID of the Provider once it has been seen; empty while its creation
	// is pending. A Provider of that name with another UID is a new one.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// AdmittedAt is when it was admitted; an admission whose Provider does
	// not exist a while later (its creation failed) is dropped.
	AdmittedAt metav1.Time `json:"admittedAt"`
}

// TenantStatus is the observed state of a tenant.
type TenantStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Namespace actually used by the tenant.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Providers is the number of billed providers: len(admittedProviders).
	// +optional
	Providers int32 `json:"providers"`
	// AdmittedProviders are the Providers the plan bills for, within
	// spec.subscription.providerLimit. Every writer of Providers (ingestions,
	// people, GitOps, any manager replica) admits through an update of this
	// list guarded by the Tenant's resourceVersion, so the API server
	// serialises admissions and the limit holds. A Provider not listed is
	// not billed.
	// +listType=map
	// +listMapKey=name
	// +optional
	AdmittedProviders []AdmittedProvider `json:"admittedProviders,omitempty"`
	// ProviderLimit mirrors spec.subscription.providerLimit; 0 means unlimited.
	// +optional
	ProviderLimit int32 `json:"providerLimit"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Tenant is an isolated customer of the platform.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=posture
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.status.namespace`
// +kubebuilder:printcolumn:name="Subscribed",type=boolean,JSONPath=`.spec.subscription.active`
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.spec.subscription.plan`
// +kubebuilder:printcolumn:name="Providers",type=integer,JSONPath=`.status.providers`
// +kubebuilder:printcolumn:name="Limit",type=integer,JSONPath=`.status.providerLimit`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.__namespace__) && size(self.spec.__namespace__) > 0) || (size(self.metadata.name) <= 56 && !self.metadata.name.contains('.'))",message="tenant-<name> is not a namespace name (at most 63 characters, no dots): set spec.namespace"
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TenantSpec `json:"spec,omitempty"`

	// Status reads as {observedGeneration: 0} until the controller first
	// writes it, so that kstatus (and Flux) see a new object as InProgress
	// rather than Current before anything was reconciled.
	// +kubebuilder:default={observedGeneration: 0}
	Status TenantStatus `json:"status,omitempty"`
}

// NamespaceName is the namespace the tenant's objects live in.
func (t *Tenant) NamespaceName() string {
	if t.Spec.Namespace != "" {
		return t.Spec.Namespace
	}
	return "tenant-" + t.Name
}

// TenantList contains a list of Tenant.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Tenant{}, &TenantList{})
}
