package engine

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// Batch is a store.Batch checked and normalised for writing.
type Batch struct {
	Findings []store.Finding
	Scans    []store.Scan
	Errors   []store.IngestionError
}

// PrepareBatch validates b, derives ids, normalises the indexed columns and
// drops duplicates (the last occurrence wins), because an upsert statement
// may not touch the same row twice.
func PrepareBatch(tenant, ingestionID string, b store.Batch, now time.Time) (Batch, error) {
	out := Batch{Errors: b.Errors}
	if len(b.Findings) > 0 {
		seen := make(map[string]int, len(b.Findings))
		out.Findings = make([]store.Finding, 0, len(b.Findings))
		for i, f := range b.Findings {
			if f.UID == "" || f.ScanID == "" {
				return Batch{}, Invalid("finding %d: uid and scan id are required", i)
			}
			f.ID = store.FindingID(tenant, f.ScanID, f.UID)
			f.IngestionID = ingestionID
			// Ingestion settled the pair already; settling it here too holds
			// every writer to the one severity the store sorts and counts by.
			sev, sid, _ := ocsf.Severity(f.Severity, int64(f.SeverityID))
			f.Severity, f.SeverityID = sev, int(sid)
			f.StatusCode = strings.ToUpper(f.StatusCode)
			f.ProviderType = strings.ToLower(f.ProviderType)
			f.Time = Time(f.Time)
			if f.Raw == nil {
				f.Raw = []byte{}
			}
			f.InsertedAt, f.UpdatedAt = now, now
			if j, ok := seen[f.ID]; ok {
				out.Findings[j] = f
				continue
			}
			seen[f.ID] = len(out.Findings)
			out.Findings = append(out.Findings, f)
		}
		// A fixed row order makes concurrent batches that overlap lock rows in
		// the same order, so they wait for each other instead of deadlocking.
		// The order is the id's (a function of the natural key), which is also
		// the primary key's: inserts walk it in one direction. A permutation
		// is sorted rather than the findings, which are large to swap.
		order := make([]int, len(out.Findings))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(i, j int) int { return strings.Compare(out.Findings[i].ID, out.Findings[j].ID) })
		sorted := make([]store.Finding, len(order))
		for i, j := range order {
			sorted[i] = out.Findings[j]
		}
		out.Findings = sorted
	}
	if len(b.Scans) > 0 {
		seen := make(map[string]int, len(b.Scans))
		for i, s := range b.Scans {
			if s.ID == "" {
				return Batch{}, Invalid("scan %d: id is required", i)
			}
			s.IngestionID = ingestionID
			s.ProviderType = strings.ToLower(s.ProviderType)
			s.FindingCount = 0
			s.InsertedAt, s.UpdatedAt = now, now
			if j, ok := seen[s.ID]; ok {
				out.Scans[j] = s
				continue
			}
			seen[s.ID] = len(out.Scans)
			out.Scans = append(out.Scans, s)
		}
		sort.Slice(out.Scans, func(i, j int) bool { return out.Scans[i].ID < out.Scans[j].ID })
	}
	for i, e := range out.Errors {
		if e.Code == "" {
			return Batch{}, Invalid("error %d: code is required", i)
		}
	}
	return out, nil
}

// ValidOutcome rejects outcomes that would leave a finished run looking
// unfinished.
func ValidOutcome(o store.Outcome) error {
	if o.Status != store.RunSucceeded && o.Status != store.RunFailed {
		return Invalid("run outcome status %q: want %q or %q", o.Status, store.RunSucceeded, store.RunFailed)
	}
	return nil
}
