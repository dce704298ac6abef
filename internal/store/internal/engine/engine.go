// Package engine holds what the SQLite and PostgreSQL stores share: batch
// preparation, the SQL of finding queries and the blob chunking rules. Keeping
// it in one place is what makes the two engines answer the conformance suite
// identically.
//
// The files follow the concerns: batch.go prepares what WriteBatch and
// FinishRun write; dialect.go is what differs between the engines' SQL and
// the bind parameters; filters.go, search.go, order.go, pages.go and
// counts.go render a finding query's conditions, its text search, its
// order, its pages and its counts; latest_spans.go and walk.go choose how
// the latest findings' pages and common searches are read; maintain.go
// groups a batch for the summaries; accounts.go stores a report's
// accounts; chunks.go copies an upload into a blob's chunks; discard.go
// removes failed uploads in the background.
package engine

import (
	"fmt"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// ChunkSize bounds the memory a blob upload or download needs, and keeps each
// chunk well below both engines' row size limits.
const ChunkSize = 1 << 20

// IncompleteBlobTTL is how long an unfinished upload may go without writing
// a chunk before Open deletes it. Uploads that fail are removed at once, and
// the manager sweeps stalled ones far sooner (store.Janitor); this only
// catches what a process that died mid-upload left while no manager ran.
const IncompleteBlobTTL = 24 * time.Hour

// TouchInterval is how often an upload in progress refreshes its blob's
// touched_at: often enough for a sweep measured in minutes, rarely enough to
// cost nothing next to the chunks themselves.
const TouchInterval = time.Minute

// DefaultPageSize applies when Page.Size is 0, matching the REST API default.
const DefaultPageSize = 10

// Now is the store's clock: UTC and truncated to microseconds, the precision
// both engines keep, so that what a caller is given equals what it reads back.
func Now() time.Time { return Time(time.Now()) }

// Time normalises a timestamp the way both engines store it.
func Time(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Invalid wraps store.ErrInvalidArgument with a message.
func Invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalidArgument, fmt.Sprintf(format, a...))
}

// Statement is SQL text with its bind parameters.
type Statement struct {
	SQL  string
	Args []any
}

// Rows is what both drivers' result sets offer: database/sql's *sql.Rows
// and pgx's Rows alike.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// TenantTables are the tables DeleteTenantData empties of a tenant's
// rows, children before parents; blob chunks go with their blobs (ON
// DELETE CASCADE). The findings' delete leaves rows of their own to the
// tables derived from them (the summaries, counting zero; the scans'
// bounds, which only widen) and to latest_scans, which names accounts
// and scans: they go by name, after the findings.
var TenantTables = append([]string{"finding_mutes", "mute_rules", "findings", SummaryTable, ScanSummaryTable, ScanBoundsTable, "latest_scans", "scans", "ingestion_errors", "runs", "blobs"}, CurrentTables...)
