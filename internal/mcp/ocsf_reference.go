package mcp

import "strings"

// ocsfField describes one field of an OCSF Detection Finding record as the
// spec lists it, and what Posture's validator (internal/ocsf)
// demands of it. The rules here must follow internal/ocsf/validate.go.
type ocsfField struct {
	Field string `json:"field"`
	Type  string `json:"type"`
	Notes string `json:"notes,omitempty"`
	// Required: a record without it is invalid (counted in summary.invalid).
	Required bool `json:"required"`
	// Rule is what the validator checks, with the error code it records.
	Rule string `json:"rule,omitempty"`
	// IndexedAs names the finding attribute it fills, if any.
	IndexedAs string `json:"indexed_as,omitempty"`
}

var ocsfFields = []ocsfField{
	{Field: "class_uid", Type: "integer", Notes: "Must be 2004 (Detection Finding)", Required: true,
		Rule: "must be 2004; another class is rejected with unsupported_class, a missing one with missing_field"},
	{Field: "class_name", Type: "string", Notes: "Detection Finding"},
	{Field: "category_uid", Type: "integer", Required: true, Rule: "integer (missing_field, invalid_type)"},
	{Field: "category_name", Type: "string", Notes: "Constant for this class: Findings"},
	{Field: "type_uid", Type: "integer", Required: true, Rule: "integer (missing_field, invalid_type)"},
	{Field: "type_name", Type: "string"},
	{Field: "activity_id", Type: "integer", Required: true, Rule: "integer (missing_field, invalid_type)"},
	{Field: "activity_name", Type: "string"},
	{Field: "time", Type: "integer, epoch seconds", Required: true,
		Rule: "integer, epoch seconds or milliseconds (values above 1e11 are taken as milliseconds); not negative, not after 9999 (invalid_value)", IndexedAs: "time"},
	{Field: "time_dt", Type: "string, ISO 8601"},
	{Field: "message", Type: "string", Notes: "Result text"},
	{Field: "severity_id", Type: "integer", Notes: "OCSF severity number", Required: true,
		Rule: "0 unknown, 1 informational, 2 low, 3 medium, 4 high, 5 critical, 6 fatal, 99 other (invalid_value otherwise)", IndexedAs: "severity_id (the number of severity's caption when severity is one of OCSF's captions, which decides)"},
	{Field: "severity", Type: "string", Notes: "Severity label",
		IndexedAs: "severity (lower-cased when one of OCSF's captions, any case; else the caption of severity_id)"},
	{Field: "status", Type: "string", Notes: "Finding status label", IndexedAs: "status"},
	{Field: "status_id", Type: "integer"},
	{Field: "status_code", Type: "string", Notes: "Check result, for example PASS or FAIL", IndexedAs: "status_code"},
	{Field: "status_detail", Type: "string"},
	{Field: "metadata.event_code", Type: "string", Notes: "Check identifier", IndexedAs: "check_id"},
	{Field: "metadata.product.name", Type: "string", Notes: "Producer description", Required: true,
		Rule: "metadata.product must be an object with a non-empty name or uid (missing_field)"},
	{Field: "metadata.product.uid", Type: "string", Notes: "Producer description; name or uid is required"},
	{Field: "metadata.product.vendor_name", Type: "string"},
	{Field: "metadata.product.version", Type: "string", Notes: "The scanner's own release"},
	{Field: "metadata.profiles", Type: "array of string"},
	{Field: "metadata.tenant_uid", Type: "string", Notes: "May be empty"},
	{Field: "metadata.version", Type: "string", Notes: "OCSF schema version (1.1 to 1.5 accepted)", Required: true, Rule: "non-empty string (missing_field, invalid_type, invalid_value)"},
	{Field: "finding_info.uid", Type: "string", Notes: "Unique finding identifier", Required: true,
		Rule: "non-empty string of at most 1024 bytes, without NUL (invalid_value); unique within the file (duplicate_uid)", IndexedAs: "uid"},
	{Field: "finding_info.title", Type: "string", IndexedAs: "title"},
	{Field: "finding_info.desc", Type: "string, Markdown"},
	{Field: "finding_info.types", Type: "array of string"},
	{Field: "finding_info.created_time", Type: "integer, epoch seconds"},
	{Field: "finding_info.created_time_dt", Type: "string, ISO 8601"},
	{Field: "cloud.provider", Type: "string", Notes: "aws, azure, gcp, kubernetes, m365, github, …", Required: true,
		Rule: "cloud.provider and cloud.account.uid, or else unmapped.provider and unmapped.provider_uid, as non-empty strings (missing_account): each distinct account is one billed provider", IndexedAs: "provider_type"},
	{Field: "cloud.account.uid", Type: "string", Notes: "Account id; one billed provider per unique account", Required: true,
		Rule: "see cloud.provider (missing_account); an account beyond the plan's provider limit makes its records invalid (provider_limit_exceeded)", IndexedAs: "provider_uid"},
	{Field: "cloud.account.name", Type: "string"},
	{Field: "cloud.account.type", Type: "string"},
	{Field: "cloud.account.type_id", Type: "integer"},
	{Field: "cloud.account.labels", Type: "array"},
	{Field: "cloud.org.name", Type: "string"},
	{Field: "cloud.org.uid", Type: "string"},
	{Field: "cloud.region", Type: "string", IndexedAs: "region (else the first resources[].region)"},
	{Field: "resources", Type: "array of object", Notes: "Each: cloud_partition, region, data (details string, metadata object), group.name, labels (array), name, type, uid", IndexedAs: "resource_uid (the first resources[].uid)"},
	{Field: "remediation.desc", Type: "string"},
	{Field: "remediation.references", Type: "array of string (URLs)"},
	{Field: "risk_details", Type: "string"},
	{Field: "unmapped.provider", Type: "string", Notes: "Fallback provider type (Kubernetes findings carry only this)"},
	{Field: "unmapped.provider_uid", Type: "string", Notes: "Fallback account id"},
	{Field: "unmapped.scan_id", Type: "string (UUID)", Notes: "Scan that produced the record",
		Rule: "a scan covers one account: a record naming the scan of another account is invalid (scan_account_conflict)", IndexedAs: "scan"},
	{Field: "unmapped.related_url", Type: "string"},
	{Field: "unmapped.categories", Type: "array of string"},
	{Field: "unmapped.depends_on", Type: "array of string"},
	{Field: "unmapped.related_to", Type: "array of string"},
	{Field: "unmapped.additional_urls", Type: "array of string"},
	{Field: "unmapped.notes", Type: "string"},
}

// ocsfRules are the whole-file and whole-record rules that belong to no field.
var ocsfRules = []string{
	"A report is a file whose name ends in .ocsf.json and whose content is a JSON array of OCSF Detection Finding records; anything else (not JSON, not an array, truncated, empty file) is refused at upload with HTTP 400 and nothing is stored.",
	"Only class_uid 2004 (Detection Finding) is accepted; records of other OCSF classes are counted invalid with unsupported_class.",
	"Each record is a JSON object (else invalid_record). Unknown extra fields are kept and never an error.",
	"A record is valid when it has every required field; an invalid record is counted in summary.invalid and explained by GET /api/v1/ingestions/{id}/errors (code, detail, JSON pointer, offending value).",
	"A file whose records are all invalid, or an empty array, makes the ingestion fail ('no Detection Finding records').",
	"Findings are unique per (tenant, scan, finding_info.uid): re-uploading a file updates rows instead of duplicating them.",
}

type ocsfReference struct {
	Class  string      `json:"class"`
	Rules  []string    `json:"rules"`
	Fields []ocsfField `json:"fields"`
	Match  string      `json:"match,omitempty"`
}

// lookupOCSF returns the reference, restricted to fields whose name contains
// filter (case-insensitive) when one is given.
func lookupOCSF(filter string) ocsfReference {
	ref := ocsfReference{Class: "OCSF Detection Finding (class_uid 2004, category Findings)", Rules: ocsfRules}
	filter = strings.ToLower(strings.TrimSpace(filter))
	if filter == "" {
		ref.Fields = ocsfFields
		return ref
	}
	ref.Match = filter
	for _, f := range ocsfFields {
		if strings.Contains(strings.ToLower(f.Field), filter) {
			ref.Fields = append(ref.Fields, f)
		}
	}
	return ref
}
