// Package store is the SQL persistence of Posture: uploaded report blobs, the
// progress and outcome of ingestion runs, per-record ingestion errors, findings
// and scans. Two engines implement Store (SQLite, embedded default; PostgreSQL,
// for clusters) and pass one conformance suite (storetest).
//
// Kubernetes objects (tenants, ingestions, providers) are not stored here: the
// controllers own those. Every method is scoped by tenant so that one tenant can
// never read another's rows.
package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned when a row does not exist (or belongs to another tenant).
var ErrNotFound = errors.New("not found")

// ErrStaleAttempt is returned when a worker writes for an attempt that has been
// superseded by a newer StartRun: the old worker must stop without writing.
var ErrStaleAttempt = errors.New("stale run attempt")

// ErrScanAccount is returned by WriteBatch when a scan it writes is
// stored for another account: another ingestion named the same new scan id
// for its own account first. Nothing of the batch is written.
var ErrScanAccount = errors.New("the scan is stored for another account")

// ErrInvalidArgument wraps errors caused by the caller's input rather than the
// database (unknown sort key or count column, a finding without uid, ...), so
// the API can answer 400 instead of 500.
var ErrInvalidArgument = errors.New("invalid argument")

// Store is implemented by the SQLite and PostgreSQL engines: every role
// below, and Close. Only what opens the store holds all of it; each
// consumer takes the roles it uses, so what it may do to the data is
// written in its type.
type Store interface {
	Blobs
	Runs
	IngestionErrors
	FindingReads
	TenantData
	Mutes

	Close() error
}

// Blobs holds the uploaded reports: the intake stores them, the controller
// reads and deletes them, the worker reads them. It exists so that what
// only handles reports cannot touch runs or findings.
type Blobs interface {
	// PutBlob streams r into a new blob (stored in chunks, never wholly in
	// memory) and returns its id, size and SHA-256. On error nothing is kept:
	// what was written is no longer readable when PutBlob returns, and is
	// removed in the background, so the caller's answer never waits for a
	// large partial upload to be deleted.
	PutBlob(ctx context.Context, tenant string, r io.Reader) (Blob, error)
	// OpenBlob streams a blob back, fetching one chunk at a time with ctx.
	OpenBlob(ctx context.Context, tenant, id string) (io.ReadCloser, error)
	// DeleteBlob deletes a complete blob; a missing one is ErrNotFound. The
	// blob cannot be opened once DeleteBlob returns. The space is given back:
	// SQLite removes the chunks in the background, a few at a time, and
	// returns the freed pages to the file system; PostgreSQL's autovacuum
	// makes them reusable.
	DeleteBlob(ctx context.Context, tenant, id string) error
	// PutReport is PutBlob for a report whose accounts the caller finds
	// while r streams: once r reaches EOF, accounts is called and its list
	// is stored with the blob by the statement that completes it, so a
	// complete report always carries its accounts. An error from accounts
	// fails the upload and keeps nothing.
	PutReport(ctx context.Context, tenant string, r io.Reader, accounts func() ([]Account, error)) (Blob, error)
	// BlobAccounts returns the accounts stored with a complete blob, in the
	// order given. recorded is false for a blob stored without them (by
	// PutBlob, or before accounts were recorded). A missing blob, or one of
	// another tenant, is ErrNotFound.
	BlobAccounts(ctx context.Context, tenant, id string) (accounts []Account, recorded bool, err error)
	// RecordBlobAccounts stores the accounts of a complete blob that has
	// none recorded (one stored before they were), so they are found only
	// once. Accounts already recorded are kept as they are. A missing blob,
	// or one of another tenant, is ErrNotFound.
	RecordBlobAccounts(ctx context.Context, tenant, id string, accounts []Account) error
}

// Runs is the write side of an ingestion: its run's progress and outcome,
// fenced by attempt, and the batches of findings, scans and error rows it
// writes. The worker writes through it, and the ingestion controller opens,
// fails and deletes runs; it exists apart from the reads so that only they
// can write findings.
type Runs interface {
	// StartRun begins attempt `attempt` of an ingestion's run. It resets progress
	// and deletes the error rows of earlier attempts, so a retried run produces
	// the same rows as the first (a Job's retried pod restarts the same attempt).
	// An attempt lower than the stored one, or the stored attempt once it has
	// finished, returns ErrStaleAttempt: a finished outcome is never undone.
	StartRun(ctx context.Context, tenant, ingestionID string, attempt int, total int) error
	// UpdateRun records progress. Writes for a superseded attempt or for a
	// finished run return ErrStaleAttempt; an unknown run is ErrNotFound.
	UpdateRun(ctx context.Context, tenant, ingestionID string, attempt int, p Progress) error
	// FinishRun records the outcome once; later calls return ErrStaleAttempt.
	// o.Status must be RunSucceeded or RunFailed (else ErrInvalidArgument).
	// A successful run merges the scans it wrote into the current state
	// (FindingQuery.Latest) in the same transaction: each of their runs (a
	// scan's findings of one account and check) that is the newest of its
	// account and check becomes current, with its deltas and the findings
	// it resolves. A failed one leaves the current state as it was.
	// A failed run gives back the findings it only rewrote: each is
	// attributed again to the ingestion that wrote it before (see
	// Finding.IngestionID), in the same transaction.
	FinishRun(ctx context.Context, tenant, ingestionID string, attempt int, o Outcome) error
	GetRun(ctx context.Context, tenant, ingestionID string) (Run, error)
	// DeleteRun deletes an ingestion's run row and error rows, when the
	// ingestion itself is deleted; its findings and scans stay (they belong
	// to scans). Rows already gone are not an error. A worker still writing
	// for the ingestion then finds no run (ErrNotFound) and stops.
	DeleteRun(ctx context.Context, tenant, ingestionID string) error

	// WriteBatch writes findings, scans and error rows of one ingestion attempt in
	// a single transaction. Findings are upserted on (tenant, scan id, finding
	// uid) and scans on (tenant, scan id), so re-running never duplicates rows.
	// A superseded attempt returns ErrStaleAttempt and writes nothing; without
	// a StartRun it is ErrNotFound. Duplicate keys within a batch are allowed
	// (the last wins). Finding.ID and the IngestionID fields are set by the store (see
	// FindingID); Severity and ProviderType are stored lower-case and
	// StatusCode upper-case so that filters and counts are case-insensitive.
	WriteBatch(ctx context.Context, tenant, ingestionID string, attempt int, b Batch) error

	// ScanAccount returns the provider type and account of the tenant's scan
	// id, or ErrNotFound: a scan covers one account, which the worker holds
	// a report's records to.
	ScanAccount(ctx context.Context, tenant, id string) (providerType, providerUID string, err error)
}

// IngestionErrors reads an ingestion's error rows: what the API lists and
// the controller's metrics count. It exists apart from Runs so that the
// readers of error rows cannot write them.
type IngestionErrors interface {
	// ListIngestionErrors lists the ingestion's error rows, job-level ones
	// (RecordIndex nil) first, then by record index and insertion order, with
	// the total count for pagination.
	ListIngestionErrors(ctx context.Context, tenant, ingestionID string, page Page) ([]IngestionError, int, error)
	// IngestionErrorCodes counts the ingestion's error rows by code: what
	// the manager's metrics add once an ingestion ends.
	IngestionErrorCodes(ctx context.Context, tenant, ingestionID string) (map[string]int, error)
}

// FindingReads reads findings and scans for the APIs: listings, counts and
// single rows, every one scoped by tenant. It exists so that the servers
// that answer reads hold no write.
type FindingReads interface {
	// ListFindings returns one page and the number of matching findings; an
	// unknown sort key is ErrInvalidArgument. The number is exact, read from
	// the finding summary when q.Summarized() or from the summary by scan
	// when q.ScanSummarized(), else counted from the findings, at most
	// q.CountLimit+1 of them when CountLimit is set. With q.After set, the page is
	// the q.Page.Size findings that follow that key in the sort order
	// (keyset pagination: no row before it is read) and q.Page.Number is
	// ignored.
	ListFindings(ctx context.Context, tenant string, q FindingQuery) ([]Finding, int, error)
	GetFinding(ctx context.Context, tenant, id string) (Finding, error)
	// FindingObservations lists the observations of a finding across
	// scans: the tenant's findings with q's uid and account, one per scan
	// that reported it, newest event time first (then newest insertion),
	// one page of them and their number. It reads the uid's entries of an
	// index on (tenant, uid), so it costs the finding's scans, not the
	// tenant's findings.
	FindingObservations(ctx context.Context, tenant string, q ObservationQuery) ([]Observation, int, error)
	// ListScans lists newest first (inserted_at descending).
	ListScans(ctx context.Context, tenant string, q ScanQuery) ([]Scan, int, error)
	// FindingCounts counts the findings matching q (its filters; sort and
	// page are ignored) grouped by one or more of the CountDimensions, and
	// returns the groups ordered by their values. When q.Summarized() it
	// reads the finding summary, and when q.ScanSummarized() the summary by
	// scan, whose sizes are numbers of groups, not of findings; otherwise it
	// groups the matching findings, the first
	// q.CountLimit+1 found when q.CountLimit is set. An unknown or repeated
	// dimension, or none, is ErrInvalidArgument.
	FindingCounts(ctx context.Context, tenant string, q FindingQuery, by []string) ([]FindingGroup, error)
}

// TenantData removes a deleted tenant's rows. It exists so that the tenant
// controller, which needs nothing else of the store, holds that alone.
type TenantData interface {
	// DeleteTenantData deletes every row of a tenant: findings, scans, runs,
	// error rows and blobs, in one transaction. A tenant without rows is not
	// an error.
	DeleteTenantData(ctx context.Context, tenant string) error
}

// SearchIndexFlusher is implemented by a store whose search index defers
// new entries to a list every search reads whole (PostgreSQL's GIN pending
// list). The worker flushes it when an ingestion has succeeded, so that
// searches after an ingestion cost what they did before it.
type SearchIndexFlusher interface {
	FlushSearchIndex(ctx context.Context) error
}

// The read structures a store's WriteBatch may maintain in its own
// statements, by the names StructureLeaver takes.
const (
	StructureSearch      = "search"
	StructureSummary     = "summary"
	StructureScanSummary = "scan summary"
	StructureSpans       = "spans"
)

// StructureLeaver is implemented by a store whose WriteBatch maintains read
// structures in its own statements rather than by triggers. hack/bench's
// leave-out mode calls LeaveOut on a store opened for that alone, to
// measure what each structure costs ingestion; the reads that need a
// structure left out are then wrong, so nothing else may call it.
type StructureLeaver interface {
	LeaveOut(structures ...string)
}

// Sessions records the sign-ins that were ended (signed out) before their
// tokens expire, in the store every replica shares, so that each replica
// refuses their tokens. Both engines implement it.
type Sessions interface {
	// EndSession records that session id has ended. until is when its last
	// token would have expired anyway; the record may be pruned after it.
	EndSession(ctx context.Context, id string, until time.Time) error
	// SessionEnded reports whether session id has ended.
	SessionEnded(ctx context.Context, id string) (bool, error)
}

// Janitor is the housekeeping the manager runs periodically, away from the
// upload and ingestion paths. Both engines implement it.
type Janitor interface {
	// SweepIncompleteBlobs deletes the uploads that never completed and wrote
	// no chunk since before (a process killed mid-upload leaves them), and
	// returns how many it deleted. An upload in progress refreshes its
	// timestamp every minute, so a cutoff a few minutes old never removes a
	// live one; one that is removed fails instead of completing.
	SweepIncompleteBlobs(ctx context.Context, before time.Time) (int, error)
}

// Blob describes stored upload content.
type Blob struct {
	ID     string
	Size   int64
	SHA256 string // lowercase hex
}

// Account is a billable account a report names: its provider type and uid.
type Account struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// RunStatus is the worker's view of a run; the controller maps it to a phase.
type RunStatus string

const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
)

// Progress is what a worker has handled so far.
type Progress struct {
	Processed int // valid + invalid records handled
	Invalid   int
}

// Outcome is how a run ended.
type Outcome struct {
	Status RunStatus // RunSucceeded or RunFailed
	Progress
	Message string // why it failed; empty on success
}

// Run is the stored state of an ingestion's run.
type Run struct {
	IngestionID string
	Attempt     int
	Status      RunStatus
	Total       int
	Progress
	Message    string
	StartedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// Batch is one transaction's worth of worker output.
type Batch struct {
	Findings []Finding
	Scans    []Scan
	Errors   []IngestionError
}

// IngestionError explains one rejected record (RecordIndex set) or the whole
// job (RecordIndex nil).
type IngestionError struct {
	ID          int64 // assigned by the store; ordering key
	RecordIndex *int
	FindingUID  string
	Code        string
	Detail      string
	Pointer     string // JSON Pointer inside the record
	Value       string // offending value, at most 100 characters
}

// Finding is one stored Detection Finding. Raw is the full OCSF record as
// uploaded; the other fields are indexed copies for filtering.
//
// IngestionID is the last ingestion that wrote the finding and did not fail.
// A failed ingestion keeps only the findings no other ingestion had written
// before it; those it rewrote go back to their previous ingestion (their
// fields keep the values it wrote: a finding has one current state). While
// an ingestion runs, the findings it has written so far carry its id.
type Finding struct {
	ID           string // stable id: derived from tenant, scan and uid
	UID          string // finding_info.uid
	ScanID       string
	IngestionID  string // see the type's comment
	CheckID      string // metadata.event_code
	Title        string
	Severity     string // lower-case label: informational, low, medium, high, critical, ...
	SeverityID   int
	StatusCode   string // e.g. PASS, FAIL, MANUAL
	Status       string
	Region       string
	ProviderType string
	ProviderUID  string
	ResourceUID  string
	Time         time.Time
	Raw          []byte
	InsertedAt   time.Time
	UpdatedAt    time.Time

	// FirstSeenAt and Delta are set in listings of the current state
	// (FindingQuery.Latest or Delta) only. FirstSeenAt is the event time
	// of the uid's first finding for the account; Delta is "new" (never
	// seen for the account before), "changed" (its status differs from
	// the run its run replaced), "resolved" (in a listing of the resolved
	// findings) or empty.
	FirstSeenAt *time.Time
	Delta       string

	// Mute is the finding's mark when a mute rule matches it (set by
	// ListFindings and GetFinding), nil otherwise.
	Mute *MuteMark
}

// ObservationQuery names a finding across scans: its uid within an
// account. A uid is only one finding within its account; a report may
// reuse a placeholder uid for another account's resource, which is not
// the same finding.
type ObservationQuery struct {
	UID          string
	ProviderType string
	ProviderUID  string
	Page         Page // Number from 1; Size 0 means 10
}

// Observation is one scan's finding of a finding's uid: when, in which
// scan and ingestion, and what the check found then.
type Observation struct {
	ID          string // the finding's id in that scan
	ScanID      string
	IngestionID string
	StatusCode  string
	Status      string
	Severity    string
	SeverityID  int
	Time        time.Time
	InsertedAt  time.Time
}

// Scan groups findings produced by one scanner run.
type Scan struct {
	ID           string // unmapped.scan_id, or derived per ingestion and provider
	ProviderType string
	ProviderUID  string
	Trigger      string // "imported"
	IngestionID  string // last ingestion that wrote to it
	FindingCount int    // computed on read
	InsertedAt   time.Time
	UpdatedAt    time.Time
	// ScannedAt is when the scanner ran, as the scan's findings record it:
	// the earliest event time (OCSF time) among them. Zero before the scan
	// has a finding.
	ScannedAt time.Time
	// Failing counts the scan's findings of status code FAIL by severity
	// (lower-cased); severities without one are left out. Read from the
	// finding summary by scan, so it costs the scan's groups, not its
	// findings.
	Failing map[string]int
}

// Page selects a page; Number starts at 1.
type Page struct {
	Number int
	Size   int
}

// FindingQuery filters findings. Empty fields do not filter.
type FindingQuery struct {
	Severity     []string
	StatusCode   []string
	ProviderType []string
	ProviderUID  string
	CheckID      string
	Region       string
	ScanID       string
	IngestionID  string
	// Search is a substring of uid, title, check id or resource uid
	// (case-insensitive for ASCII letters on SQLite, as LIKE is; by the
	// database's case rules on PostgreSQL, as ILIKE is). From
	// MinSearchLength characters on it is looked up in a trigram index;
	// a shorter one reads every finding the other filters leave, which
	// is why the API refuses it.
	Search string
	// Latest keeps only the current state: for each account and check,
	// the findings of the newest run of that check (by its findings' event
	// time, then upload order; see FinishRun).
	Latest bool
	// Delta keeps the current findings that are "new" or "changed", or
	// lists the "resolved" ones instead: those failing in the run their
	// check's current run replaced, and now passing or gone (Latest is
	// then implied and ignored).
	Delta string
	Sort  []string // column names, "-" prefix for descending: time, severity_id, inserted_at, check_id, uid; default -severity_id, uid
	Page  Page     // Number from 1; Size 0 means 10
	// After continues a listing after this position (see ListFindings).
	After *FindingKey
	// Muted keeps the findings a mute rule marks (MutedOnly), leaves them
	// out (MutedExcluded) or lists both (MutedAny, the zero value). Counts
	// stay exact: a summary's count less the marked findings', which are
	// read through the marks.
	Muted string
	// CountLimit, when above 0, bounds the counting that ListFindings and
	// FindingCounts do when no summary can answer (see Summarized and
	// ScanSummarized):
	// they stop at CountLimit+1 matching findings, so a count above
	// CountLimit is a lower bound, and so is each group of counts whose
	// sum is. 0 counts every match.
	CountLimit int
}

// Summarized reports whether q filters on summary dimensions alone
// (CountDimensions: no scan, ingestion or search filter, and not only the
// latest scans), so that its
// counts come from the finding summary, which the stores keep in step with
// the findings in the same transactions that write them: exact, and read
// in time proportional to the number of groups rather than of findings.
func (q FindingQuery) Summarized() bool {
	return q.ScanID == "" && q.IngestionID == "" && q.Search == "" && !q.Latest && q.Delta == ""
}

// ScanSummarized reports whether q's counts come from the finding summary
// by scan: q names a scan or asks for the latest scans, and otherwise
// filters on summary dimensions alone. That summary is kept as the other
// is, per scan, so counts of a scan or of the current state cost their
// groups rather than their findings.
func (q FindingQuery) ScanSummarized() bool {
	return (q.ScanID != "" || q.Latest) && q.IngestionID == "" && q.Search == "" && q.Delta == ""
}

// MinSearchLength is the shortest FindingQuery.Search, in characters
// (Unicode code points), that a trigram index can answer: an index of
// three-character sequences holds nothing that locates a shorter text.
const MinSearchLength = 3

// FindingKey is a finding's position in any sort order ListFindings
// supports: its sort columns and its id, which breaks every tie.
type FindingKey struct {
	Time       time.Time
	InsertedAt time.Time
	SeverityID int
	CheckID    string
	UID        string
	ID         string
}

// KeyOf is the position of f.
func KeyOf(f *Finding) FindingKey {
	return FindingKey{Time: f.Time, InsertedAt: f.InsertedAt, SeverityID: f.SeverityID, CheckID: f.CheckID, UID: f.UID, ID: f.ID}
}

// CountDimensions are the columns FindingCounts can group by: the
// low-cardinality ones the finding summary (and an index) covers.
var CountDimensions = []string{"severity", "status_code", "provider_type", "provider_uid", "check_id", "region"}

// FindingGroup is one group of FindingCounts: Values holds the group's value
// of each requested dimension, in the order requested.
type FindingGroup struct {
	Values []string
	Count  int
}

// ScanQuery filters scans.
type ScanQuery struct {
	ProviderType string
	ProviderUID  string
	// IngestionID selects the scans an ingestion last wrote to.
	IngestionID string
	Page        Page
}
