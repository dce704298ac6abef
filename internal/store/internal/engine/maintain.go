package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// SummaryGroup is one group of the finding summaries (SummaryTable, and
// ScanSummaryTable with ScanID) and the number of a batch's new findings
// that fall in it.
type SummaryGroup struct {
	ScanID                                                           string
	StatusCode, ProviderType, ProviderUID, Severity, Region, CheckID string
	N                                                                int
}

func (g SummaryGroup) compare(o SummaryGroup) int {
	return cmp.Or(cmp.Compare(g.ScanID, o.ScanID), cmp.Compare(g.StatusCode, o.StatusCode),
		cmp.Compare(g.ProviderType, o.ProviderType), cmp.Compare(g.ProviderUID, o.ProviderUID),
		cmp.Compare(g.Severity, o.Severity), cmp.Compare(g.Region, o.Region), cmp.Compare(g.CheckID, o.CheckID))
}

// SummarizeByScan groups findings (a prepared batch's, so normalised as
// stored) by scan and the summary's dimensions, in the summary by scan's
// key order: a batch then adds to each group it touches once, and
// concurrent batches lock the groups they share in one order.
func SummarizeByScan(fs []store.Finding) []SummaryGroup {
	return summarize(fs, true)
}

// SummarizeByTenant groups findings by the summary's dimensions (ScanID
// empty), in the tenant summary's key order.
func SummarizeByTenant(fs []store.Finding) []SummaryGroup {
	return summarize(fs, false)
}

func summarize(fs []store.Finding, byScan bool) []SummaryGroup {
	index := make(map[SummaryGroup]int, 64)
	var out []SummaryGroup
	for i := range fs {
		f := &fs[i]
		k := SummaryGroup{StatusCode: f.StatusCode, ProviderType: f.ProviderType, ProviderUID: f.ProviderUID,
			Severity: f.Severity, Region: f.Region, CheckID: f.CheckID}
		if byScan {
			k.ScanID = f.ScanID
		}
		if j, ok := index[k]; ok {
			out[j].N++
			continue
		}
		index[k] = len(out)
		k.N = 1
		out = append(out, k)
	}
	slices.SortFunc(out, SummaryGroup.compare)
	return out
}

// ScanSpan bounds the insertion and event times of a batch's findings of
// one scan (ScanBoundsTable).
type ScanSpan struct {
	ScanID                      string
	FirstInserted, LastInserted time.Time
	FirstEvent, LastEvent       time.Time
}

// ScanSpans bounds a batch's findings scan by scan, in scan order.
func ScanSpans(fs []store.Finding) []ScanSpan {
	index := map[string]int{}
	var out []ScanSpan
	for i := range fs {
		f := &fs[i]
		j, ok := index[f.ScanID]
		if !ok {
			index[f.ScanID] = len(out)
			out = append(out, ScanSpan{ScanID: f.ScanID, FirstInserted: f.InsertedAt, LastInserted: f.InsertedAt,
				FirstEvent: f.Time, LastEvent: f.Time})
			continue
		}
		s := &out[j]
		if f.InsertedAt.Before(s.FirstInserted) {
			s.FirstInserted = f.InsertedAt
		}
		if f.InsertedAt.After(s.LastInserted) {
			s.LastInserted = f.InsertedAt
		}
		if f.Time.Before(s.FirstEvent) {
			s.FirstEvent = f.Time
		}
		if f.Time.After(s.LastEvent) {
			s.LastEvent = f.Time
		}
	}
	slices.SortFunc(out, func(a, b ScanSpan) int { return cmp.Compare(a.ScanID, b.ScanID) })
	return out
}
