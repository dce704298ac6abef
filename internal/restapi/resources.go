package restapi

import "encoding/json"

// Attributes of each resource type. A sparse fieldset (fields[type])
// leaves out the attributes not asked for; they decode as zero values.

// Ingestion is an ingestion job ("ingestions").
type Ingestion struct {
	Status      string           `json:"status"`
	Summary     IngestionSummary `json:"summary"`
	RequestedAt *string          `json:"requested_at"`
	StartedAt   *string          `json:"started_at"`
	CompletedAt *string          `json:"completed_at"`
}

// Done tells whether the job has ended, for good or not.
func (i Ingestion) Done() bool { return Terminal(i.Status) }

// IngestionSummary counts a job's records.
type IngestionSummary struct {
	Total     int64 `json:"total"`
	Processed int64 `json:"processed"`
	Invalid   int64 `json:"invalid"`
}

// IngestionError is why a record, or a whole job, was rejected
// ("ingestion-errors"). RecordIndex is nil for an ingestion-level error.
type IngestionError struct {
	RecordIndex *int64 `json:"record_index"`
	FindingUID  string `json:"finding_uid"`
	Code        string `json:"code"`
	Detail      string `json:"detail"`
	Pointer     string `json:"pointer"`
	Value       string `json:"value"`
}

// Finding is one finding ("findings"). Record, the full OCSF record, is
// only sent on lists when fields[findings] names it.
type Finding struct {
	UID          string `json:"uid"`
	CheckID      string `json:"check_id"`
	Title        string `json:"title"`
	Severity     string `json:"severity"`
	SeverityID   int    `json:"severity_id"`
	StatusCode   string `json:"status_code"`
	Status       string `json:"status"`
	Region       string `json:"region"`
	ProviderType string `json:"provider_type"`
	ProviderUID  string `json:"provider_uid"`
	ResourceUID  string `json:"resource_uid"`
	ScanID       string `json:"scan_id"`
	IngestionID  string `json:"ingestion_id"`
	Time         string `json:"time"`
	InsertedAt   string `json:"inserted_at"`
	UpdatedAt    string `json:"updated_at"`
	// FirstSeenAt and Delta come with the current state only
	// (/findings/latest); Delta only when one holds.
	FirstSeenAt string `json:"first_seen_at,omitempty"`
	Delta       string `json:"delta,omitempty"`
	// Muted says whether a mute rule matches the finding; Mute is that
	// rule and its reason.
	Muted  bool            `json:"muted"`
	Mute   *FindingMute    `json:"mute"`
	Record json.RawMessage `json:"record,omitempty"`

	// What a finding's page shows, read from its record. The Markdown
	// texts come as written and as sanitized HTML (*HTML), safe to insert
	// into a page: no script, no event handler, links only to http and
	// https.
	Description     string              `json:"description,omitempty"`
	DescriptionHTML string              `json:"description_html,omitempty"`
	Risk            string              `json:"risk,omitempty"`
	RiskHTML        string              `json:"risk_html,omitempty"`
	Remediation     *FindingRemediation `json:"remediation,omitempty"`
	RelatedURLs     []Link              `json:"related_urls,omitempty"`
	Resource        *FindingResource    `json:"resource,omitempty"`
	Account         *FindingAccount     `json:"account,omitempty"`
}

// FindingRemediation is how to fix a finding: remediation.desc (Markdown)
// and remediation.references.
type FindingRemediation struct {
	Description     string `json:"description"`
	DescriptionHTML string `json:"description_html"`
	References      []Link `json:"references"`
}

// Link is a reference a report names. Href is set only when Text is an
// absolute http or https URL, the only links a page opens; a reference
// may as well be a command to run, which is text.
type Link struct {
	Text string `json:"text"`
	Href string `json:"href,omitempty"`
}

// FindingResource is the finding's resource, the record's first.
type FindingResource struct {
	UID       string   `json:"uid"`
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	Region    string   `json:"region"`
	Partition string   `json:"partition"`
	Labels    []string `json:"labels"`
}

// FindingAccount is the account the finding belongs to: the provider
// type and account uid it is stored under, and cloud.account.name.
type FindingAccount struct {
	Provider string `json:"provider"`
	UID      string `json:"uid"`
	Name     string `json:"name"`
}

// FindingMute is a muted finding's mark: the MuteRule and its reason.
type FindingMute struct {
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// MuteRule is a mute rule ("mute-rules"): a MuteRule object of the tenant.
type MuteRule struct {
	Name            string         `json:"name"`
	Match           map[string]any `json:"match"`
	Reason          string         `json:"reason"`
	ExpiresAt       *string        `json:"expires_at"`
	MatchedFindings int64          `json:"matched_findings"`
	Ready           bool           `json:"ready"`
	Message         string         `json:"message"`
	CreatedAt       string         `json:"created_at"`
}

// FindingCount is one group of the findings counts ("finding-counts"):
// its count and its value of each group_by dimension.
type FindingCount struct {
	Count        int    `json:"count"`
	Severity     string `json:"severity,omitempty"`
	StatusCode   string `json:"status_code,omitempty"`
	ProviderType string `json:"provider_type,omitempty"`
	ProviderUID  string `json:"provider_uid,omitempty"`
	CheckID      string `json:"check_id,omitempty"`
	Region       string `json:"region,omitempty"`
}

// Value is the group's value of a dimension of CountDimensions.
func (c FindingCount) Value(dimension string) string {
	switch dimension {
	case "severity":
		return c.Severity
	case "status_code":
		return c.StatusCode
	case "provider_type":
		return c.ProviderType
	case "provider_uid":
		return c.ProviderUID
	case "check_id":
		return c.CheckID
	case "region":
		return c.Region
	}
	return ""
}

// Scan is one scan ("scans").
type Scan struct {
	Trigger      string `json:"trigger"`
	ProviderType string `json:"provider_type"`
	ProviderUID  string `json:"provider_uid"`
	IngestionID  string `json:"ingestion_id"`
	FindingCount int64  `json:"finding_count"`
	InsertedAt   string `json:"inserted_at"`
	UpdatedAt    string `json:"updated_at"`
	// ScannedAt is when the scanner ran, as the scan's findings record it.
	ScannedAt *string `json:"scanned_at"`
	// FailCount counts the scan's FAIL findings, FailCounts them by severity.
	FailCount  int64            `json:"fail_count"`
	FailCounts map[string]int64 `json:"fail_counts"`
	// FileName, UploadedBy and Source describe the report of the ingestion
	// that last wrote the scan; nil when it is no longer there.
	FileName   *string `json:"file_name"`
	UploadedBy *string `json:"uploaded_by"`
	Source     *string `json:"source"`
}

// Provider is one cloud account, cluster or tenant of a scanner
// ("providers").
type Provider struct {
	Type       string `json:"type"`
	UID        string `json:"uid"`
	Alias      string `json:"alias"`
	Origin     string `json:"origin"`
	InsertedAt string `json:"inserted_at"`
}

// Token is a token pair ("tokens"), answered by POST /tokens and
// POST /tokens/refresh.
type Token struct {
	Access           string `json:"access"`
	Refresh          string `json:"refresh"`
	AccessExpiresAt  string `json:"access_expires_at"`
	RefreshExpiresAt string `json:"refresh_expires_at"`
}

// TokenRequest signs a user in (POST /tokens, type "tokens"). Tenant is
// needed only when the email belongs to users of several tenants.
type TokenRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Tenant   string `json:"tenant,omitempty"`
}

// TokenRefreshRequest trades a refresh token (POST /tokens/refresh, type
// "tokens-refresh").
type TokenRefreshRequest struct {
	Refresh string `json:"refresh"`
}

// Tenant is the caller's tenant ("tenants", GET /tenant): who the
// credential is, and what the subscription allows.
type Tenant struct {
	Name         string             `json:"name"`
	Namespace    string             `json:"namespace"`
	Subscription TenantSubscription `json:"subscription"`
	Providers    TenantProviders    `json:"providers"`
	User         TenantUser         `json:"user"`
}

// TenantSubscription is a tenant's subscription; ProviderLimit 0 means
// unlimited.
type TenantSubscription struct {
	Active        bool   `json:"active"`
	Plan          string `json:"plan"`
	ProviderLimit int    `json:"provider_limit"`
}

// TenantProviders is the tenant's provider usage; Remaining is nil when
// unlimited.
type TenantProviders struct {
	Count     int  `json:"count"`
	Limit     int  `json:"limit"`
	Remaining *int `json:"remaining"`
}

// TenantUser is the user behind the credential.
type TenantUser struct {
	Email       string   `json:"email"`
	Permissions []string `json:"permissions"`
}

// RequestDocument is a JSON:API request body of one resource.
type RequestDocument[A any] struct {
	Data RequestData[A] `json:"data"`
}

// RequestData is a request body's resource: a type and attributes.
type RequestData[A any] struct {
	Type       string `json:"type"`
	Attributes A      `json:"attributes"`
}

// NewRequest is the body that sends attributes as a resource of type typ.
func NewRequest[A any](typ string, attributes A) RequestDocument[A] {
	return RequestDocument[A]{Data: RequestData[A]{Type: typ, Attributes: attributes}}
}
