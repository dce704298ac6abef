package store

import (
	"context"
	"time"
)

// Mutes keeps the tenant's mute rules and the marks they put on findings
// (docs/decisions/0024-mute-rules.md). The MuteRule controller writes the
// rules and runs each one's pass over the stored findings; WriteBatch
// marks new findings with the active rules; the reads leave marked
// findings out of the current state when FindingQuery.Muted says so.
type Mutes interface {
	// PutMuteRule records rule. A rule not stored yet, or stored with
	// another generation, loses its marks and starts its pass over the
	// stored findings from the beginning, in the same transaction; the
	// same generation again changes nothing.
	PutMuteRule(ctx context.Context, tenant string, rule MuteRule) error
	// ApplyMuteRule takes the next step of the rule's pass: it reads at
	// most limit stored findings after the last one the pass read,
	// marks those the rule matches and unmarks those it no longer does.
	// A rule not stored is ErrNotFound.
	ApplyMuteRule(ctx context.Context, tenant, name string, limit int) (MuteProgress, error)
	// DeleteMuteRule forgets the rule and removes its marks. A rule not
	// stored is not an error.
	DeleteMuteRule(ctx context.Context, tenant, name string) error
}

// MuteRule is a mute rule as the store keeps it: the MuteRule object's
// name, generation, reason, expiry and match.
type MuteRule struct {
	Name       string
	Generation int64
	Reason     string
	// ExpiresAt, when set, ends the rule: WriteBatch no longer marks with
	// it from then on (its controller removes its marks).
	ExpiresAt *time.Time
	Match     MuteMatch
}

// MuteMatch selects findings: every field given must match. The text
// fields are globs (see internal/mute); Severity and StatusCode list the
// values accepted.
type MuteMatch struct {
	CheckID      string   `json:"checkId,omitempty"`
	Account      string   `json:"account,omitempty"`
	Region       string   `json:"region,omitempty"`
	ResourceUID  string   `json:"resourceUid,omitempty"`
	ResourceName string   `json:"resourceName,omitempty"`
	Severity     []string `json:"severity,omitempty"`
	StatusCode   []string `json:"statusCode,omitempty"`
}

// MuteProgress is where a rule's pass over the stored findings stands.
type MuteProgress struct {
	// Generation is the rule's generation the pass applies.
	Generation int64
	// Scanned is how many stored findings the pass has read so far.
	Scanned int64
	// Matched is how many findings the rule marks now.
	Matched int64
	// Done: the pass has read every stored finding.
	Done bool
}

// MuteMark is a muted finding's mark: the rule that mutes it and why.
// When several rules match, the one of the smallest name is shown.
type MuteMark struct {
	Rule   string
	Reason string
}

// Values of FindingQuery.Muted.
const (
	// MutedAny lists muted and unmuted findings alike (the zero value).
	MutedAny = ""
	// MutedOnly lists the muted findings alone.
	MutedOnly = "true"
	// MutedExcluded leaves the muted findings out.
	MutedExcluded = "false"
)
