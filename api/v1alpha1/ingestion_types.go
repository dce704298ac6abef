package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/posture-dev/posture/internal/restapi"
)

// IngestionPhase is the job status the API reports as attributes.status.
// +kubebuilder:validation:Enum=pending;processing;completed;failed
type IngestionPhase string

const (
	IngestionPending    IngestionPhase = "pending"
	IngestionProcessing IngestionPhase = "processing"
	IngestionCompleted  IngestionPhase = "completed"
	IngestionFailed     IngestionPhase = "failed"
)

// Terminal reports whether nothing will ever change the phase again
// (restapi.Terminal, the rule every client shares).
func (p IngestionPhase) Terminal() bool { return restapi.Terminal(string(p)) }

// UploadSource is a report uploaded through the API and stored as a blob.
type UploadSource struct {
	// BlobID identifies the stored upload.
	// +kubebuilder:validation:MinLength=1
	BlobID string `json:"blobID"`
	// Filename as uploaded; ends in .ocsf.json, holds no control character
	// (C0, DEL, C1), line separator or bidirectional formatting character
	// (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and is at most
	// 255 characters long: kubectl prints it and events carry it, so it must
	// not be able to repaint a terminal or show itself as another name.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1F\x7F-\x9F\x{061C}\x{200E}\x{200F}\x{2028}-\x{202E}\x{2066}-\x{2069}]*\.ocsf\.json$`
	Filename string `json:"filename"`
	// Size in bytes.
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size"`
	// SHA256 of the content, lowercase hex.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256"`
}

// ReportKeyRef names one key of a ConfigMap or Secret in the Ingestion's
// namespace that holds a report.
type ReportKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key is the data key holding the report (for a ConfigMap, data or binaryData).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// DefaultURLMaxBytes bounds a report fetched from a URL when maxBytes is not
// set. The manager never fetches more than its upload limit either way.
const DefaultURLMaxBytes int64 = 64 << 20

// MaxURLMaxBytes is the largest maxBytes accepted: the default upload limit.
const MaxURLMaxBytes int64 = 1 << 30

// URLSource is a report the manager fetches once over HTTPS.
type URLSource struct {
	// URL of the report; https only, also after redirects.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://')",message="spec.source.url.url must start with https://"
	URL string `json:"url"`
	// CABundleSecretRef names a Secret key holding PEM certificates that
	// replace the system roots when verifying the server.
	// +optional
	CABundleSecretRef *ReportKeyRef `json:"caBundleSecretRef,omitempty"`
	// MaxBytes refuses a larger report. Default 64 MiB; at most 1 GiB, and
	// never more than the manager's --max-upload-bytes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	MaxBytes *int64 `json:"maxBytes,omitempty"`
}

// IngestionSource says where the report comes from. Exactly one member is set.
// +kubebuilder:validation:XValidation:rule="[has(self.upload), has(self.configMapRef), has(self.secretRef), has(self.url)].filter(x, x).size() == 1",message="spec.source must set exactly one of upload, configMapRef, secretRef or url"
type IngestionSource struct {
	// Upload is a report sent to POST /api/v1/ingestions.
	// +optional
	Upload *UploadSource `json:"upload,omitempty"`
	// ConfigMapRef is a report held in a ConfigMap (up to about 1 MiB).
	// +optional
	ConfigMapRef *ReportKeyRef `json:"configMapRef,omitempty"`
	// SecretRef is a report held in a Secret (up to about 1 MiB).
	// +optional
	SecretRef *ReportKeyRef `json:"secretRef,omitempty"`
	// URL is a report fetched once over HTTPS.
	// +optional
	URL *URLSource `json:"url,omitempty"`
}

// FetchedReport is what the manager stored for a configMapRef, secretRef or
// url source: the same kind of blob an upload is.
type FetchedReport struct {
	// BlobID identifies the stored copy, which is deleted once the
	// ingestion has ended, as an upload is (--report-retention).
	// +optional
	BlobID string `json:"blobID,omitempty"`
	// Size in bytes.
	Size int64 `json:"size"`
	// SHA256 of the content, lowercase hex. A later fetch of the same
	// source must match it, or the ingestion fails.
	SHA256 string `json:"sha256"`
	// RecordCount is the number of records counted while storing it.
	RecordCount int64 `json:"recordCount"`
	// +optional
	FetchedAt *metav1.Time `json:"fetchedAt,omitempty"`
}

// Requester records who submitted the report, without any key material.
type Requester struct {
	// +optional
	User string `json:"user,omitempty"`
	// APIKeyPrefix is the public prefix of the key used, never the key.
	// +optional
	APIKeyPrefix string `json:"apiKeyPrefix,omitempty"`
}

// IngestionSpec is immutable: a retry, or a changed report, is a new Ingestion.
type IngestionSpec struct {
	Source IngestionSource `json:"source"`
	// RecordCount is the number of records counted in the file at upload;
	// other sources leave it out (status.report.recordCount has theirs).
	// +kubebuilder:validation:Minimum=0
	// +optional
	RecordCount int64 `json:"recordCount,omitempty"`
	// +optional
	RequestedBy Requester `json:"requestedBy,omitempty"`
}

// IngestionSummary counts records; processed includes invalid ones.
type IngestionSummary struct {
	Total     int64 `json:"total"`
	Processed int64 `json:"processed"`
	Invalid   int64 `json:"invalid"`
}

// IngestionStatus is written only by the ingestion controller.
type IngestionStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the job status: pending, processing, completed or failed.
	// +optional
	Phase IngestionPhase `json:"phase,omitempty"`
	// +optional
	Summary IngestionSummary `json:"summary"`
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Attempt counts executor starts; the worker writes progress under it.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// JobName is the batch/v1 Job running the parse (job executor only).
	// +optional
	JobName string `json:"jobName,omitempty"`
	// Message explains the current phase, notably why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Report is the stored copy of a configMapRef, secretRef or url source.
	// +optional
	Report *FetchedReport `json:"report,omitempty"`
	// Providers resolved for this run, as type/uid.
	// +listType=set
	// +optional
	Providers []string `json:"providers,omitempty"`
	// DeniedProviders are the accounts, as type/uid, that billing refused
	// because the plan was full: their records are invalid. It is the
	// decision every attempt of this ingestion repeats, so it is kept here
	// rather than re-derived.
	// +listType=set
	// +optional
	DeniedProviders []string `json:"deniedProviders,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Ingestion is one uploaded OCSF report and the job that turns it into findings.
// Its name is the job id the API returns.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=posture
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.summary.total`
// +kubebuilder:printcolumn:name="Processed",type=integer,JSONPath=`.status.summary.processed`
// +kubebuilder:printcolumn:name="Invalid",type=integer,JSONPath=`.status.summary.invalid`
// +kubebuilder:printcolumn:name="File",type=string,JSONPath=`.spec.source.upload.filename`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type Ingestion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; submit a new Ingestion to retry"
	Spec IngestionSpec `json:"spec"`

	// Status reads as {observedGeneration: 0} until the controller first
	// writes it, so that kstatus (and Flux) see a new object as InProgress
	// rather than Current before anything was reconciled.
	// +kubebuilder:default={observedGeneration: 0}
	Status IngestionStatus `json:"status,omitempty"`
}

// IngestionList contains a list of Ingestion.
// +kubebuilder:object:root=true
type IngestionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Ingestion `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Ingestion{}, &IngestionList{})
}
