// Package restapi is the Go side of the Posture REST API's contract: its
// media type, paths, page limits, enums, resource shapes, JSON:API
// documents and error documents, the one rule for the API's address, and a
// client that speaks it. postctl, the MCP server and the tests use it; the
// OpenAPI test (webhook/openapi_test.go) holds it to openapi.yaml and to
// the server, so a change to either that this package does not follow
// fails there.
package restapi

import "slices"

// MediaType is JSON:API's media type: every response body of the API, and
// every JSON request body it takes.
const MediaType = "application/vnd.api+json"

// Version is the label every response body carries in meta.version.
const Version = "v1"

// Prefix is where the API lives below its base URL.
const Prefix = "/api/v1"

// DefaultBaseURL is the hosted API.
const DefaultBaseURL = "https://api.posture.dev"

// Paths of the API, relative to {base_url}/api/v1.
const (
	PathIngestions    = "/ingestions"
	PathFindings      = "/findings"
	PathFindingCounts = "/findings/counts"
	// PathLatestFindings holds only the findings of each provider's latest
	// scan; PathLatestFindings+"/counts" counts them.
	PathLatestFindings = "/findings/latest"
	PathScans          = "/scans"
	PathProviders      = "/providers"
	PathMuteRules      = "/mute-rules"
	PathTenant         = "/tenant"
	PathTokens         = "/tokens"
	PathTokensRefresh  = "/tokens/refresh"
	PathTokensRevoke   = "/tokens/revoke"
	PathSchema         = "/schema"
)

// Page limits of every list.
const (
	DefaultPageSize = 10
	MaxPageSize     = 100
	// MaxPageOffset is how many findings page[number] may skip
	// ((page[number]-1) × page[size]); deeper pages are reached by
	// page[cursor], which links.next carries. An unfiltered listing skips
	// index keys, not findings, but a filtered one reads and throws away
	// the findings it skips, so deeper pages cost more the deeper they are;
	// a cursor reaches any depth at the cost of the first page.
	MaxPageOffset = 10000
)

// ReportSuffix is the ending the API requires of an uploaded report's name.
const ReportSuffix = ".ocsf.json"

// ReportField is the multipart part that carries an uploaded report.
const ReportField = "file"

// Resource types (data.type).
const (
	TypeIngestions      = "ingestions"
	TypeIngestionErrors = "ingestion-errors"
	TypeFindings        = "findings"
	TypeFindingCounts   = "finding-counts"
	TypeScans           = "scans"
	TypeProviders       = "providers"
	TypeTokens          = "tokens"
	TypeTokensRefresh   = "tokens-refresh"
	TypeTenants         = "tenants"
)

// Ingestion statuses.
const (
	IngestionPending    = "pending"
	IngestionProcessing = "processing"
	IngestionCompleted  = "completed"
	IngestionFailed     = "failed"
)

// IngestionStatuses lists every ingestion status, in the order a job goes
// through them.
var IngestionStatuses = []string{IngestionPending, IngestionProcessing, IngestionCompleted, IngestionFailed}

// TerminalStatuses are the statuses an ingestion never leaves: a retry is a
// new ingestion.
var TerminalStatuses = []string{IngestionCompleted, IngestionFailed}

// Terminal says whether an ingestion in status has ended for good. It is the
// one rule every waiter (postctl, kubectl posture, the MCP tools, the UI
// through the server, the controllers) asks.
func Terminal(status string) bool { return slices.Contains(TerminalStatuses, status) }

// Severities lists the findings' severity labels, most severe first (then
// the labels OCSF has beyond the scale).
var Severities = []string{"critical", "high", "medium", "low", "informational", "unknown", "fatal", "other"}

// StatusCodes lists a finding's check results.
var StatusCodes = []string{"FAIL", "PASS", "MANUAL"}

// ProviderOrigins lists how a provider came to be: connected by a user, or
// imported from an uploaded report.
var ProviderOrigins = []string{"connected", "imported"}

// ScanTriggers lists what starts a scan; every scan today is imported.
var ScanTriggers = []string{"imported"}

// ReportSources lists how a scan's report came to Posture: uploaded, or
// read from a ConfigMap, a Secret or a URL an Ingestion declares.
var ReportSources = []string{"configmap", "secret", "upload", "url"}

// CountDimensions lists the group_by dimensions of the findings counts.
var CountDimensions = []string{"severity", "status_code", "provider_type", "provider_uid", "check_id", "region"}

// Error codes of the API's error objects.
const (
	CodeInvalid              = "invalid"
	CodeNotAuthenticated     = "not_authenticated"
	CodeSubscriptionRequired = "subscription_required"
	CodePermissionDenied     = "permission_denied"
	CodeNotFound             = "not_found"
	CodeFileTooLarge         = "file_too_large"
	CodeRateLimited          = "rate_limited"
	CodeNotAcceptable        = "not_acceptable"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnsupportedMedia     = "unsupported_media_type"
	CodeServerError          = "error"
	CodeUnavailable          = "unavailable"
)

// ErrorCodes lists every error code.
var ErrorCodes = []string{CodeInvalid, CodeNotAuthenticated, CodeSubscriptionRequired, CodePermissionDenied,
	CodeNotFound, CodeFileTooLarge, CodeRateLimited, CodeNotAcceptable, CodeMethodNotAllowed, CodeUnsupportedMedia,
	CodeServerError, CodeUnavailable}
