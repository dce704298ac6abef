package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// TestSummarizeCountsEachFindingOnce holds a batch's groups to a count of
// its findings one by one, each group once and in key order (the order
// concurrent batches lock summary rows in), and a scan's span to the
// least and greatest of its findings' times.
func TestSummarizeCountsEachFindingOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 1))
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	var fs []store.Finding
	for i := range 500 {
		fs = append(fs, store.Finding{
			UID: fmt.Sprint(i), ScanID: pick("s-1", "s-2", "s-3"), StatusCode: pick("FAIL", "PASS"),
			ProviderType: "aws", ProviderUID: pick("1", "2"), Severity: pick("high", "low"),
			Region: pick("eu-west-1", "us-east-1"), CheckID: pick("a", "b", "c"),
			Time:       base.Add(time.Duration(r.IntN(1000)) * time.Second),
			InsertedAt: base.Add(time.Duration(r.IntN(3)) * time.Hour),
		})
	}
	for _, byScan := range []bool{true, false} {
		want := map[SummaryGroup]int{}
		for _, f := range fs {
			k := SummaryGroup{StatusCode: f.StatusCode, ProviderType: f.ProviderType, ProviderUID: f.ProviderUID,
				Severity: f.Severity, Region: f.Region, CheckID: f.CheckID}
			if byScan {
				k.ScanID = f.ScanID
			}
			want[k]++
		}
		got := SummarizeByTenant(fs)
		if byScan {
			got = SummarizeByScan(fs)
		}
		if !slices.IsSortedFunc(got, SummaryGroup.compare) {
			t.Errorf("by scan %v: groups not in key order", byScan)
		}
		total := 0
		for _, g := range got {
			n := g.N
			g.N = 0
			if want[g] != n {
				t.Errorf("by scan %v: group %+v counts %d, want %d", byScan, g, n, want[g])
			}
			delete(want, g)
			total += n
		}
		if len(want) > 0 || total != len(fs) {
			t.Errorf("by scan %v: %d groups missing, %d findings counted of %d", byScan, len(want), total, len(fs))
		}
	}
	spans := ScanSpans(fs)
	if len(spans) != 3 || !slices.IsSortedFunc(spans, func(a, b ScanSpan) int { return strings.Compare(a.ScanID, b.ScanID) }) {
		t.Fatalf("spans %v: want one per scan, in scan order", spans)
	}
	for _, s := range spans {
		for _, f := range fs {
			if f.ScanID != s.ScanID {
				continue
			}
			if f.Time.Before(s.FirstEvent) || f.Time.After(s.LastEvent) || f.InsertedAt.Before(s.FirstInserted) || f.InsertedAt.After(s.LastInserted) {
				t.Fatalf("finding %s lies outside its scan's span %+v", f.UID, s)
			}
		}
		var first, last bool
		for _, f := range fs {
			if f.ScanID == s.ScanID {
				first = first || f.Time.Equal(s.FirstEvent)
				last = last || f.Time.Equal(s.LastEvent)
			}
		}
		if !first || !last {
			t.Errorf("span %+v is wider than its findings' event times", s)
		}
	}
}
