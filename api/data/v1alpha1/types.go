package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Finding is one stored OCSF Detection Finding of the namespace's tenant.
// Its name is the finding's stable id; creationTimestamp is when it was
// first stored.
// +kubebuilder:object:root=true
type Finding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// UID is finding_info.uid.
	UID        string `json:"uid"`
	CheckID    string `json:"checkID"`
	Title      string `json:"title,omitempty"`
	Severity   string `json:"severity"`
	SeverityID int    `json:"severityID"`
	StatusCode string `json:"statusCode"`
	Status     string `json:"status,omitempty"`
	Region     string `json:"region,omitempty"`
	// ProviderType and ProviderUID name the cloud account the finding is about.
	ProviderType string `json:"providerType,omitempty"`
	ProviderUID  string `json:"providerUID,omitempty"`
	ResourceUID  string `json:"resourceUID,omitempty"`
	// Scan and Ingestion are the scan the finding belongs to and the last
	// ingestion that wrote it.
	Scan      string      `json:"scan"`
	Ingestion string      `json:"ingestion"`
	Time      metav1.Time `json:"time"`
	UpdatedAt metav1.Time `json:"updatedAt"`
	// FirstSeenAt and Delta describe a finding of the current state (the
	// list with the field selector latest=true): when its account first
	// reported the check's finding, and whether this run brought it in
	// ("new") or changed its status ("changed"). History leaves them out.
	FirstSeenAt *metav1.Time `json:"firstSeenAt,omitempty"`
	Delta       string       `json:"delta,omitempty"`
	// Muted says a MuteRule of the tenant matches the finding; MuteRule and
	// MuteReason name the rule (the first by name when several match) and
	// its reason. The current state (latest=true) leaves muted findings
	// out unless the field selector muted=true or muted=any asks for them.
	Muted      bool   `json:"muted,omitempty"`
	MuteRule   string `json:"muteRule,omitempty"`
	MuteReason string `json:"muteReason,omitempty"`
	// Record is the full OCSF record as uploaded; only a get returns it.
	Record *runtime.RawExtension `json:"record,omitempty"`
}

// FindingList is a page of findings.
// +kubebuilder:object:root=true
type FindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Finding `json:"items"`
}

// Scan groups the findings of one scanner run. Its creationTimestamp is
// when it was first stored (the REST API's inserted_at). It says what the
// REST API's scans say, under the same sources.
// +kubebuilder:object:root=true
type Scan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	ProviderType string `json:"providerType,omitempty"`
	ProviderUID  string `json:"providerUID,omitempty"`
	Trigger      string `json:"trigger,omitempty"`
	// Ingestion is the last ingestion that wrote to the scan.
	Ingestion    string      `json:"ingestion"`
	FindingCount int         `json:"findingCount"`
	UpdatedAt    metav1.Time `json:"updatedAt"`
	// ScannedAt is when the scanner ran, as the scan's findings record it
	// (the earliest event time among them); absent before it has one.
	ScannedAt *metav1.Time `json:"scannedAt,omitempty"`
	// FailCount counts the scan's FAIL findings, FailCounts them by
	// severity (lower-case); a severity without one is left out.
	FailCount  int64            `json:"failCount"`
	FailCounts map[string]int64 `json:"failCounts"`
	// FileName, UploadedBy and Source describe the report of the
	// Ingestion that last wrote the scan: its file name (uploads only),
	// the user who submitted it, and how it came (upload, configmap,
	// secret, url). Absent once that Ingestion is deleted.
	FileName   *string `json:"fileName,omitempty"`
	UploadedBy *string `json:"uploadedBy,omitempty"`
	Source     *string `json:"source,omitempty"`
}

// ScanList is a page of scans.
// +kubebuilder:object:root=true
type ScanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Scan `json:"items"`
}

// IngestionError explains why one record of an ingestion (RecordIndex set)
// or the whole ingestion was rejected. Its name is <ingestion>.<row id>.
// +kubebuilder:object:root=true
type IngestionError struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Ingestion   string `json:"ingestion"`
	RecordIndex *int   `json:"recordIndex,omitempty"`
	FindingUID  string `json:"findingUID,omitempty"`
	Code        string `json:"code"`
	Detail      string `json:"detail"`
	Pointer     string `json:"pointer,omitempty"`
	Value       string `json:"value,omitempty"`
}

// IngestionErrorList is a page of ingestion errors.
// +kubebuilder:object:root=true
type IngestionErrorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IngestionError `json:"items"`
}

// Upload names the uploads resource. Its body is a raw .ocsf.json report,
// never this object; the answer is the posture.dev Ingestion it created.
// +kubebuilder:object:root=true
type Upload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}
